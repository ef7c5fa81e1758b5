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
//
// Here: round trips, re-sharding, consolidation and the files on disk; broken
// checkpoints in test_sharded_checkpoint_broken.cpp.
#include "support/catch.h"
#include <filesystem>
#include <nlohmann/json.hpp>

#include "dpt/checkpoint.h"
#include "dpt/sharded_checkpoint.h"
#include "support/checkpoint_files.h"
#include "support/comm_contract.h"
#include "support/ranks.h"
#include "support/shard_oracle.h"

using namespace dpt;
using namespace dpt_test;
namespace fs = std::filesystem;

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
