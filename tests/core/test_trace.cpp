// test_trace.cpp — the Chrome trace file and the per-category seconds.
//
// The file is checked by parsing it with nlohmann::json (an independent JSON
// parser), not by reading it back through the code that wrote it.
#include "support/catch.h"
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unistd.h>

#include "dpt/launch.h"
#include "dpt/trace.h"
#include "support/run_program.h"  // temp_path

using dpt::Context;
using nlohmann::json;

namespace {

using dpt_test::temp_path;

json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return json::parse(in);  // throws (fails the test) on invalid JSON
}

// The complete ("X") events of track `tid` named `name`.
std::vector<json> spans(const json& doc, int tid, const std::string& name) {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == tid && e["name"] == name) out.push_back(e);
  return out;
}

// The name metadata of track `tid`, or "" if there is none.
std::string track_name(const json& doc, int tid) {
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == tid) return e["args"]["name"];
  return "";
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

TEST_CASE("a threads launch with --trace writes valid JSON with one track per rank") {
  const int n = 3;
  dpt::LaunchOptions o;
  o.ranks = n;
  o.trace_path = temp_path("ring.json");
  dpt::launch(o, [&](Context& ctx) {
    {
      auto forward = ctx.trace.span("forward", "compute");
      auto matmul = ctx.trace.span("matmul", "compute");
      sleep_ms(2);
    }
    std::vector<float> out(256), in(256);
    ctx.comm.sendrecv(out.data(), 256, (ctx.rank + 1) % n, in.data(), 256, (ctx.rank + n - 1) % n);
  });
  json doc = read_json(o.trace_path);
  CHECK(doc["displayTimeUnit"] == "ms");
  REQUIRE(doc["traceEvents"].is_array());
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    CHECK(e["ts"].get<double>() >= 0);
    CHECK(e["dur"].get<double>() >= 0);
    CHECK(e["pid"] == 0);
    CHECK(e["tid"].get<int>() < n);  // no async work here: only the ranks' own tracks
  }
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(track_name(doc, r) == "rank " + std::to_string(r));
    auto forward = spans(doc, r, "forward"), matmul = spans(doc, r, "matmul");
    REQUIRE(forward.size() == 1);
    REQUIRE(matmul.size() == 1);
    CHECK(forward[0]["cat"] == "compute");
    // matmul nests inside forward (ts/dur are microseconds with ns resolution)
    double f0 = forward[0]["ts"], f1 = f0 + forward[0]["dur"].get<double>();
    double m0 = matmul[0]["ts"], m1 = m0 + matmul[0]["dur"].get<double>();
    CHECK(m0 >= f0);
    CHECK(m1 <= f1 + 0.001);
    CHECK(matmul[0]["dur"].get<double>() >= 2000);  // slept 2 ms inside
    // the communicator's own span, after forward, with its bytes and peer
    auto ring = spans(doc, r, "sendrecv");
    REQUIRE(ring.size() == 1);
    CHECK(ring[0]["cat"] == "comm");
    CHECK(ring[0]["args"]["bytes"] == 1024);
    CHECK(ring[0]["args"]["peer"] == (r + 1) % n);
    CHECK(ring[0]["ts"].get<double>() >= f1);
  }
  CHECK_FALSE(std::filesystem::exists(o.trace_path + ".tmp"));
  std::remove(o.trace_path.c_str());
}

TEST_CASE("seconds per category equal the spans' durations, nested same-category spans once") {
  dpt::Tracer trace(0, true);
  {
    auto outer = trace.span("step", "compute");
    {
      auto inner = trace.span("matmul", "compute");  // inside "step": not counted again
      sleep_ms(3);
    }
    {
      auto comm = trace.span("all_reduce", "comm", {{"bytes", 4096}});
      sleep_ms(2);
    }
  }
  json events = json::parse(trace.events_json());
  double step_us = 0, comm_us = 0;
  for (const json& e : events) {
    if (e["name"] == "step") step_us = e["dur"];
    if (e["name"] == "all_reduce") {
      comm_us = e["dur"];
      CHECK(e["args"]["bytes"] == 4096);
    }
  }
  // Same clock readings on both sides; the file rounds to 1 ns.
  CHECK(trace.seconds("compute") * 1e6 == Approx(step_us).margin(0.01));
  CHECK(trace.seconds("comm") * 1e6 == Approx(comm_us).margin(0.01));
  CHECK(trace.seconds("comm") >= 0.002);
  CHECK(trace.seconds("never used") == 0);
  trace.reset_seconds();
  CHECK(trace.seconds("compute") == 0);
}

