// test_gpu_comm.cpp — the communicators on GPU memory: the threads backend
// with 2 and 4 ranks sharing one GPU, and NCCL under a real mpirun.
//
// Oracle: comm_contract.h's serial loops over small integer-valued floats,
// computed on the host from the same formula the ranks fill their buffers
// with, sharing no code with the backends. Sums of such values are exact in
// float in any order, and Avg divides by 2 or 4 (exact), so every comparison
// is exact (==).
//
// Rank threads only record what they saw (Catch2's assertions are not
// thread-safe); the test thread checks after launch() returns. The mpirun
// cases run this test program itself under mpirun, on a hidden case that only
// runs when DPT_TEST_CHILD names the communicator (nccl, or mpi: GPU buffers
// staged through host memory). A child's error is read from the line it
// prints itself (support/child_says.h), never from its Catch2 report, which
// wraps at 80 columns wherever the host name in the sentence puts the break.
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/device.h"
#include "dpt/gpu.h"
#include "dpt/kernels.h"
#include "dpt/launch.h"
#include "support/child_says.h"
#include "support/comm_contract.h"
#include "support/gpu.h"
#include "support/mpi_child.h"

using dpt::Context;
using dpt::Device;
using dpt::ReduceOp;
using dpt::Tensor;
using dpt_test::first_difference;
using dpt_test::contract::contribution;
using dpt_test::contract::serial_reduce;

namespace {

constexpr int64_t kCount = 100003;  // odd, above every eager limit, not a multiple of the ranks

// rank's contribution (count,) at `offset`, in memory on `device`.
Tensor filled(int rank, int64_t count, Device& device, int64_t offset = 0) {
  return Tensor::from_vector({count}, contribution(rank, count, offset), device);
}

// Every collective and a ring on buffers of `device` (each rank's GPU, or
// cuda:0 for all); returns per rank "" or what differed from the oracle.
std::vector<std::string> exercise(Context& ctx, Device& device) {
  const int n = ctx.world, me = ctx.rank;
  std::vector<std::string> wrong;
  auto expect = [&](const char* what, const Tensor& got, const std::vector<float>& want) {
    std::string diff = first_difference(got.to_vector(), want);
    if (!diff.empty()) wrong.push_back(std::string(what) + ": " + diff);
  };
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    Tensor x = filled(me, kCount, device);
    ctx.comm.all_reduce(x.data(), kCount, op);
    expect(dpt::reduce_op_name(op), x, serial_reduce(n, kCount, 0, op));
  }
  Tensor rows = filled(me, kCount * n, device), mine = Tensor::zeros({kCount}, device);
  ctx.comm.reduce_scatter(rows.data(), mine.data(), kCount, ReduceOp::Sum);
  expect("reduce_scatter", mine, serial_reduce(n, kCount, me * kCount, ReduceOp::Sum));
  // One rank's two buffers in two memories: host rows into a GPU result, GPU rows into a host one.
  std::vector<float> host_rows = contribution(me, kCount * n), host_mine(kCount);
  Tensor gpu_mine = Tensor::zeros({kCount}, device);
  ctx.comm.reduce_scatter(host_rows.data(), gpu_mine.data(), kCount, ReduceOp::Sum);
  expect("reduce_scatter, host rows into GPU memory", gpu_mine, serial_reduce(n, kCount, me * kCount, ReduceOp::Sum));
  ctx.comm.reduce_scatter(rows.data(), host_mine.data(), kCount, ReduceOp::Sum);
  std::string host_diff = first_difference(host_mine, serial_reduce(n, kCount, me * kCount, ReduceOp::Sum));
  if (!host_diff.empty()) wrong.push_back("reduce_scatter, GPU rows into host memory: " + host_diff);

  Tensor gathered = Tensor::zeros({n * kCount}, device);
  ctx.comm.all_gather(filled(me, kCount, device).data(), gathered.data(), kCount);
  std::vector<float> all;
  for (int r = 0; r < n; ++r) {
    std::vector<float> row = contribution(r, kCount);
    all.insert(all.end(), row.begin(), row.end());
  }
  expect("all_gather", gathered, all);

  Tensor b = filled(me, kCount, device);
  ctx.comm.broadcast(b.data(), kCount, n - 1);
  expect("broadcast from the last rank", b, contribution(n - 1, kCount));

  const int right = (me + 1) % n, left = (me + n - 1) % n;
  Tensor out = filled(me, kCount, device), in = Tensor::zeros({kCount}, device);
  ctx.comm.sendrecv(out.data(), kCount, right, in.data(), kCount, left);
  expect("sendrecv ring", in, contribution(left, kCount));

