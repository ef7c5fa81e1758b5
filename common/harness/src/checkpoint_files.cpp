// checkpoint_files.cpp — reading one sharded checkpoint's files back and
// checking them (see checkpoint_files.h), finding the newest complete one, and
// the CRC-32 that vouches for them.
#include "checkpoint_files.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <zlib.h>

#include "dpt/check.h"
#include "dpt/checkpoint.h"

namespace dpt {
namespace detail {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string join(const std::string& dir, const std::string& name) {
  return !dir.empty() && dir.back() == '/' ? dir + name : dir + "/" + name;
}
std::string quote_path(const std::string& path) { return "'" + path + "'"; }

std::string shard_file_name(int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof name, "shard-%05d-of-%05d.safetensors", rank, world);
  return name;
}

std::string read_bytes(const std::string& path, uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  DPT_CHECK(in, "cannot open " << quote_path(path) << ": " << std::strerror(errno));
  std::error_code ec;
  uint64_t size = fs::file_size(path, ec);
  DPT_CHECK(ec || size <= max_bytes, quote_path(path) << " is " << size << " bytes, more than the " << max_bytes
                                                      << " such a file can be: not part of a dpt checkpoint");
  return {std::istreambuf_iterator<char>(in), {}};
}

json layout_json(const Layout& layout) {
  json out = json::array();
  for (const auto& [name, shape] : layout) out.push_back({{"name", name}, {"shape", shape}});
  return out;
}

// What a shard must agree on with the index: everything but its own rank.
void check_layout(const Layout& layout, int64_t psi, const std::string& what) {
  DPT_CHECK(!layout.empty(), what << ": the layout lists no parameters");
  int64_t total = 0;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const auto& [name, shape] = layout[i];
    DPT_CHECK(!name.empty(), what << ": layout entry " << i << " has no name");
    for (std::size_t j = 0; j < i; ++j)
      DPT_CHECK(layout[j].first != name, what << ": the layout names '" << name << "' twice");
    for (int64_t d : shape) DPT_CHECK(d >= 0, what << ": '" << name << "' has a negative dimension");
    total += shape_numel(shape);
  }
  DPT_CHECK(total == psi, what << ": Ψ = " << psi << ", but the layout holds " << total << " parameters");
}

namespace {

uint32_t crc_of(const std::string& bytes) { return crc32(bytes.data(), bytes.size()); }

// ----------------------------------------------------------------------------
// index.json, read back and believed only after every check

// j[key] as an integer ≥ lowest, or an error naming `path`.
int64_t int_field(const json& j, const char* key, int64_t lowest, const std::string& path) {
  DPT_CHECK(j.contains(key) && j[key].is_number_integer() && j[key].get<int64_t>() >= lowest,
            quote_path(path) << ": '" << key << "' is missing or not an integer ≥ " << lowest);
  return j[key].get<int64_t>();
}

Layout layout_from(const json& j, const std::string& path) {
  DPT_CHECK(j.is_array(), quote_path(path) << ": 'layout' is not a list");
  Layout layout;
  for (const auto& entry : j) {
    DPT_CHECK(entry.is_object() && entry.contains("name") && entry["name"].is_string() && entry.contains("shape") &&
                  entry["shape"].is_array(),
              quote_path(path) << ": a layout entry lacks a name or a shape");
    Shape shape;
    for (const auto& d : entry["shape"]) {
      DPT_CHECK(d.is_number_integer(), quote_path(path)
                                           << ": '" << entry["name"].get<std::string>() << "' has a bad shape");
      shape.push_back(d.get<int64_t>());
    }
    layout.push_back({entry["name"].get<std::string>(), shape});
  }
  return layout;
}

json parse_json(const std::string& text, const std::string& path) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    DPT_FAIL(quote_path(path) << " is corrupt (not JSON): " << e.what());
  }
}

}  // namespace