TEST_CASE("a disabled tracer stores no events but still counts seconds") {
  dpt::Tracer trace(1, false);
  {
    auto span = trace.span("forward", "compute");
    sleep_ms(1);
  }
  trace.counter("memory", 1e6);
  CHECK(trace.event_count() == 0);
  CHECK(trace.seconds("compute") >= 0.001);
  json events = json::parse(trace.events_json());  // still names its track
  CHECK(events.size() == 2);
}

TEST_CASE("async communication is drawn on the rank's async track") {
  dpt::LaunchOptions o;
  o.ranks = 2;
  o.trace_path = temp_path("async.json");
  dpt::launch(o, [&](Context& ctx) {
    std::vector<float> grad(1000, 1.0f);
    auto work = ctx.comm.all_reduce_async(grad.data(), 1000, dpt::ReduceOp::Sum);
    {
      auto backward = ctx.trace.span("backward", "compute");
      work->wait();
    }
    ctx.trace.counter("bytes in use", 1234);
  });
  json doc = read_json(o.trace_path);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(track_name(doc, 1000 + r) == "rank " + std::to_string(r) + " async");
    auto reduce = spans(doc, 1000 + r, "all_reduce");
    REQUIRE(reduce.size() == 1);
    CHECK(reduce[0]["args"]["bytes"] == 4000);
    CHECK(spans(doc, r, "all_reduce").empty());  // not on the rank's own track
    CHECK(spans(doc, r, "backward").size() == 1);
  }
  int counters = 0;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "C") counters += e["name"] == "bytes in use (rank 0)" || e["name"] == "bytes in use (rank 1)";
  CHECK(counters == 2);
  std::remove(o.trace_path.c_str());
}

TEST_CASE("GPU spans go on the rank's GPU stream tracks at the times given, and count no seconds") {
  const auto origin = dpt::TraceClock::now();
  dpt::Tracer trace(3, true, origin);
  using std::chrono::microseconds;
  trace.gpu_span("backward", "compute", dpt::Tracer::GpuStream::Compute, origin + microseconds(100),
                 origin + microseconds(350));
  trace.gpu_span("ring bucket 0", "comm", dpt::Tracer::GpuStream::Comm, origin + microseconds(200),
                 origin + microseconds(500), {{"bucket", 0}});
  trace.gpu_span("backwards in time", "comm", dpt::Tracer::GpuStream::Comm, origin + microseconds(900),
                 origin + microseconds(800));
  json doc = json::parse("{\"traceEvents\": " + trace.events_json() + "}");
  CHECK(track_name(doc, 2003) == "rank 3 GPU compute stream");
  CHECK(track_name(doc, 3003) == "rank 3 GPU comm stream");
  CHECK(track_name(doc, 1003).empty());  // no async work: no async track
  auto backward = spans(doc, 2003, "backward");
  REQUIRE(backward.size() == 1);
  CHECK(backward[0]["ts"].get<double>() == Approx(100.0).margin(1e-3));
  CHECK(backward[0]["dur"].get<double>() == Approx(250.0).margin(1e-3));
  CHECK(backward[0]["cat"] == "compute");
  auto ring = spans(doc, 3003, "ring bucket 0");
  REQUIRE(ring.size() == 1);
  CHECK(ring[0]["ts"].get<double>() == Approx(200.0).margin(1e-3));
  CHECK(ring[0]["dur"].get<double>() == Approx(300.0).margin(1e-3));
  CHECK(ring[0]["args"]["bucket"] == 0);
  auto reversed = spans(doc, 3003, "backwards in time");
  REQUIRE(reversed.size() == 1);
  CHECK(reversed[0]["dur"] == 0.0);  // never a negative duration
  CHECK(spans(doc, 3, "backward").empty());  // not on the rank's own track
  CHECK(trace.seconds("compute") == 0);      // the host's spans count the rank's time
  CHECK(trace.seconds("comm") == 0);
  dpt::Tracer off(0, false);
  off.gpu_span("backward", "compute", dpt::Tracer::GpuStream::Compute, origin, origin + microseconds(5));
  CHECK(off.event_count() == 0);
}

TEST_CASE("writing a trace where no file can be created is a dpt::Error") {
  CHECK_THROWS_AS(dpt::write_chrome_trace("/nonexistent-dir/x/trace.json", {"[]"}), dpt::Error);
  CHECK_THROWS_AS(dpt::write_chrome_trace(temp_path("bad.json"), {"not json"}), dpt::Error);
}
