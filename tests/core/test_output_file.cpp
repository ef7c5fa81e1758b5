// test_output_file.cpp — the output policy on real files: regular files are
// replaced atomically, character devices written in place, and symlinks,
// FIFOs and directories refused without being touched. Every writer that
// goes through it (safetensors, metrics, trace) is exercised at least once.
//
// Run as root here, the kernel skips permission checks (a read-only directory
// is writable to root), so "unwritable directory" is tested with what root
// cannot bypass: a parent that is a regular file, and a missing directory.
// The permission case runs only when the tests are not root.
#include "support/catch.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include "dpt/check.h"
#include "dpt/checkpoint.h"
#include "dpt/nn.h"
#include "dpt/output_file.h"
#include "dpt/report.h"
#include "dpt/trace.h"
#include "support/folder.h"
#include "support/run_program.h"

using namespace dpt;

namespace {
using dpt_test::read_file;
using dpt_test::write_file;
using TempDir = dpt_test::Folder;  // a fresh empty directory; its entries are what the writer left

mode_t kind_of(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & S_IFMT;
}

std::vector<NamedTensor> small_weights() {
  static Rng rng(7);
  static MLP model({3, 2}, Device::host(), rng);
  return model.named_parameters();
}
}  // namespace

// ----------------------------------------------------------------------------
// regular files: atomic

TEST_CASE("a new file is created and an existing one replaced whole, with no temporary file left", "[output]") {
  TempDir dir("out_regular");
  std::string path = dir / "w.txt";
  write_output_file(path, "first");
  CHECK(read_file(path) == "first");
  ::chmod(path.c_str(), 0600);
  write_output_file(path, "second, longer");
  CHECK(read_file(path) == "second, longer");
  CHECK(dir.entries() == std::vector<std::string>{"w.txt"});
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);  // a replaced file keeps its permissions
}

TEST_CASE("a write that fails halfway leaves the old file intact and no temporary file", "[output]") {
  TempDir dir("out_fail");
  std::string path = dir / "w.safetensors";
  save_weights(path, small_weights());
  std::string before = read_file(path);
  // RLIMIT_FSIZE makes write(2) fail with EFBIG past 100 bytes: a real failure
  // in the middle of the temporary file, even for root.
  struct rlimit old_limit;
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit tight = old_limit;
  tight.rlim_cur = 100;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &tight) == 0);
  std::string error;
  try {
    write_output_file(path, std::string(1000, 'x'));
  } catch (const Error& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  CHECK_THAT(error, contains_text("writing '" + path + "' failed"));
  CHECK(read_file(path) == before);
  CHECK(dir.entries() == std::vector<std::string>{"w.safetensors"});
}

// ----------------------------------------------------------------------------
// character devices: in place, errors reported, never replaced

TEST_CASE("/dev/full: the write fails with 'no space' and /dev/full stays a device", "[output]") {
  REQUIRE(kind_of("/dev/full") == S_IFCHR);
  CHECK(output_path_problem("/dev/full").empty());  // a device dpt may write into
  CHECK_THROWS_WITH(save_weights("/dev/full", small_weights()),
                    contains_text("'/dev/full'") && contains_text("No space left on device"));
  CHECK_THROWS_WITH(write_chrome_trace("/dev/full", {"[]"}), contains_text("No space left on device"));
  CHECK(kind_of("/dev/full") == S_IFCHR);
}

TEST_CASE("/dev/null takes a checkpoint and metrics and stays a device", "[output]") {
  save_weights("/dev/null", small_weights());
  MetricsWriter metrics("/dev/null");
  metrics.write(0, {{"loss", 1.0}});
  CHECK(kind_of("/dev/null") == S_IFCHR);
}

// ----------------------------------------------------------------------------
// refused: symlinks, FIFOs, directories — untouched