  // Small (eager under threads) and large (rendezvous) messages, 0 -> 1.
  for (int64_t count : {int64_t(5), kCount}) {
    Tensor t = me == 0 ? filled(0, count, device, 7) : Tensor::zeros({count}, device);
    if (me == 0) ctx.comm.send(t.data(), count, 1);
    if (me == 1) {
      ctx.comm.recv(t.data(), count, 0);
      expect(count == 5 ? "eager recv" : "rendezvous recv", t, contribution(0, count, 7));
    }
  }
  // Kernels still queued on this thread's stream when the call is made (a
  // few hundred, so they are likely still running): the call, and the async
  // one on the progress thread, must wait for them before a peer reads.
  Tensor queued = Tensor::zeros({kCount}, device);
  auto queue_fills = [&](float last) {
    for (int i = 0; i < 300; ++i) dpt::kernels_for(device).fill(queued.data(), -1000.0f, kCount);
    dpt::kernels_for(device).fill(queued.data(), last, kCount);
  };
  queue_fills(float(me + 1));
  ctx.comm.all_reduce(queued.data(), kCount, ReduceOp::Sum);
  expect("all_reduce after a queued kernel", queued, std::vector<float>(kCount, float(n * (n + 1) / 2)));
  queue_fills(float(2 * (me + 1)));
  ctx.comm.all_reduce_async(queued.data(), kCount, ReduceOp::Sum)->wait();
  expect("all_reduce_async after a queued kernel", queued, std::vector<float>(kCount, float(n * (n + 1))));
  ctx.comm.barrier();
  return wrong;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& line : lines) all += line + "; ";
  return all;
}

// The hidden case below, with --comm `comm`, on `np` ranks (support/mpi_child.h).
dpt_test::ProgramResult run_child(const std::string& comm, int np, const std::string& env) {
  return dpt_test::run_child_case("child: collectives on GPU buffers under mpirun", comm, np, env);
}

// Runs the child with --comm `comm` on `np` ranks: each must report ok.
void check_every_rank_ok(const std::string& comm, int np) {
  dpt_test::ProgramResult run = run_child(comm, np, "");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  for (int r = 0; r < np; ++r) {
    std::string line = comm + " child: rank " + std::to_string(r) + " of " + std::to_string(np) + " ok=1";
    CHECK(run.output.find(line) != std::string::npos);
  }
}

}  // namespace

// ----------------------------------------------------------------------------
// threads on GPU buffers

TEST_CASE("threads communicator on GPU buffers: 2 and 4 ranks on one GPU match the serial oracle", "[gpu]") {
  DPT_REQUIRE_GPU();
  for (int n : {2, 4}) {
    dpt::LaunchOptions o;
    o.ranks = n;
    o.timeout_s = 60;
    std::vector<std::vector<std::string>> wrong(n, {"did not run"});
    dpt::launch(o, [&](Context& ctx) { wrong[ctx.rank] = exercise(ctx, Device::cuda(0)); });
    for (int r = 0; r < n; ++r) {
      INFO(n << " ranks, rank " << r << ": " << joined(wrong[r]));
      CHECK(wrong[r].empty());
    }
  }
}

TEST_CASE("under --device cuda, threads rank r gets cuda:(r % GPUs) and a stream of its own", "[gpu]") {
  DPT_REQUIRE_GPU();
  dpt::LaunchOptions o;
  o.ranks = 4;  // Avg divides by 4: exact, as the oracle's division
  o.device = "cuda";
  std::vector<std::string> names(4);
  std::vector<void*> streams(4);
  std::vector<std::vector<std::string>> wrong(4);
  dpt::launch(o, [&](Context& ctx) {
    names[ctx.rank] = ctx.device.name();
    streams[ctx.rank] = dpt::gpu::current_stream(ctx.device.index()).handle();
    wrong[ctx.rank] = exercise(ctx, ctx.device);
  });
  int gpus = dpt::gpu::device_count();
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << joined(wrong[r]));
    CHECK(Device::get(names[r]).index() == r % gpus);  // "cuda:0/2" when ranks share a GPU: an account each
    CHECK(wrong[r].empty());
  }
  for (int r = 1; r < 4; ++r) CHECK(streams[r] != streams[0]);
}

TEST_CASE("a threads reduction over GPU memory on one rank and host memory on another is one sentence", "[gpu]") {
  DPT_REQUIRE_GPU();
  dpt::LaunchOptions o;
  o.ranks = 2;
  o.timeout_s = 10;
  std::string message = dpt_test::contract::launch_message(o, [&](Context& ctx) {
    Tensor x = filled(ctx.rank, 16, ctx.rank == 0 ? Device::cuda(0) : Device::host());
    ctx.comm.all_reduce(x.data(), 16, ReduceOp::Sum);
  });
  CHECK_THAT(message, contains_text("all_reduce: ranks passed buffers in different memories (rank 0: GPU, "
                                    "rank 1: host)"));
}

