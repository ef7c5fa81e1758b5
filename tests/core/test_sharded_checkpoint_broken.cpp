// test_sharded_checkpoint_broken.cpp — broken ZeRO checkpoints: every broken
// file is an error naming it while the previous checkpoint stays loadable, a
// save that crashed midway is ignored, a step saved again is replaced whole,
// and bad calls are refused before anything is written.
#include "support/catch.h"
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dpt/checkpoint.h"
#include "dpt/sharded_checkpoint.h"
#include "support/checkpoint_files.h"
#include "support/comm_contract.h"
#include "support/shard_oracle.h"

using namespace dpt;
using namespace dpt_test;
namespace fs = std::filesystem;

// ----------------------------------------------------------------------------
// broken checkpoints: an error naming the file, and the previous one still loads

namespace {

// DIR with two complete checkpoints of 4 ranks: step 10 holds `a`, step 20 (latest) holds `b`.
void two_checkpoints(const std::string& dir, const FullState& a, const FullState& b) {
  save_all(dir, a, 4, 10);
  save_all(dir, b, 4, 20);
}

// Loading DIR (which follows latest to step 20) fails on every rank that needs
// the broken file, with a message naming `file` and `phrase` and pointing at
// step 10; consolidation fails too; step 10 itself still loads on every rank.
void check_broken(const std::string& dir, const FullState& a, const std::vector<int>& failing_ranks,
                  const std::string& file, const std::string& phrase) {
  std::string previous = checkpoint_step_dir(dir, 10);
  for (int r : failing_ranks) {
    INFO("rank " << r << " of 4");
    CHECK_THROWS_WITH(load_checkpoint_shard(dir, r, 4),
                      contains_text(file) && contains_text(phrase) && contains_text(previous));
  }
  CHECK_THROWS_WITH(load_checkpoint_shard(dir, 0, 1), contains_text(file) && contains_text(phrase));
  std::string out = dpt_test::temp_path("broken_consolidated.safetensors");
  CHECK_THROWS_WITH(consolidate_checkpoint(dir, out), contains_text(file));
  CHECK_FALSE(fs::exists(out));
  for (int r = 0; r < 4; ++r) check_loaded(load_checkpoint_shard(previous, r, 4), a, r, 4, 10);
}

}  // namespace

TEST_CASE("a broken checkpoint is a clear error naming the file, and the previous checkpoint stays loadable",
          "[checkpoint][zero]") {
  FullState a = dpt_test::mlp_state(6), b = dpt_test::mlp_state(7);
  std::string dir = fresh_dir("ckpt_broken");
  two_checkpoints(dir, a, b);
  std::string step20 = checkpoint_step_dir(dir, 20);

  SECTION("a missing shard") {
    fs::remove(shard_path(dir, 20, 2, 4));
    check_broken(dir, a, {2}, shard_path(dir, 20, 2, 4), "missing");
  }
  SECTION("a truncated shard") {
    std::string bytes = read_file(shard_path(dir, 20, 1, 4));
    write_file(shard_path(dir, 20, 1, 4), bytes.substr(0, bytes.size() - 5));
    check_broken(dir, a, {1}, shard_path(dir, 20, 1, 4), "truncated");
  }
  SECTION("a shard from another world size") {
    std::string other = fresh_dir("ckpt_broken_world2");
    save_all(other, b, 2, 20);
    fs::copy_file(shard_path(other, 20, 1, 2), shard_path(dir, 20, 1, 4), fs::copy_options::overwrite_existing);
    check_broken(dir, a, {1}, shard_path(dir, 20, 1, 4), "rank 1 of 2 at step 20");
    fs::remove_all(other);
  }
  SECTION("a shard from another step") {
    fs::copy_file(shard_path(dir, 10, 3, 4), shard_path(dir, 20, 3, 4), fs::copy_options::overwrite_existing);
    check_broken(dir, a, {3}, shard_path(dir, 20, 3, 4), "rank 3 of 4 at step 10");
  }
  SECTION("a flipped byte (the CRC-32 catches what parses fine)") {
    std::string bytes = read_file(shard_path(dir, 20, 0, 4));
    bytes[bytes.size() - 3] ^= 0x10;  // inside exp_avg_sq's last float: a valid file, a different value
    write_file(shard_path(dir, 20, 0, 4), bytes);
    check_broken(dir, a, {0}, shard_path(dir, 20, 0, 4), "CRC-32");
  }
  SECTION("a missing COMPLETE marker") {
    fs::remove(step20 + "/COMPLETE");
    check_broken(dir, a, {0, 1, 2, 3}, step20 + "/COMPLETE", "never finished");
  }
  SECTION("an index that lies about Ψ") {
    edit_file(step20 + "/index.json", "\"psi\": 47", "\"psi\": 48");
    check_broken(dir, a, {0, 1, 2, 3}, step20 + "/index.json", "Ψ = 48");
  }
  SECTION("an index edited in a way that stays consistent (its CRC-32 in COMPLETE catches it)") {
    edit_file(step20 + "/index.json", "\"seed\": \"7\"", "\"seed\": \"8\"");
    check_broken(dir, a, {0, 1, 2, 3}, step20 + "/index.json", "changed after");
  }
  fs::remove_all(dir);
}

