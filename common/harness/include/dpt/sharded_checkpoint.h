/// @file sharded_checkpoint.h
/// @brief ZeRO checkpoints: every rank saves its own shard, rank 0 seals the
/// set, and any number of ranks can load it back (re-sharding N → M), or turn
/// it into one ordinary safetensors file of the weights.
///
/// **The state being saved** (chapter 07's layout). All parameters, in
/// `MLP::parameters()` order, are one flat fp32 vector of Ψ floats, zero-padded
/// to N·S with S = ceil(Ψ/N); rank r owns floats [r·S, (r+1)·S). Adam's two
/// moments are cut the same way. The step count is global.
///
///     Ψ = 10, N = 4, S = 3:   flat  v0 v1 v2 | v3 v4 v5 | v6 v7 v8 | v9 0 0
///                                   rank 0     rank 1     rank 2     rank 3 (2 floats of padding)
///
/// **On disk.** `DIR` (the `--save-checkpoint` directory) holds one directory
/// per saved step and a pointer to the newest:
///
///     DIR/latest                               "step-00000020": the newest complete checkpoint
///     DIR/step-00000010/                       an older complete checkpoint (kept)
///     DIR/step-00000020/shard-00000-of-00004.safetensors   rank 0's params, exp_avg, exp_avg_sq (S,)
///                      /shard-00001-of-00004.safetensors   … one per rank
///                      /index.json        world, step, Ψ, layout, each shard's size and CRC-32, meta
///                      /COMPLETE          written last; holds the CRC-32 of index.json
///     DIR/step-00000030.partial/           a save in progress (or one that crashed): never read
///
/// **Atomicity: a crash never costs the previous checkpoint.** Ranks write
/// their shards into `step-S.partial/` (each file itself atomic: temporary
/// file + fsync + rename). After every rank's save returned (the caller's
/// barrier), rank 0 reads every shard back, writes `index.json`, then
/// `COMPLETE`, then renames the whole directory to `step-S` (swapping it
/// atomically with an older `step-S` of the same step, if one exists), and
/// only then rewrites `latest`. A crash at any point leaves `latest` naming a
/// complete checkpoint; the half-written one sits in a `.partial` directory
/// that loading ignores and the next save of that step reuses.
///
/// **Loading** takes `DIR` (follows `latest`; without it, the highest step
/// that has `COMPLETE`) or one `DIR/step-S` itself. It trusts nothing: the
/// marker must be there and match the index, the index must agree with itself
/// (Ψ = Σ layout sizes, S = ceil(Ψ/N)), and every shard the loading rank needs
/// must have the size and CRC-32 the index recorded and say it is rank r of N
/// at this step. Any failure is a dpt::Error naming the file, and pointing at
/// the newest complete checkpoint beside it, which stays loadable.
///
/// **Re-sharding N → M** goes through the unpadded flat order: new rank r'
/// takes floats [r'·S', min((r'+1)·S', Ψ)) with S' = ceil(Ψ/M), wherever
/// they lie among the old shards, and zeros after Ψ. Padding is never read
/// back: whatever a saved shard holds past Ψ, loaded padding is zero.
///
/// Left out: async saves, fp16/bf16 shards, pruning old steps (delete them
/// yourself), and machines without a shared view of DIR (rank 0 reads every
/// rank's file: one node, or NFS/Lustre). The whole story, with what a crash
/// at each point leaves behind: \ref checkpoints (docs/checkpoints.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dpt/tensor.h"

namespace dpt {

/// One rank's part of a ZeRO checkpoint (see the file comment for the layout).
struct ShardState {
  int rank = 0;      ///< this shard's rank, 0 ≤ rank < world
  int world = 1;     ///< number of shards N
  int64_t step = 0;  ///< global optimizer step count
  int64_t psi = 0;   ///< Ψ: parameters in the model, unpadded
  /// (S,) this rank's floats [rank·S, (rank+1)·S) of the padded flat parameters, S = ceil(Ψ/N).
  std::vector<float> params;
  std::vector<float> exp_avg;     ///< (S,) Adam's first moment, same cut; empty for SGD
  std::vector<float> exp_avg_sq;  ///< (S,) Adam's second moment, same cut; empty for SGD
  /// Each parameter's name and shape, in flat order ("fc0.weight" (out, in), "fc0.bias" (out,), …).
  std::vector<std::pair<std::string, Shape>> layout;
  std::map<std::string, std::string> meta;  ///< free-form: seed, optimizer, lr, …
};

/// Floats per shard: ceil(psi / world). Precondition: psi ≥ 0, world ≥ 1.
int64_t shard_size(int64_t psi, int world);

/// DIR/step-SSSSSSSS: where the checkpoint of `step` is published.
std::string checkpoint_step_dir(const std::string& dir, int64_t step);

/// Each rank: writes DIR/step-S.partial/shard-RRRRR-of-NNNNN.safetensors
/// atomically (creating the directories). Checks the shard first (rank in
/// [0, world), S floats, layout sizes summing to Ψ) and throws dpt::Error
/// without writing if it is inconsistent.
void save_checkpoint_shard(const std::string& dir, const ShardState& shard);

/// Rank 0 only, after every rank's save returned (the caller's barrier):
/// validates every shard of DIR/step-S.partial, writes index.json (world,
/// step, Ψ, layout, each shard's file, size and CRC-32, meta) and then
/// COMPLETE, publishes the directory as DIR/step-S and points DIR/latest at
/// it. `rank0_shard` supplies world, step, Ψ, layout and meta.
void finish_checkpoint(const std::string& dir, const ShardState& rank0_shard);

/// The complete checkpoint directory that loading `dir` reads: `dir` itself if
/// it is one step's directory, else the one DIR/latest names, else the highest
/// step with a COMPLETE marker. Throws dpt::Error if there is none.
std::string find_checkpoint(const std::string& dir);

/// Any rank `rank` of a world of `world` ranks: validates the checkpoint (see
/// the file comment) and returns this rank's shard for that world: params and
/// moments of ceil(Ψ/world) floats each, zero past Ψ; step, Ψ, layout and meta
/// as saved. Throws dpt::Error naming the file at the first problem.
ShardState load_checkpoint_shard(const std::string& dir, int rank, int world);

/// Validates every shard of the checkpoint at `dir` and writes its weights to
/// `out_path` as one ordinary safetensors file, each parameter by name in
/// PyTorch's layout (what dpt::load_weights and torch's safetensors read).
/// The write is atomic, under output_file.h's policy.
void consolidate_checkpoint(const std::string& dir, const std::string& out_path);

/// CRC-32 (IEEE 802.3, the one zlib and Python's zlib.crc32 compute) of `size` bytes.
uint32_t crc32(const void* data, std::size_t size);

}  // namespace dpt
