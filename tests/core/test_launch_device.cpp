// test_launch_device.cpp — --device and --comm nccl as a machine without a
// usable GPU (or a build without CUDA or NCCL) sees them: each refusal is one
// sentence that says why and what to do, and host memory stays host memory.
// On a machine with a GPU the same cases check that the flags are accepted;
// the GPU paths themselves are tests/gpu/test_gpu_comm.cpp (label gpu).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/device.h"
#include "dpt/gpu.h"
#include "dpt/launch.h"
#include "support/catch.h"
#include "support/run_program.h"

using dpt::Context;

namespace {
// Where this machine or build stands: "" when a GPU is usable.
std::string no_gpu_reason() { return dpt::gpu::unavailable_reason(); }

dpt::LaunchOptions parsed(std::vector<std::string> args) {
  CLI::App app{"test"};
  dpt::LaunchOptions o;
  dpt::add_launch_flags(app, o);
  std::vector<const char*> argv = {"test"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(int(argv.size()), const_cast<char**>(argv.data()));
  return o;
}
}  // namespace

// ----------------------------------------------------------------------------
// --device

TEST_CASE("the --device flag defaults to cpu and accepts only cpu or cuda") {
  CHECK(parsed({}).device == "cpu");
  CHECK(parsed({"--device", "cpu"}).device == "cpu");
  CHECK_THROWS_WITH(parsed({"--device", "tpu"}), contains_text("--device"));
}

TEST_CASE("a chapter given --device cuda without a usable GPU exits 2 with one line naming the reason") {
  std::string reason = no_gpu_reason();
  if (reason.empty()) {  // a GPU machine: the flag is accepted
    CHECK(parsed({"--device", "cuda"}).device == "cuda");
    return;
  }
  dpt_test::ProgramResult run = dpt_test::run_program("ch04_ring_allreduce", "--ranks 2 --device cuda");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("--device: cuda needs a usable GPU, and " + reason) != std::string::npos);
  CHECK(run.output.find("use --device cpu") != std::string::npos);
  CHECK(std::count(run.output.begin(), run.output.end(), '\n') == 1);  // one line, nothing ran
}

TEST_CASE("launch with device cuda set in code and no usable GPU throws the reason, running nothing") {
  std::string reason = no_gpu_reason();
  dpt::LaunchOptions o;
  o.ranks = 2;
  o.device = "cuda";
  bool ran = false;
  if (reason.empty()) {  // a GPU machine: rank r gets cuda:(r % GPUs)
    std::vector<std::string> names(2);
    dpt::launch(o, [&](Context& ctx) { names[ctx.rank] = ctx.device.name(); });
    CHECK(names[1] == "cuda:" + std::to_string(1 % dpt::gpu::device_count()));
    return;
  }
  CHECK_THROWS_WITH(dpt::launch(o, [&](Context&) { ran = true; }), contains_text(reason));
  CHECK_FALSE(ran);
  CHECK_THROWS_WITH(dpt::gpu_for_rank(3), contains_text("--device cuda needs a usable GPU"));
  o.device = "gpu";
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("--device must be cpu or cuda"));
}

TEST_CASE("under --device cpu each threads rank keeps its simulated device cpu:rank") {
  dpt::LaunchOptions o;
  o.ranks = 3;
  std::vector<std::string> names(3);
  dpt::launch(o, [&](Context& ctx) { names[ctx.rank] = ctx.device.name(); });
  CHECK(names == std::vector<std::string>{"cpu:0", "cpu:1", "cpu:2"});
}

// ----------------------------------------------------------------------------
// --comm nccl

TEST_CASE("a chapter given --comm nccl where it cannot run: one sentence saying what is missing") {
  dpt_test::ProgramResult run = dpt_test::run_program("ch04_ring_allreduce", "--comm nccl");
  INFO(run.output);
  if (!dpt::gpu::built_with_nccl()) {
    CHECK(run.exit_code == 1);
    CHECK(run.output.find("--comm nccl: this dpt was built without the NCCL communicator") !=
          std::string::npos);
    CHECK(run.output.find("--comm mpi or --comm threads") != std::string::npos);
  } else if (!no_gpu_reason().empty()) {
    CHECK(run.exit_code == 1);
    CHECK(run.output.find("error: --comm nccl needs one CUDA GPU per rank, and " + no_gpu_reason()) !=
          std::string::npos);
  } else {  // NCCL and a GPU: one process is a world of one rank (MPI singleton)
    CHECK(run.exit_code == 0);
  }
  CHECK(run.output.find("Segmentation") == std::string::npos);
}

TEST_CASE("nccl is a --comm choice, and refuses the simulated link like --comm mpi") {
  CHECK(parsed({"--comm", "nccl"}).comm == "nccl");
  dpt::LaunchOptions o;
  o.comm = "nccl";
  o.link_preset = "ethernet";
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("under --comm nccl the real network"));
}

// ----------------------------------------------------------------------------
// host memory stays host memory

TEST_CASE("is_device_pointer is false for every kind of host memory") {
  float on_stack[4] = {};
  auto on_heap = std::make_unique<float[]>(1 << 20);
  std::vector<float> in_vector(3);
  dpt::Tensor on_cpu = dpt::Tensor::zeros({8}, dpt::Device::cpu(0));
  dpt::Tensor on_host = dpt::Tensor::zeros({8}, dpt::Device::host());
  for (const void* p : {static_cast<const void*>(on_stack), static_cast<const void*>(on_heap.get()),
                        static_cast<const void*>(in_vector.data()), static_cast<const void*>(on_cpu.data()),
                        static_cast<const void*>(on_host.data()), static_cast<const void*>(nullptr)}) {
    CHECK_FALSE(dpt::gpu::is_device_pointer(p));
    CHECK(dpt::gpu::device_of_pointer(p) == -1);
  }
}

TEST_CASE("the communicator's tensor calls take cpu:k tensors as before") {
  dpt::LaunchOptions o;
  o.ranks = 2;
  std::vector<std::vector<float>> got(2);
  dpt::launch(o, [&](Context& ctx) {
    dpt::Tensor t = dpt::Tensor::from_vector({3}, {1.0f + ctx.rank, 2.0f, 4.0f * ctx.rank}, ctx.device);
    ctx.comm.all_reduce(t, dpt::ReduceOp::Sum);
    ctx.comm.all_reduce_async(t, dpt::ReduceOp::Max)->wait();
    got[ctx.rank] = t.to_vector();
  });
  // Sum: {1+2, 2+2, 0+4} = {3, 4, 4}; Max of equal values leaves them.
  CHECK(got[0] == std::vector<float>{3, 4, 4});
  CHECK(got[1] == got[0]);
}
