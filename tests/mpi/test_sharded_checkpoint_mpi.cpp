// test_sharded_checkpoint_mpi.cpp — sharded checkpoints across real processes
// (mpirun -np 2 and -np 4): every process writes its own shard into one
// directory at once, rank 0 seals what the others wrote, and each process
// loads the checkpoint back for every world size 1..4. The oracle is
// support/shard_oracle.h's hand-cut slices; checks run after launch() returns
// (see test_comm_mpi.cpp for why).
#include "support/catch.h"
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "dpt/launch.h"
#include "dpt/sharded_checkpoint.h"
#include "support/comm_contract.h"
#include "support/shard_oracle.h"

TEST_CASE("mpi: processes save their shards at once, rank 0 seals after a barrier, every world size loads it",
          "[checkpoint][zero][mpi]") {
  dpt_test::FullState s = dpt_test::mlp_state(21);  // Ψ = 47: neither 2 nor 4 divides it
  dpt::LaunchOptions options;
  options.comm = "mpi";
  options.timeout_s = 30;
  int world = 0;
  std::vector<std::vector<dpt::ShardState>> got(5);  // got[M][r]: this process's load of rank r of M
  dpt::launch(options, [&](dpt::Context& ctx) {
    world = ctx.world;
    float pid = ctx.is_root() ? float(::getpid()) : 0.0f;  // one directory for all processes: rank 0's pid
    ctx.comm.broadcast(&pid, 1, 0);
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp ? tmp : "/tmp") + "/dpt_mpi_ckpt_" + std::to_string(int64_t(pid));
    if (ctx.is_root()) std::filesystem::remove_all(dir);
    ctx.comm.barrier();
    dpt::save_checkpoint_shard(dir, dpt_test::shard_of(s, ctx.rank, ctx.world, 6));
    ctx.comm.barrier();  // every shard is on disk
    if (ctx.is_root()) dpt::finish_checkpoint(dir, dpt_test::shard_of(s, 0, ctx.world, 6));
    ctx.comm.barrier();  // sealed and published
    for (int m = 1; m <= 4; ++m)
      for (int r = 0; r < m; ++r) got[m].push_back(dpt::load_checkpoint_shard(dir, r, m));
    ctx.comm.barrier();  // nobody reads any more
    if (ctx.is_root()) std::filesystem::remove_all(dir);
  });
  CHECK(world >= 2);
  for (int m = 1; m <= 4; ++m) {
    for (int r = 0; r < m; ++r) {
      INFO("saved by " << world << " processes, loaded as rank " << r << " of " << m);
      const dpt::ShardState& shard = got[m][r];
      CHECK(shard.step == 6);
      CHECK(shard.world == m);
      CHECK(dpt_test::first_difference(shard.params, dpt_test::slice(s.params, r, m, 0.0f)) == "");
      CHECK(dpt_test::first_difference(shard.exp_avg, dpt_test::slice(s.exp_avg, r, m, 0.0f)) == "");
      CHECK(dpt_test::first_difference(shard.exp_avg_sq, dpt_test::slice(s.exp_avg_sq, r, m, 0.0f)) == "");
    }
  }
}
