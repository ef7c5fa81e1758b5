// break_even.cpp — break_even.h: each compressor's own work, timed on a
// world of one rank, and the link speed below which it pays for itself.
#include "break_even.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <exception>
#include <iostream>
#include <limits>
#include <random>

#include "bytes_and_plot.h"
#include "dpt/holes.h"
#include "dpt/launch.h"
#include "dpt/report.h"
#include "dpt/timing.h"

namespace dpt::ch10 {

namespace {
// CPU seconds this thread has run: time the scheduler gave to others does not count.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

std::string name_of(const std::string& spec) { return spec.substr(0, spec.find(':')); }
}  // namespace

double cpu_seconds_per_call(const std::function<void()>& body, int repeats, int calls) {
  body();
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    const double start = thread_cpu_seconds();
    for (int c = 0; c < calls; ++c) body();
    seconds.push_back((thread_cpu_seconds() - start) / calls);
  }
  return median(seconds);
}

double reduce_seconds(Compressor& compressor, const std::vector<float>& gradient, int repeats) {
  LaunchOptions one;  // a private world of one rank thread, whatever launched the caller
  one.ranks = 1;
  one.private_world = true;
  double seconds = 0;
  std::exception_ptr failed;
  launch(one, [&](Context& ctx) {
    std::vector<float> x, delivered;
    try {
      seconds = cpu_seconds_per_call([&] {
        x = gradient;  // the copy in counts too: a reduce overwrites its input
        compressor.reduce(ctx.comm, x, delivered);
      }, repeats);
    } catch (...) {
      failed = std::current_exception();  // rethrown as it was (a hole's NotImplemented stays one)
    }
  });
  if (failed) std::rethrow_exception(failed);
  return seconds;
}

double memcpy_seconds(const std::vector<float>& gradient, int repeats) {
  std::vector<float> copy(gradient.size());
  return cpu_seconds_per_call([&] { std::memcpy(copy.data(), gradient.data(), 4 * gradient.size()); }, repeats, 10);
}

int64_t sequential_messages(const std::string& spec, const std::vector<Shape>& shapes, int world) {
  const std::string name = name_of(spec);
  if (name == "topk" || name == "sign") return world - 1;  // one ring all-gather
  int64_t all_reduces = 1;                                 // none, and fp16/bf16's own ring: 2(n-1) messages
  if (name == "powersgd") {
    int64_t matrices = 0, vectors = 0;
    for (const Shape& s : shapes) (s.size() == 2 ? matrices : vectors) += 1;
    all_reduces = 2 * matrices + (vectors > 0 ? 1 : 0);
  }
  return all_reduces * 2 * (world - 1);
}

void print_break_even(Lecture& lec, const std::vector<Shape>& shapes, const std::vector<Setting>& settings) {
  Context& ctx = lec.ctx();
  if (!ctx.is_root()) return;
  lec.say.section("When compressing pays: each compressor's own work against the wire time it saves");
  if (ctx.world == 1) return lec.say.say("One rank sends nothing, so no compressor saves a byte: run with --ranks 4 to see the break-even table.");
  LinkModel link = effective_link(ctx.options);
  std::string link_name = "the run's link (" + link.describe() + ")";
  if (link.gbps <= 0) link = link_preset("ethernet"), link_name = "10 Gbit/s Ethernet (--link ethernet: " + link.describe() + ")";
  const double beta = link.gbps * 1e9 / 8, alpha = link.latency_us * 1e-6;  // bytes per second, seconds per message

  int64_t psi = 0;
  for (const Shape& s : shapes) psi += shape_numel(s);
  std::vector<float> gradient(static_cast<std::size_t>(psi));
  std::mt19937 generator(uint32_t(lec.o.seed + 17));
  std::normal_distribution<float> normal;
  for (float& v : gradient) v = normal(generator);
  const int repeats = 5;
  const double copy = memcpy_seconds(gradient, repeats), bytes = 4.0 * double(psi);

  std::vector<std::string> specs = {"none"};
  for (const Setting& s : settings)
    if (!s.error_feedback && std::find(specs.begin(), specs.end(), s.compress) == specs.end()) specs.push_back(s.compress);
  const double plain = wire_formula("none", shapes, ctx.world);
  auto sync = [&](const std::string& spec, double t) {
    return t + wire_formula(spec, shapes, ctx.world) / beta + double(sequential_messages(spec, shapes, ctx.world)) * alpha;
  };
  Table table("ch10: break-even link speed, " + std::to_string(ctx.world) + " ranks, Psi = " + std::to_string(psi),
              {"compressor", "wire/rank/step", "ratio", "compress+decompress", "GB/s of gradient", "vs memcpy", "pays below",
               "sync/step at the link"});
  double none_sync = 0;
  for (const std::string& spec : specs) {
    const double wire = wire_formula(spec, shapes, ctx.world);
    double t = 0;
    if (!unwritten_hole_here([&] { t = reduce_seconds(*make_compressor(spec, shapes, lec.o.seed), gradient, repeats); })
             .empty()) {  // a world of one rank: no message
      table.add_row({spec, format_bytes(wire), fixed(plain / wire, 1) + "x", "hole not written yet", "-", "-", "-", "-"});
      continue;
    }
    if (spec == "none") none_sync = sync(spec, t);
    const std::string pays = spec == "none" ? "-" : wire >= plain ? "never (no bytes saved)" : fmt(8 * (plain - wire) / t / 1e9, 3) + " Gbit/s";
    table.add_row({spec, format_bytes(wire), fixed(plain / wire, 1) + "x", fmt(1e6 * t, 3) + " us", fixed(bytes / t / 1e9, 2),
                   fixed(copy / t, 3) + "x", pays,
                   fmt(1e3 * sync(spec, t), 3) + " ms" + (spec == "none" ? "" : " (none " + fmt(1e3 * none_sync, 3) + " ms)")});
  }
  table.print(std::cout);
  lec.say.say("compress+decompress: one reduce on a world of one rank, where no byte crosses a wire (thread CPU time,\n"
              "median of " + std::to_string(repeats) + ", the gradient's copy in included; a memcpy of it: " + fmt(1e6 * copy, 3) +
              " us). Pays below = bytes saved / that time: on a slower link\nthe bytes saved outweigh the work, "
              "on a faster one send floats. sync/step = the work + wire bytes / bandwidth + messages in\nsequence x latency, at " +
              link_name + ".");
}

}  // namespace dpt::ch10
