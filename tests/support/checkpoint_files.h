// checkpoint_files.h — what the sharded-checkpoint tests do to a checkpoint
// directory: a fresh one, whole-file reads, writes and edits (to break it),
// every rank's save then rank 0's seal, a shard's path, and the check that a
// loaded shard is the oracle's slice (support/shard_oracle.h).
#pragma once

#include "support/catch.h"
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "dpt/sharded_checkpoint.h"
#include "support/comm_contract.h"  // first_difference
#include "support/folder.h"         // read_file, write_file
#include "support/run_program.h"
#include "support/shard_oracle.h"

namespace dpt_test {

// A fresh, empty directory path under the temp dir (not created).
inline std::string fresh_dir(const std::string& name) {
  std::string dir = dpt_test::temp_path(name);
  std::filesystem::remove_all(dir);
  return dir;
}

// Replaces the first `from` in the file at `path` by `to`.
inline void edit_file(const std::string& path, const std::string& from, const std::string& to) {
  std::string text = read_file(path);
  std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  write_file(path, text.replace(at, from.size(), to));
}

// Every rank of `world` saves its shard of `s` at `step`, then rank 0 seals.
inline void save_all(const std::string& dir, const FullState& s, int world, int64_t step, bool adam = true) {
  for (int r = 0; r < world; ++r) dpt::save_checkpoint_shard(dir, shard_of(s, r, world, step, adam));
  dpt::finish_checkpoint(dir, shard_of(s, 0, world, step, adam));
}

// Rank r of `world` got `s`'s slice (padding zero), the step, Ψ, layout and meta.
inline void check_loaded(const dpt::ShardState& got, const FullState& s, int r, int world, int64_t step, bool adam = true) {
  INFO("rank " << r << " of " << world << " ranks, step " << step);
  CHECK(got.rank == r);
  CHECK(got.world == world);
  CHECK(got.step == step);
  CHECK(got.psi == s.psi());
  CHECK(got.layout == s.layout);
  CHECK(got.meta.at("optimizer") == (adam ? "adam" : "sgd"));
  CHECK(first_difference(got.params, slice(s.params, r, world, 0.0f)) == "");
  if (adam) {
    CHECK(first_difference(got.exp_avg, slice(s.exp_avg, r, world, 0.0f)) == "");
    CHECK(first_difference(got.exp_avg_sq, slice(s.exp_avg_sq, r, world, 0.0f)) == "");
  } else {
    CHECK(got.exp_avg.empty());
    CHECK(got.exp_avg_sq.empty());
  }
}

inline std::string shard_path(const std::string& dir, int64_t step, int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof name, "/shard-%05d-of-%05d.safetensors", rank, world);
  return dpt::checkpoint_step_dir(dir, step) + name;
}

}  // namespace dpt_test
