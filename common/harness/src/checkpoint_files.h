// checkpoint_files.h — the files of one sharded checkpoint (see
// dpt/sharded_checkpoint.h for the layout), read back and checked before they
// are believed. Private to libdpt: sharded_checkpoint.cpp writes them and
// re-shards what these functions return.
//
//   DIR/step-00000020/index.json           -> Index       (read_index)
//   DIR/step-00000020/shard-0000k-of-0000N -> ShardFile   (read_shard)
//   DIR/latest, DIR/step-*                 -> which one   (find_checkpoint, fallback_hint)
//
// Every error names the file and says what was expected and what was found.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dpt/sharded_checkpoint.h"

namespace dpt {
namespace detail {

/// Parameter names and shapes in flat order.
using Layout = std::vector<std::pair<std::string, Shape>>;

/// "format" of a shard file's metadata and of index.json.
inline const char* const kShardFormat = "dpt-zero-shard";
inline const char* const kIndexFormat = "dpt-zero-checkpoint";

/// dir + "/" + name.
std::string join(const std::string& dir, const std::string& name);
/// "'path'", for messages.
std::string quote_path(const std::string& path);
/// "shard-00001-of-00004.safetensors".
std::string shard_file_name(int rank, int world);
/// The most bytes index.json, COMPLETE or latest may hold (a layout of
/// thousands of layers is well under a megabyte).
constexpr uint64_t kMaxSmallFile = uint64_t(64) << 20;
/// A shard's safetensors header at most (read_safetensors' own cap).
constexpr uint64_t kMaxShardHeader = uint64_t(100) << 20;
/// The whole file as bytes; throws naming it if it cannot be opened or is
/// larger than `max_bytes` (checked before a byte is read).
std::string read_bytes(const std::string& path, uint64_t max_bytes = kMaxSmallFile);
/// [{"name": …, "shape": […]}, …], as index.json and each shard store it.
nlohmann::json layout_json(const Layout& layout);
/// Names present, unique, dimensions ≥ 0, sizes summing to psi; `what` starts the message.
void check_layout(const Layout& layout, int64_t psi, const std::string& what);

/// One shard as index.json records it.
struct ShardRecord {
  std::string file;    ///< shard-RRRRR-of-NNNNN.safetensors
  uint64_t bytes = 0;  ///< file size
  uint32_t crc = 0;    ///< CRC-32 of the whole file
};

/// index.json of one step's directory (or, while rank 0 seals it, what it will say).
struct Index {
  std::string dir;                          ///< the step's directory
  int world = 1;                            ///< N shards
  int64_t step = 0;                         ///< global step
  int64_t psi = 0;                          ///< Ψ, unpadded
  int64_t shard = 0;                        ///< S = ceil(Ψ/N) floats per shard
  bool has_moments = false;                 ///< shards hold exp_avg and exp_avg_sq
  Layout layout;                            ///< names and shapes in flat order
  std::vector<ShardRecord> shards;          ///< one per rank; empty until sealed
  std::map<std::string, std::string> meta;  ///< the caller's free-form strings
};

/// Reads step_dir's COMPLETE marker and index.json and checks them: marker
/// present, index self-consistent (Ψ = Σ layout, S = ceil(Ψ/N), N shard
/// records), and its CRC-32 the one the marker vouches for.
Index read_index(const std::string& step_dir);

/// One shard's contents, (S,) each; moments empty for SGD.
struct ShardFile {
  std::vector<float> params, exp_avg, exp_avg_sq;
  uint64_t bytes = 0;  ///< the file's size
  uint32_t crc = 0;    ///< the file's CRC-32
};

/// Shard k of `ix`, checked in the order that gives the most telling message:
/// present; a whole safetensors file (a truncated one is not); rank k of N at
/// this step with this Ψ and layout; then, if the index has records, the size
/// and CRC-32 it recorded.
ShardFile read_shard(const Index& ix, int k);

/// " (the newest other complete checkpoint, '…', is untouched: resume from it)"
/// for the step-* siblings of `broken`, or "" if there is none.
std::string fallback_hint(const std::string& broken);

}  // namespace detail
}  // namespace dpt
