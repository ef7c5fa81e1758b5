// test_output_run.cpp — a run's outputs are one transaction (OutputRun,
// output_file.h): every file appears when the run ends well, none when it
// fails or is interrupted, and no temporary file is left either way. The
// chapters' own runs (a full device as the last output, SIGINT halfway) are
// in test_output_flags.cpp.
#include "support/catch.h"

#include <string>
#include <vector>

#include "dpt/check.h"
#include "dpt/options.h"
#include "dpt/output_file.h"
#include "dpt/report.h"
#include "support/folder.h"

using namespace dpt;
using dpt_test::Folder;
using dpt_test::read_file;
using dpt_test::write_file;

namespace {
using Names = std::vector<std::string>;
}  // namespace

TEST_CASE("output run: committed files wait beside their targets until publish, then all appear", "[output]") {
  Folder dir("output_run_publish");
  write_file(dir / "plot.svg", "old plot");
  OutputRun run;
  write_output_file(dir / "plot.svg", "new plot");
  write_output_file(dir / "trace.json", "new trace");
  CHECK(read_file(dir / "plot.svg") == "old plot");  // not yet: the run has not ended
  CHECK(dir.entries().size() == 3);                   // plot.svg and two waiting temporary files
  run.publish();
  CHECK(read_file(dir / "plot.svg") == "new plot");
  CHECK(read_file(dir / "trace.json") == "new trace");
  CHECK(dir.entries() == Names{"plot.svg", "trace.json"});
}

TEST_CASE("output run: a run that ends without publish leaves every target as it was, no temporary file", "[output]") {
  Folder dir("output_run_discard");
  write_file(dir / "plot.svg", "old plot");
  try {
    OutputRun run;
    write_output_file(dir / "plot.svg", "new plot");
    write_output_file(dir / "metrics.jsonl", "{}\n");
    DPT_FAIL("the last output could not be written");
  } catch (const Error&) {
  }
  CHECK(read_file(dir / "plot.svg") == "old plot");
  CHECK(dir.entries() == Names{"plot.svg"});
}

TEST_CASE("output run: a target written twice keeps the newer bytes and one temporary file", "[output]") {
  Folder dir("output_run_twice");
  OutputRun run;
  write_output_file(dir / "report.json", "first");
  write_output_file(dir / "report.json", "second");
  CHECK(dir.entries().size() == 1);  // the first waiting file is gone
  run.publish();
  CHECK(read_file(dir / "report.json") == "second");
  CHECK(dir.entries() == Names{"report.json"});
}

TEST_CASE("output run: metrics extended after training start from this run's lines, not the old file's", "[output]") {
  Folder dir("output_run_metrics");
  write_file(dir / "m.jsonl", "{\"step\":0,\"loss\":9}\n");  // an earlier run's
  OutputRun run;
  {
    MetricsWriter held_out(dir / "m.jsonl", /*append=*/true);  // nothing written by this run yet
    held_out.write(3, {{"accuracy", 0.5}});
  }
  CHECK(read_file(dir / "m.jsonl") == "{\"step\":0,\"loss\":9}\n");
  {
    MetricsWriter training(dir / "m.jsonl");
    training.write(0, {{"loss", 1.0}});
  }
  {
    MetricsWriter held_out(dir / "m.jsonl", /*append=*/true);
    held_out.write(1, {{"accuracy", 0.5}});
  }
  run.publish();
  CHECK(read_file(dir / "m.jsonl") == "{\"loss\":1.0,\"step\":0}\n{\"accuracy\":0.5,\"step\":1}\n");
}

TEST_CASE("output run: a checkpoint (PublishNow) is on disk at once, while the run's other outputs still wait", "[output]") {
  Folder dir("output_run_now");
  OutputRun run;
  {
    PublishNow now;
    write_output_file(dir / "COMPLETE", "step 4");
  }
  write_output_file(dir / "plot.svg", "plot");
  CHECK(read_file(dir / "COMPLETE") == "step 4");
  CHECK(dir.entries().size() == 2);  // COMPLETE and the plot's waiting file
}

TEST_CASE("output run: run_guarded publishes a body that returns and nothing of one that throws", "[output]") {
  Folder dir("output_run_guarded");
  write_file(dir / "w.safetensors", "old weights");
  int code = run_guarded("prog", [&] {
    write_output_file(dir / "plot.svg", "plot");
    write_output_file(dir / "w.safetensors", std::string(64, 'w'));
    DPT_FAIL("--save-data: no space left on device");
  });
  CHECK(code == 1);
  CHECK(dir.entries() == Names{"w.safetensors"});
  CHECK(read_file(dir / "w.safetensors") == "old weights");
  code = run_guarded("prog", [&] {
    write_output_file(dir / "plot.svg", "plot");
    write_output_file(dir / "w.safetensors", "new weights");
  });
  CHECK(code == 0);
  CHECK(dir.entries() == Names{"plot.svg", "w.safetensors"});
  CHECK(read_file(dir / "w.safetensors") == "new weights");
}
