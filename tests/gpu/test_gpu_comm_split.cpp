// test_gpu_comm_split.cpp — Communicator::split on the NCCL backend, under a
// real mpirun (support/mpi_child.h), one GPU per rank:
//
//   -np 1 (one GPU)   the world split into a 1-rank group, and that group
//                     split again (nested): each reduces to its input, maps
//                     rank 0 to parent rank 0, and the world still works after
//   -np 2 (two GPUs)  the TP x DP grid of support/split_grid.h (a row ranked
//                     in reverse by key, 1-rank columns: every call against its
//                     serial oracle) and a nested group's ranks mapped back
//   chapter 13        at -np 1, one stage: a chapter's two splits under NCCL
//
// Oracle: small integers (split_grid.h's values), so a sum is exact in any
// order and Avg over 1 or 2 ranks is exact: every comparison is ==. The
// child records what it saw, checks after launch() returns, and prints one
// line per rank, "nccl-split child: rank r of n ok=1"; an error that ends it
// is one line "nccl-split child failed: <what>" (support/child_says.h).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/launch.h"
#include "support/child_says.h"
#include "support/gpu.h"
#include "support/mpi_child.h"
#include "support/run_program.h"
#include "support/split_grid.h"

using dpt::Communicator;
using dpt::Context;
using dpt::ReduceOp;
using dpt::Tensor;
namespace split = dpt_test::split;

namespace {

constexpr int64_t kFloats = 4099;  // odd: no chunking NCCL might do evenly

// Every reduction of `group` (one rank) on a GPU buffer and a host one:
// each must give back its input. `which` names the group in what went wrong.
void reduce_alone(Communicator& group, dpt::Device& device, const std::string& which,
                  std::vector<std::string>& wrong) {
  const std::vector<float> mine = split::values(0, kFloats);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    Tensor x = Tensor::from_vector({kFloats}, mine, device);
    group.all_reduce(x.data(), kFloats, op);
    std::string diff = dpt_test::first_difference(x.to_vector(), mine);
    if (!diff.empty())
      wrong.push_back(which + ": " + dpt::reduce_op_name(op) + " on one rank changed its input: " + diff);
  }
  std::vector<float> host = mine;
  group.all_reduce(host.data(), kFloats, ReduceOp::Sum);
  if (host != mine) wrong.push_back(which + ": Sum of a host buffer on one rank changed its input");
  group.barrier();
}

// -np 1: a 1-rank world, its one group, and a group of that group.
std::vector<std::string> one_rank_groups(Context& ctx) {
  std::vector<std::string> wrong;
  std::unique_ptr<Communicator> group = ctx.comm.split(0, 7);
  std::unique_ptr<Communicator> nested = group->split(3, -2);
  for (Communicator* g : {group.get(), nested.get()}) {
    const std::string which = g == group.get() ? "the group" : "the nested group";
    if (g->size() != 1 || g->rank() != 0)
      wrong.push_back(which + " is rank " + std::to_string(g->rank()) + " of " + std::to_string(g->size()) +
                      ", expected rank 0 of 1");
    if (g->parent_rank(0) != 0) wrong.push_back(which + "'s parent_rank(0) is " + std::to_string(g->parent_rank(0)));
    reduce_alone(*g, ctx.device, which, wrong);
  }
  nested.reset();  // a group ends before its parent
  group.reset();
  reduce_alone(ctx.comm, ctx.device, "the world after its groups ended", wrong);
  return wrong;
}

