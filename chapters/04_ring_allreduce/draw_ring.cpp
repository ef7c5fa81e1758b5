// draw_ring.cpp — chapter 04's --explain. The ring is the student's and has
// no hook: a watching communicator (dpt/comm/watch.h) snapshots each rank's
// vector before each message it sends; after the phase, rank 0 draws them.
#include "draw_ring.h"

#include <iostream>

#include "ch04.h"
#include "dpt/comm/watch.h"
#include "dpt/report.h"

using namespace dpt;

namespace {

// Rank r contributes 2^r to every element, so an element's value, read as a
// bit mask, says exactly whose contributions it already sums.
std::string contributors(float value, int world) {
  auto mask = static_cast<uint64_t>(value);
  if (mask == (uint64_t(1) << world) - 1) return "all";
  std::string out;
  for (int r = 0; r < world; ++r)
    if (mask & (uint64_t(1) << r)) out += (out.empty() ? "" : "+") + std::to_string(r);
  return out;
}

// Runs one phase of the ring on a watched communicator; returns this rank's vector as it was
// before each message it sent, then once more at the end.
using Phase = void (*)(Communicator&, float*, int64_t);
std::vector<std::vector<float>> watch_phase(Context& ctx, Phase phase, std::vector<float>& data) {
  std::vector<std::vector<float>> states;
  auto watched = watch_messages(ctx.comm, [&](const Message& m) {
    if (m.dst >= 0) states.push_back(data);  // a send: the state after the previous step
  });
  phase(*watched, data.data(), int64_t(data.size()));
  states.push_back(data);
  return states;
}

// Rank 0 draws a phase from every rank's states: one grid per step, * on
// what changed in it. Collective.
void draw_phase(Context& ctx, bool print, const char* name, const std::vector<std::vector<float>>& states) {
  const int n = ctx.world;
  float sends = float(states.size()) - 1, most_fewest[2] = {sends, -sends};
  ctx.comm.all_reduce(most_fewest, 2, ReduceOp::Max);
  float most = most_fewest[0], fewest = -most_fewest[1];
  if (most != n - 1 || fewest != n - 1) {
    if (print)
      std::cout << name << ": your ring sent " << fewest << " to " << most << " messages per rank; the drawing "
                << "shows n-1 = " << n - 1 << " steps of one send each, so it is skipped (the tests say more).\n";
    return;
  }
  std::vector<std::vector<float>> all(states.size(), std::vector<float>(std::size_t(n) * n));  // [state][rank·n + chunk]
  for (std::size_t k = 0; k < states.size(); ++k) ctx.comm.all_gather(states[k].data(), all[k].data(), n);
  if (!print) return;
  for (int step = 1; step < n; ++step) {
    std::vector<std::string> headers = {std::string(name) + " step " + std::to_string(step) + "/" + std::to_string(n - 1)};
    for (int c = 0; c < n; ++c) headers.push_back("chunk " + std::to_string(c));
    Table grid("", headers);
    for (int r = 0; r < n; ++r) {
      std::vector<std::string> row = {"rank " + std::to_string(r)};
      for (std::size_t c = 0; c < std::size_t(n); ++c) {
        std::size_t at = std::size_t(r) * n + c;
        float now = all[std::size_t(step)][at], before = all[std::size_t(step) - 1][at];
        row.push_back(contributors(now, n) + (now != before ? " *" : "  "));  // * = arrived in this step
      }
      grid.add_row(row);
    }
    std::cout << grid.str().substr(1);
  }
}

}  // namespace

void draw_ring(Context& ctx, bool print) {
  const int n = ctx.world;
  std::vector<float> data(std::size_t(n), float(uint64_t(1) << ctx.rank));  // one element per chunk
  if (print)
    std::cout << "Each cell lists whose contributions a rank's copy of a chunk sums; * marks\n"
                 "what arrived from the left neighbour in this step.\n\n";
  auto scattered = watch_phase(ctx, ch04::ring_scatter_reduce, data);
  draw_phase(ctx, print, "scatter-reduce", scattered);
  auto gathered = watch_phase(ctx, ch04::ring_all_gather, data);
  draw_phase(ctx, print, "all-gather", gathered);
}

