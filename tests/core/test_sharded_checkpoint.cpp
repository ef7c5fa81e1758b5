// test_sharded_checkpoint.cpp — ZeRO checkpoints on real files in a temp dir:
// round trips for 1..4 ranks, N → M re-sharding, consolidation, the on-disk
// layout, and every broken case giving an error that names the file while
// the previous checkpoint stays loadable.
//
// Oracle (support/shard_oracle.h): the unpadded flat vectors built by hand and
// sliced by hand, index by index; saved padding holds garbage, so a loader
// that reads padding back, slices one off, or puts shards in the wrong order
// differs from it. Comparisons are exact: a checkpoint moves bits, it does
// no arithmetic.
#include "support/catch.h"
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>

#include "dpt/checkpoint.h"
#include "dpt/sharded_checkpoint.h"
#include "support/comm_contract.h"
#include "support/ranks.h"
#include "support/run_program.h"
#include "support/shard_oracle.h"

using namespace dpt;
using dpt_test::first_difference;
using dpt_test::FullState;
using dpt_test::shard_of;
using dpt_test::slice;
namespace fs = std::filesystem;

namespace {

// A fresh, empty directory path under the temp dir (not created).
std::string fresh_dir(const std::string& name) {
  std::string dir = dpt_test::temp_path(name);
  fs::remove_all(dir);
  return dir;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
// Replaces the first `from` in the file at `path` by `to`.
void edit_file(const std::string& path, const std::string& from, const std::string& to) {
  std::string text = read_file(path);
  std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  write_file(path, text.replace(at, from.size(), to));
}

// Every rank of `world` saves its shard of `s` at `step`, then rank 0 seals.
void save_all(const std::string& dir, const FullState& s, int world, int64_t step, bool adam = true) {
  for (int r = 0; r < world; ++r) save_checkpoint_shard(dir, shard_of(s, r, world, step, adam));
  finish_checkpoint(dir, shard_of(s, 0, world, step, adam));
}

// Rank r of `world` got `s`'s slice (padding zero), the step, Ψ, layout and meta.
void check_loaded(const ShardState& got, const FullState& s, int r, int world, int64_t step, bool adam = true) {
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

std::string shard_path(const std::string& dir, int64_t step, int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof name, "/shard-%05d-of-%05d.safetensors", rank, world);
  return checkpoint_step_dir(dir, step) + name;
}

}  // namespace

// ----------------------------------------------------------------------------
// round trips and re-sharding

TEST_CASE("sharded checkpoint: each of N = 1..4 ranks loads back its own shard, with zero padding",
          "[checkpoint][zero]") {
  FullState s = dpt_test::mlp_state(1);  // Ψ = 47: no N in 2..4 divides it
  for (int world = 1; world <= 4; ++world) {
    std::string dir = fresh_dir("ckpt_round_" + std::to_string(world));
    save_all(dir, s, world, 7);
    for (int r = 0; r < world; ++r) check_loaded(load_checkpoint_shard(dir, r, world), s, r, world, 7);
    fs::remove_all(dir);
  }
}

TEST_CASE("sharded checkpoint: re-sharding N → M equals slicing the unsharded flat vector for M ranks",
          "[checkpoint][zero]") {
  // Every pair 1..4 → 1..4 (4→2, 2→3 and 3→1 among them), for Ψ = 47 and for
  // Ψ = 3, where some ranks of 4 hold only padding.
  for (const FullState& s : {dpt_test::mlp_state(2), dpt_test::tiny_state()}) {
    for (int from = 1; from <= 4; ++from) {
      std::string dir = fresh_dir("ckpt_reshard_" + std::to_string(from));
      save_all(dir, s, from, 12);
      for (int to = 1; to <= 4; ++to) {
        INFO("Ψ = " << s.psi() << ", " << from << " → " << to << " ranks");
        for (int r = 0; r < to; ++r) check_loaded(load_checkpoint_shard(dir, r, to), s, r, to, 12);
      }
      fs::remove_all(dir);
    }
  }
}

TEST_CASE("sharded checkpoint: an SGD checkpoint (no Adam moments) re-shards its parameters alone",
          "[checkpoint][zero]") {
  FullState s = dpt_test::mlp_state(3);
  std::string dir = fresh_dir("ckpt_sgd");
  save_all(dir, s, 3, 4, /*adam=*/false);
  for (int r = 0; r < 2; ++r) check_loaded(load_checkpoint_shard(dir, r, 2), s, r, 2, 4, /*adam=*/false);
  fs::remove_all(dir);
}

TEST_CASE("sharded checkpoint: ranks as threads save at once, rank 0 seals after a barrier, another world loads",
          "[checkpoint][zero]") {
  FullState s = dpt_test::mlp_state(4);
  std::string dir = fresh_dir("ckpt_threads");
  dpt_test::run_ranks(4, [&](Context& ctx) {
    save_checkpoint_shard(dir, shard_of(s, ctx.rank, ctx.world, 9));  // all four create the directory at once
    ctx.comm.barrier();
    if (ctx.is_root()) finish_checkpoint(dir, shard_of(s, 0, ctx.world, 9));
  });
  std::vector<ShardState> got(3);  // each rank writes only its own slot; checks run after the launch
  dpt_test::run_ranks(3, [&](Context& ctx) { got[ctx.rank] = load_checkpoint_shard(dir, ctx.rank, ctx.world); });
  for (int r = 0; r < 3; ++r) check_loaded(got[r], s, r, 3, 9);
  fs::remove_all(dir);
}

// ----------------------------------------------------------------------------
// consolidation and the files on disk

TEST_CASE("consolidate_checkpoint writes each weight by name in PyTorch layout, bit for bit", "[checkpoint][zero]") {
  Rng rng(11);
  MLP model({5, 4, 3, 2}, Device::host(), rng);
  FullState s = dpt_test::mlp_state(11);  // the same model's parameters, flattened
  std::string dir = fresh_dir("ckpt_consolidate"), out = dpt_test::temp_path("consolidated.safetensors");
  save_all(dir, s, 3, 30);
  consolidate_checkpoint(dir, out);

  SafeTensorsFile file = read_safetensors(out);
  auto params = model.named_parameters();
  CHECK(file.tensors.size() == params.size());
  CHECK(file.metadata.at("format") == "pt");
  for (const auto& p : params) {
    INFO(p.name);
    REQUIRE(file.tensors.count(p.name) == 1);
    const SafeTensor& t = file.tensors.at(p.name);
    CHECK(t.shape == p.tensor.shape());  // fc0.weight (4, 5): (out, in)
    std::vector<float> want = p.tensor.to_vector();
    std::string want_bytes(reinterpret_cast<const char*>(want.data()), want.size() * sizeof(float));
    CHECK(std::string(t.bytes.begin(), t.bytes.end()) == want_bytes);
  }
  Rng other_rng(99);
  MLP other({5, 4, 3, 2}, Device::host(), other_rng);
  load_weights(out, other.named_parameters());
  for (std::size_t i = 0; i < params.size(); ++i)
    CHECK(first_difference(other.named_parameters()[i].tensor.to_vector(), params[i].tensor.to_vector()) == "");
  fs::remove_all(dir);
  std::remove(out.c_str());
}

TEST_CASE("sharded checkpoint on disk: latest → step-S with N shards, index.json and COMPLETE, nothing partial",
          "[checkpoint][zero]") {
  FullState s = dpt_test::mlp_state(5);
  std::string dir = fresh_dir("ckpt_layout");
  save_all(dir, s, 2, 20);
  std::string step_dir = dir + "/step-00000020";
  CHECK(read_file(dir + "/latest") == "step-00000020\n");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"latest", "step-00000020"});
  names.clear();
  for (const auto& e : fs::directory_iterator(step_dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"COMPLETE", "index.json", "shard-00000-of-00002.safetensors",
                                          "shard-00001-of-00002.safetensors"});

  auto index = nlohmann::json::parse(read_file(step_dir + "/index.json"));
  CHECK(index["world"] == 2);
  CHECK(index["step"] == 20);
  CHECK(index["psi"] == 47);
  CHECK(index["shard_size"] == 24);  // ceil(47 / 2)
  REQUIRE(index["layout"].size() == 6);
  CHECK(index["layout"][0]["name"] == "fc0.weight");
  CHECK(index["layout"][0]["shape"] == nlohmann::json::array({4, 5}));
  CHECK(index["layout"][5]["name"] == "fc2.bias");
  CHECK(index["meta"]["seed"] == "7");
  for (int r = 0; r < 2; ++r) {
    std::string bytes = read_file(shard_path(dir, 20, r, 2));
    CHECK(index["shards"][r]["bytes"] == bytes.size());
    CHECK(index["shards"][r]["crc32"] == crc32(bytes.data(), bytes.size()));
    // Each shard is an ordinary safetensors file: params (S,) holding rank r's floats.
    SafeTensorsFile f = read_safetensors(shard_path(dir, 20, r, 2));
    CHECK(f.tensors.at("params").shape == Shape{24});
    CHECK(f.tensors.at("params").floats() == slice(s.params, r, 2, dpt_test::kPaddingGarbage));
  }
  std::string marker = read_file(step_dir + "/COMPLETE");
  std::string index_text = read_file(step_dir + "/index.json");
  CHECK(nlohmann::json::parse(marker)["index_crc32"] == crc32(index_text.data(), index_text.size()));
  fs::remove_all(dir);
}

TEST_CASE("crc32 is the IEEE CRC-32 that zlib and Python's zlib.crc32 compute", "[checkpoint][zero]") {
  // The standard check value of CRC-32/ISO-HDLC, and two more from zlib.
  CHECK(crc32("123456789", 9) == 0xCBF43926u);
  CHECK(crc32("", 0) == 0u);
  CHECK(crc32("a", 1) == 0xE8B7BE43u);
}

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