// -np 2: the pair ranked in reverse (key -rank), then each member alone in
// a group of the pair; an all-reduce through the pair sums both.
std::vector<std::string> nested_pair(Context& ctx) {
  std::vector<std::string> wrong;
  std::unique_ptr<Communicator> pair = ctx.comm.split(0, -ctx.rank);
  std::unique_ptr<Communicator> alone = pair->split(pair->rank(), 0);
  const int expected = ctx.world - 1 - ctx.rank;
  if (pair->rank() != expected)
    wrong.push_back("pair rank " + std::to_string(pair->rank()) + ", expected " + std::to_string(expected) +
                    " (key -rank reverses the world)");
  if (alone->size() != 1 || pair->parent_rank(alone->parent_rank(0)) != ctx.rank)
    wrong.push_back("the nested group of one does not map back to world rank " + std::to_string(ctx.rank));
  std::vector<float> sum = split::values(ctx.rank, kFloats), want(kFloats, 0.0f);
  pair->all_reduce(sum.data(), kFloats, ReduceOp::Sum);
  for (int w = 0; w < ctx.world; ++w)
    for (int64_t i = 0; i < kFloats; ++i) want[i] += split::values(w, kFloats)[i];
  std::string diff = dpt_test::first_difference(sum, want);
  if (!diff.empty()) wrong.push_back("Sum through the pair: " + diff);
  reduce_alone(*alone, ctx.device, "the nested group of one", wrong);
  return wrong;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& line : lines) all += line + "; ";
  return all;
}

// `mpirun -np np` on the hidden case below: it must exit 0 with every rank ok.
void check_every_rank_ok(int np) {
  dpt_test::ProgramResult run = dpt_test::run_child_case("child: NCCL split under mpirun", "nccl-split", np, "");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  for (int r = 0; r < np; ++r)
    CHECK(run.output.find("nccl-split child: rank " + std::to_string(r) + " of " + std::to_string(np) + " ok=1") !=
          std::string::npos);
}

}  // namespace

// Runs in each process the cases below start (hidden by [.], and inert
// unless DPT_TEST_CHILD is nccl-split).
TEST_CASE("child: NCCL split under mpirun", "[.]") {
  const char* child = std::getenv("DPT_TEST_CHILD");
  if (!child || std::string(child) != "nccl-split") return;
  dpt::LaunchOptions o;
  o.comm = "nccl";
  o.device = "cuda";
  o.timeout_s = 60;
  std::vector<std::string> wrong = {"did not run"};
  split::GridSeen grid;
  int rank = -1, world = 0;
  dpt_test::say_failure("nccl-split child failed: ", [&] {
    dpt::launch(o, [&](Context& ctx) {
      rank = ctx.rank, world = ctx.world;
      if (ctx.world == 1) {
        wrong = one_rank_groups(ctx);
        return;
      }
      grid = split::run_grid(ctx, 2);  // first: it checks that the world's own log stayed empty
      wrong = nested_pair(ctx);
    });
  });
  if (world >= 2) split::check_grid(grid, rank, 2, world);
  INFO(joined(wrong));
  CHECK(wrong.empty());
  std::printf("nccl-split child: rank %d of %d ok=%d\n", rank, world, int(wrong.empty()));
}

TEST_CASE("NCCL split under mpirun -np 1: a group and a nested group of one rank reduce to the input", "[gpu]") {
  DPT_REQUIRE_NCCL();
  check_every_rank_ok(1);
}

TEST_CASE("NCCL split under mpirun -np 2 on two GPUs: grid rows and columns and a nested group match the oracle",
          "[gpu]") {
  DPT_REQUIRE_NCCL();
  if (dpt::gpu::device_count() < 2) DPT_SKIP("needs 2 GPUs for 2 NCCL ranks (NCCL refuses two ranks on one GPU)");
  check_every_rank_ok(2);
}

TEST_CASE("a chapter that splits its world runs under mpirun -np 1 --comm nccl (chapter 13, one stage)", "[gpu]") {
  DPT_REQUIRE_NCCL();
  // One stage of one pipeline: both of chapter 13's splits make 1-rank NCCL groups.
  dpt_test::ProgramResult run =
      dpt_test::run_mpi("ch13_pipeline_parallel", 1, "--comm nccl --stages 1 --comm-timeout 60");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("checks passed") != std::string::npos);
}