TEST_CASE("a symlink is refused, and neither the link nor its target changes", "[output]") {
  TempDir dir("out_link");
  std::string target = dir / "precious.txt", link = dir / "link.safetensors";
  write_file(target, "precious");
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  CHECK_THAT(output_path_problem(link), contains_text("symbolic link"));
  CHECK_THROWS_WITH(save_weights(link, small_weights()), contains_text("symbolic link"));
  CHECK_THROWS_WITH(MetricsWriter(link), contains_text("symbolic link"));
  CHECK_THROWS_WITH(write_chrome_trace(link, {"[]"}), contains_text("symbolic link"));
  CHECK(kind_of(link) == S_IFLNK);
  CHECK(read_file(target) == "precious");
  // A dangling link too: writing would create a file wherever it points.
  std::string dangling = dir / "dangling";
  REQUIRE(::symlink((dir / "nowhere").c_str(), dangling.c_str()) == 0);
  CHECK_THROWS_WITH(save_weights(dangling, small_weights()), contains_text("symbolic link"));
  CHECK(dir.entries() == std::vector<std::string>{"dangling", "link.safetensors", "precious.txt"});
}

TEST_CASE("a FIFO is refused at once (no hang) and stays a FIFO", "[output]") {
  TempDir dir("out_fifo");
  std::string fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(output_path_problem(fifo), contains_text("FIFO"));
  CHECK_THROWS_WITH(save_weights(fifo, small_weights()), contains_text("FIFO"));
  CHECK_THROWS_WITH(MetricsWriter(fifo), contains_text("FIFO"));
  CHECK(kind_of(fifo) == S_IFIFO);
  CHECK(dir.entries() == std::vector<std::string>{"pipe"});
}

TEST_CASE("a directory, a missing directory and a file used as a directory are refused", "[output]") {
  TempDir dir("out_dir");
  CHECK_THAT(output_path_problem(dir.path), contains_text("is a directory"));
  CHECK_THAT(output_path_problem(dir.path + "/"), contains_text("names a directory"));
  CHECK_THAT(output_path_problem(dir / "no/such/w.safetensors"), contains_text("does not exist") ||
                                                                    contains_text("No such file"));
  write_file(dir / "plain", "x");
  CHECK_THAT(output_path_problem(dir / "plain/w.safetensors"), contains_text("Not a directory") ||
                                                                  contains_text("not a directory"));
  CHECK_THAT(output_path_problem(""), contains_text("empty"));
  CHECK_THROWS_WITH(check_output_path("--save-weights", dir / "no/such/w.safetensors"),
                    contains_text("--save-weights: ") && contains_text(dir.path + "/no/such"));
  CHECK(output_path_problem(dir / "fresh.safetensors").empty());
}

TEST_CASE("a read-only directory is refused (when not root: root bypasses permissions)", "[output]") {
  TempDir dir("out_readonly");
  REQUIRE(::chmod(dir.path.c_str(), 0500) == 0);
  if (::geteuid() == 0) {
    // Root may write into a 0500 directory; the check must agree with the kernel.
    CHECK(output_path_problem(dir / "w.safetensors").empty());
  } else {
    CHECK_THAT(output_path_problem(dir / "w.safetensors"), contains_text("cannot create files"));
    CHECK_THROWS(save_weights(dir / "w.safetensors", small_weights()));
  }
}

// ----------------------------------------------------------------------------
// metrics: a document like every output, written to a temporary file that can be watched

TEST_CASE("metrics replace an old file's content when the writer is done, and can be watched meanwhile", "[output]") {
  TempDir dir("out_metrics");
  std::string path = dir / "m.jsonl";
  write_file(path, std::string(500, 'o') + "\n");
  {
    MetricsWriter metrics(path);
    metrics.write(0, {{"loss", 2.5}});
    std::vector<std::string> names = dir.entries();  // m.jsonl and m.jsonl.tmp.XXXXXX, the one being written
    REQUIRE(names.size() == 2);
    auto lines = dpt_test::read_jsonl(dir / names[1]);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0]["loss"] == 2.5);
    CHECK(read_file(path) == std::string(500, 'o') + "\n");  // the old file, until the writer is done
    metrics.write(1, {{"loss", std::nan("")}});
  }
  auto lines = dpt_test::read_jsonl(path);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1]["loss"].is_null());
  CHECK(dir.entries() == std::vector<std::string>{"m.jsonl"});
}