// ----------------------------------------------------------------------------
// NCCL and MPI under mpirun

// Runs in each process that the mpirun cases below start (hidden by [.], and
// inert unless DPT_TEST_CHILD is nccl or mpi): every collective on this
// rank's GPU, and one all_reduce of host memory (under NCCL staged through
// the GPU). An error ends the child with one line "<comm> child failed: <what>".
TEST_CASE("child: collectives on GPU buffers under mpirun", "[.]") {
  const char* child = std::getenv("DPT_TEST_CHILD");
  if (!child || (std::string(child) != "nccl" && std::string(child) != "mpi")) return;
  dpt::LaunchOptions o;
  o.comm = child;
  o.device = "cuda";
  o.timeout_s = 60;
  std::vector<std::string> wrong = {"did not run"};
  int rank = -1, world = 0;
  auto each_rank = [&](Context& ctx) {
    rank = ctx.rank, world = ctx.world;
    wrong = ctx.world >= 2 ? exercise(ctx, ctx.device) : std::vector<std::string>{};
    if (ctx.world == 1) {  // no peer for the ring's send/recv: the collectives alone
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        Tensor x = filled(0, kCount, ctx.device);
        ctx.comm.all_reduce(x.data(), kCount, op);
        if (x.to_vector() != serial_reduce(1, kCount, 0, op)) wrong.push_back(dpt::reduce_op_name(op));
      }
      Tensor self_ring = Tensor::zeros({kCount}, ctx.device);
      ctx.comm.sendrecv(filled(0, kCount, ctx.device).data(), kCount, 0, self_ring.data(), kCount, 0);
      if (self_ring.to_vector() != contribution(0, kCount)) wrong.push_back("sendrecv to itself");
      ctx.comm.barrier();
    }
    std::vector<float> host = contribution(ctx.rank, 1000);
    ctx.comm.all_reduce(host.data(), 1000, ReduceOp::Sum);
    if (host != serial_reduce(ctx.world, 1000, 0, ReduceOp::Sum)) wrong.push_back("host all_reduce");
  };
  dpt_test::say_failure(std::string(child) + " child failed: ", [&] { dpt::launch(o, each_rank); });
  INFO(joined(wrong));
  CHECK(wrong.empty());
  std::printf("%s child: rank %d of %d ok=%d\n", child, rank, world, int(wrong.empty()));
}

TEST_CASE("NCCL under mpirun -np 1: every collective on GPU and host buffers matches the oracle", "[gpu]") {
  DPT_REQUIRE_NCCL();
  check_every_rank_ok("nccl", 1);
}

TEST_CASE("NCCL under mpirun -np 2 on one GPU is refused with one sentence naming both ranks, no hang", "[gpu]") {
  DPT_REQUIRE_NCCL();
  dpt_test::ProgramResult run = run_child("nccl", 2, "CUDA_VISIBLE_DEVICES=0");
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK(run.exit_code != 124);  // timeout(1)'s code: it hung
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof host - 1) == 0);
  // Each rank that got as far as printing says the whole sentence on one line
  // (mpirun may stop the second rank before it prints).
  std::vector<std::string> said = dpt_test::said_after(run.output, "nccl child failed: ");
  CHECK_FALSE(said.empty());
  for (const std::string& sentence : said) {
    INFO("a rank said: " << sentence);
    CHECK_THAT(sentence, contains_text("ranks 0 and 1 both got GPU "));
    CHECK_THAT(sentence, contains_text(" on host " + std::string(host) +
                                       ": NCCL needs one GPU per rank; run -np <= number of GPUs, or use "
                                       "--comm threads for several ranks on one GPU"));
  }
  CHECK(run.output.find("nccl child: rank") == std::string::npos);  // nobody went on to run
}

TEST_CASE("NCCL under mpirun -np 2 on two GPUs: every collective matches the oracle", "[gpu]") {
  DPT_REQUIRE_NCCL();
  if (dpt::gpu::device_count() < 2) DPT_SKIP("needs 2 GPUs for 2 NCCL ranks");
  check_every_rank_ok("nccl", 2);
}

TEST_CASE("MPI under mpirun -np 2 on one GPU: GPU buffers staged through host memory match the oracle", "[gpu]") {
  DPT_REQUIRE_GPU();
  if (!dpt::mpi_available()) DPT_SKIP("this dpt was built without MPI");
  check_every_rank_ok("mpi", 2);
}

TEST_CASE("a chapter runs under mpirun -np 1 --comm nccl, its host buffers staged through the GPU", "[gpu]") {
  DPT_REQUIRE_NCCL();
  dpt_test::ProgramResult run = dpt_test::run_mpi("ch04_ring_allreduce", 1, "--comm nccl --comm-timeout 60");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("checks passed") != std::string::npos);
}