Index read_index(const std::string& step_dir) {
  std::string marker_path = join(step_dir, "COMPLETE"), index_path = join(step_dir, "index.json");
  DPT_CHECK(
      fs::is_regular_file(marker_path),
      quote_path(marker_path) << " is missing: this checkpoint was never finished (rank 0 writes the marker last, "
                                 "after every shard and index.json)");
  json marker = parse_json(read_bytes(marker_path), marker_path);
  DPT_CHECK(fs::is_regular_file(index_path), quote_path(index_path) << " is missing");
  std::string text = read_bytes(index_path);
  json j = parse_json(text, index_path);
  DPT_CHECK(j.is_object() && j.value("format", "") == kIndexFormat,
            quote_path(index_path) << " is not a dpt checkpoint index (no \"format\": \"" << kIndexFormat << "\")");
  Index ix;
  ix.dir = step_dir;
  ix.world = int(int_field(j, "world", 1, index_path));
  ix.step = int_field(j, "step", 0, index_path);
  ix.psi = int_field(j, "psi", 1, index_path);
  ix.shard = int_field(j, "shard_size", 1, index_path);
  ix.has_moments = j.value("optimizer_state", false);
  ix.layout = layout_from(j.value("layout", json()), index_path);
  check_layout(ix.layout, ix.psi, quote_path(index_path));
  DPT_CHECK(ix.shard == shard_size(ix.psi, ix.world), quote_path(index_path)
                                                          << " says a shard holds " << ix.shard
                                                          << " floats; ceil(Ψ/N) = " << shard_size(ix.psi, ix.world));
  const json& shards = j.value("shards", json());
  DPT_CHECK(shards.is_array() && shards.size() == std::size_t(ix.world),
            quote_path(index_path) << " lists " << (shards.is_array() ? shards.size() : 0) << " shards for " << ix.world
                                   << " ranks");
  for (int k = 0; k < ix.world; ++k) {
    const json& s = shards[k];
    DPT_CHECK(s.is_object() && s.value("file", "") == shard_file_name(k, ix.world),
              quote_path(index_path) << ": shard " << k << " is not " << shard_file_name(k, ix.world));
    ix.shards.push_back({s["file"].get<std::string>(), uint64_t(int_field(s, "bytes", 8, index_path)),
                         uint32_t(int_field(s, "crc32", 0, index_path))});
  }
  if (j.contains("meta") && j["meta"].is_object())
    for (auto& [key, value] : j["meta"].items())
      ix.meta[key] = value.is_string() ? value.get<std::string>() : value.dump();
  DPT_CHECK(marker.is_object() && marker.value("index_crc32", int64_t(-1)) == int64_t(crc_of(text)),
            quote_path(index_path) << " does not match its CRC-32 in " << quote_path(marker_path)
                                   << ": it was changed after the checkpoint was finished");
  return ix;
}

// ----------------------------------------------------------------------------
// one shard file, checked against the index

namespace {

std::vector<float> shard_tensor(const SafeTensorsFile& f, const char* name, const Index& ix, const std::string& path) {
  auto it = f.tensors.find(name);
  DPT_CHECK(it != f.tensors.end(), quote_path(path) << " has no tensor '" << name << "'");
  DPT_CHECK(it->second.dtype == DType::F32 && it->second.shape == Shape{ix.shard},
            quote_path(path) << ": '" << name << "' is not F32 (" << ix.shard << ",)");
  return it->second.floats();
}

}  // namespace

ShardFile read_shard(const Index& ix, int k) {
  std::string path = join(ix.dir, shard_file_name(k, ix.world));
  DPT_CHECK(fs::is_regular_file(path), "shard " << k << " of " << ix.world << " is missing: " << quote_path(path));
  // The size before any byte is read: a shard larger than any shard of S
  // floats (or than index.json recorded) is refused at once, unread. A size
  // that is merely wrong is reported below, after the more telling checks.
  bool recorded = !ix.shards.empty();
  uint64_t expected = recorded ? ix.shards[k].bytes : 0;
  uint64_t limit = std::max(expected, kMaxShardHeader + 8 + 3 * 4 * uint64_t(ix.shard));
  std::error_code ec;
  uint64_t size = fs::file_size(path, ec);
  DPT_CHECK(!ec, "cannot read the size of " << quote_path(path) << ": " << ec.message());
  DPT_CHECK(size <= limit, quote_path(path) << " is " << size << " bytes, more than a shard of " << ix.shard
                                            << " floats can hold (index.json recorded " << expected
                                            << "): replaced or grown, so it was not read");
  std::string bytes = read_bytes(path, limit);
  SafeTensorsFile f = read_safetensors(path);
  auto meta = [&](const char* key) {
    auto it = f.metadata.find(key);
    return it == f.metadata.end() ? std::string("?") : it->second;
  };
  DPT_CHECK(meta("format") == kShardFormat, quote_path(path) << " is not a dpt ZeRO shard");
  std::string says =
      "rank " + meta("rank") + " of " + meta("world") + " at step " + meta("step") + " with Ψ = " + meta("psi");
  std::string should = "rank " + std::to_string(k) + " of " + std::to_string(ix.world) + " at step " +
                       std::to_string(ix.step) + " with Ψ = " + std::to_string(ix.psi);
  DPT_CHECK(says == should, quote_path(path) << " was written by " << says << "; this checkpoint expects " << should);
  json layout = parse_json(meta("layout"), path + " (layout)");
  DPT_CHECK(layout == layout_json(ix.layout), quote_path(path)
                                                  << " has another layout (parameter names or shapes) than "
                                                  << quote_path(join(ix.dir, "index.json")));
  if (recorded)
    DPT_CHECK(size == expected, quote_path(path) << " is " << size << " bytes; index.json recorded " << expected
                                                 << " (truncated or replaced)");
  ShardFile out;
  out.params = shard_tensor(f, "params", ix, path);
  bool moments = f.tensors.count("exp_avg") > 0;
  DPT_CHECK(moments == ix.has_moments, quote_path(path)
                                           << (moments ? " holds" : " lacks") << " Adam moments; the index says it "
                                           << (ix.has_moments ? "should" : "should not"));
  if (moments) {
    out.exp_avg = shard_tensor(f, "exp_avg", ix, path);
    out.exp_avg_sq = shard_tensor(f, "exp_avg_sq", ix, path);
  }
  out.bytes = bytes.size();
  out.crc = crc_of(bytes);
  if (recorded)
    DPT_CHECK(out.crc == ix.shards[k].crc, quote_path(path)
                                               << " fails its CRC-32 check (" << out.crc << ", index.json recorded "
                                               << ix.shards[k].crc << "): the file changed after it was saved");
  return out;
}