TEST_CASE("a save that crashed midway is ignored: DIR resumes from the newest complete checkpoint",
          "[checkpoint][zero]") {
  FullState a = dpt_test::mlp_state(8), b = dpt_test::mlp_state(9);
  std::string dir = fresh_dir("ckpt_crash");
  save_all(dir, a, 4, 10);
  for (int r = 0; r < 3; ++r) save_checkpoint_shard(dir, shard_of(b, r, 4, 20));  // rank 3 died before saving
  CHECK(find_checkpoint(dir) == checkpoint_step_dir(dir, 10));
  for (int r = 0; r < 4; ++r) check_loaded(load_checkpoint_shard(dir, r, 4), a, r, 4, 10);
  // Had rank 0 gone on to seal it, it would refuse, naming the missing shard, and publish nothing.
  CHECK_THROWS_WITH(finish_checkpoint(dir, shard_of(b, 0, 4, 20)), contains_text("shard-00003-of-00004"));
  CHECK_FALSE(fs::exists(checkpoint_step_dir(dir, 20)));
  CHECK(read_file(dir + "/latest") == "step-00000010\n");
  check_loaded(load_checkpoint_shard(dir, 1, 2), a, 1, 2, 10);
  fs::remove_all(dir);
}

TEST_CASE("saving a step again replaces it whole, leftovers of a crashed attempt included, latest follows",
          "[checkpoint][zero]") {
  // A run resumed from step 10 saves step 20 again, now with 2 ranks, where an
  // abandoned run's complete step 20 (4 ranks) and a crashed attempt's shards lie.
  FullState a = dpt_test::mlp_state(10), b = dpt_test::mlp_state(12), c = dpt_test::mlp_state(13);
  std::string dir = fresh_dir("ckpt_again");
  save_all(dir, a, 4, 10);
  save_all(dir, b, 4, 20);
  save_checkpoint_shard(dir, shard_of(b, 3, 4, 20));  // a crashed attempt's leftover in step-00000020.partial
  save_all(dir, c, 2, 20);
  for (int r = 0; r < 2; ++r) check_loaded(load_checkpoint_shard(dir, r, 2), c, r, 2, 20);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(checkpoint_step_dir(dir, 20)))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"COMPLETE", "index.json", "shard-00000-of-00002.safetensors",
                                          "shard-00001-of-00002.safetensors"});
  CHECK_FALSE(fs::exists(checkpoint_step_dir(dir, 20) + ".partial"));
  // latest names the newest save, not the highest step: save step 15 and it wins.
  save_all(dir, a, 3, 15);
  CHECK(find_checkpoint(dir) == checkpoint_step_dir(dir, 15));
  fs::remove_all(dir);
}

TEST_CASE("without DIR/latest, loading takes the highest step that has a COMPLETE marker", "[checkpoint][zero]") {
  FullState a = dpt_test::mlp_state(14), b = dpt_test::mlp_state(15);
  std::string dir = fresh_dir("ckpt_nolatest");
  save_all(dir, a, 2, 10);
  save_all(dir, b, 2, 20);
  fs::remove(dir + "/latest");
  check_loaded(load_checkpoint_shard(dir, 0, 2), b, 0, 2, 20);
  fs::remove(checkpoint_step_dir(dir, 20) + "/COMPLETE");
  check_loaded(load_checkpoint_shard(dir, 1, 2), a, 1, 2, 10);
  write_file(dir + "/latest", "step-00000030\n");  // a pointer to nothing is an error, not a guess
  CHECK_THROWS_WITH(load_checkpoint_shard(dir, 0, 2), contains_text("step-00000030") &&
                                                          contains_text("does not exist") &&
                                                          contains_text(checkpoint_step_dir(dir, 10)));
  fs::remove_all(dir);
}

TEST_CASE("bad calls are refused with a sentence, before anything is written", "[checkpoint][zero]") {
  FullState s = dpt_test::mlp_state(16);
  std::string dir = fresh_dir("ckpt_bad");
  struct Spoiled {
    const char* message;                     // what the refusal must say
    std::function<void(ShardState&)> spoil;  // what is wrong with the shard
  };
  for (const Spoiled& bad : std::vector<Spoiled>{{"ceil(Ψ/N) = 12", [](ShardState& b) { b.params.pop_back(); }},
                                                 {"layout holds 47", [](ShardState& b) { b.psi = 46; }},
                                                 {"exp_avg_sq", [](ShardState& b) { b.exp_avg_sq.clear(); }},
                                                 {"rank 4 of 4", [](ShardState& b) { b.rank = 4; }}}) {
    ShardState shard = shard_of(s, 1, 4, 5);
    bad.spoil(shard);
    CHECK_THROWS_WITH(save_checkpoint_shard(dir, shard), contains_text(bad.message));
  }
  CHECK_FALSE(fs::exists(dir));
  save_checkpoint_shard(dir, shard_of(s, 1, 4, 5));
  CHECK_THROWS_WITH(finish_checkpoint(dir, shard_of(s, 1, 4, 5)), contains_text("rank 0's job"));
  CHECK_THROWS_WITH(load_checkpoint_shard(dir + "/nothing", 0, 1), contains_text("not a directory"));
  CHECK_THROWS_WITH(load_checkpoint_shard(dir, 0, 1), contains_text("no complete checkpoint"));
  CHECK_THROWS_WITH(load_checkpoint_shard(dir, 2, 2), contains_text("rank 2 of 2"));
  fs::remove_all(dir);
}