// ----------------------------------------------------------------------------
// which checkpoint: DIR/latest, else the highest complete step

namespace {

// The step of a published directory name "step-00000020", or -1 for any other name.
int64_t step_of(const std::string& name) {
  if (name.size() <= 5 || name.size() > 23 || name.compare(0, 5, "step-") != 0) return -1;
  if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stoll(name.substr(5));
}

// The step-* directory of `dir` with the highest step and a COMPLETE marker,
// other than `except`; "" if there is none.
std::string newest_complete(const fs::path& dir, const fs::path& except) {
  std::error_code ec, same;
  std::string best;
  int64_t best_step = -1;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    int64_t step = step_of(entry.path().filename().string());
    if (step > best_step && fs::is_regular_file(entry.path() / "COMPLETE") &&
        !fs::equivalent(entry.path(), except, same))
      best = entry.path().string(), best_step = step;
  }
  return best;
}

}  // namespace

std::string fallback_hint(const std::string& broken) {
  fs::path self = fs::path(broken).lexically_normal();
  if (!self.has_filename()) self = self.parent_path();  // "DIR/step-00000020/"
  std::string other = newest_complete(self.has_parent_path() ? self.parent_path() : ".", self);
  return other.empty()
             ? ""
             : " (the newest other complete checkpoint, " + quote_path(other) + ", is untouched: resume from it)";
}

}  // namespace detail

using namespace detail;  // the helpers above

std::string checkpoint_step_dir(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return join(dir, name);
}

uint32_t crc32(const void* data, std::size_t size) {
  return uint32_t(::crc32_z(0, static_cast<const Bytef*>(data), size));  // zlib's, already linked for .gz
}

std::string find_checkpoint(const std::string& dir) {
  DPT_CHECK(fs::is_directory(dir), "no checkpoint at " << quote_path(dir) << ": it is not a directory");
  for (const auto& entry : fs::directory_iterator(dir)) {  // one step's directory, given directly?
    std::string name = entry.path().filename().string();
    if (name == "COMPLETE" || name == "index.json" || name.rfind("shard-", 0) == 0) return dir;
  }
  std::string latest = join(dir, "latest");
  if (fs::exists(latest)) {
    std::string name = read_bytes(latest);
    name.erase(std::find_if(name.rbegin(), name.rend(), [](char c) { return !std::isspace(c); }).base(), name.end());
    DPT_CHECK(step_of(name) >= 0, quote_path(latest)
                                      << " should name a step-NNNNNNNN directory; it holds '" << name << "'");
    std::string target = join(dir, name);
    DPT_CHECK(fs::is_directory(target), quote_path(latest) << " names " << quote_path(target)
                                                           << ", which does not exist" << fallback_hint(target));
    return target;
  }
  // No pointer (a crash before the first one was written): the highest complete step.
  std::string best = newest_complete(dir, fs::path());
  DPT_CHECK(!best.empty(), quote_path(dir) << " holds no complete checkpoint (no 'latest', no step-* directory with a "
                                              "COMPLETE marker; a .partial directory is a save that never finished)");
  return best;
}

}  // namespace dpt
