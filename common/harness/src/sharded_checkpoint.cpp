// sharded_checkpoint.cpp — ZeRO checkpoints: each rank saves its shard, rank 0
// seals the set (index, marker, publish, pointer), any world loads it back
// re-sharded, and consolidation writes one plain weights file. Layout,
// atomicity and what is left out: sharded_checkpoint.h. Reading the files back
// and checking them: checkpoint_files.cpp.
#include "dpt/sharded_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include "checkpoint_files.h"
#include "dpt/check.h"
#include "dpt/checkpoint.h"
#include "dpt/output_file.h"

namespace dpt {

using namespace detail;  // checkpoint_files.h

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string partial_dir(const std::string& dir, int64_t step) { return checkpoint_step_dir(dir, step) + ".partial"; }

void check_shard_state(const ShardState& s, const std::string& what) {
  DPT_CHECK(s.world >= 1 && s.rank >= 0 && s.rank < s.world,
            what << ": rank " << s.rank << " of " << s.world << " ranks is not a rank");
  DPT_CHECK(s.step >= 0, what << ": step " << s.step << " is negative");
  DPT_CHECK(s.psi >= 1, what << ": Ψ = " << s.psi << "; a checkpoint holds at least one parameter");
  check_layout(s.layout, s.psi, what);
  std::size_t size = std::size_t(shard_size(s.psi, s.world));
  DPT_CHECK(s.params.size() == size, what << ": rank " << s.rank << " holds " << s.params.size()
                                          << " parameters; with Ψ = " << s.psi << " over " << s.world
                                          << " ranks a shard is ceil(Ψ/N) = " << size);
  DPT_CHECK(s.exp_avg.size() == s.exp_avg_sq.size() && (s.exp_avg.empty() || s.exp_avg.size() == size),
            what << ": exp_avg and exp_avg_sq must both be empty (SGD) or both hold " << size << " floats; they hold "
                 << s.exp_avg.size() << " and " << s.exp_avg_sq.size());
}

SafeTensor floats_tensor(const std::vector<float>& v) {
  SafeTensor t{DType::F32, {int64_t(v.size())}, std::vector<uint8_t>(v.size() * sizeof(float))};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// `partial` must be a directory itself, not a symbolic link to one: a save
// through a link would delete and write files wherever it points.
void check_real_directory(const std::string& partial) {
  std::error_code ec;
  fs::file_status st = fs::symlink_status(partial, ec);
  DPT_CHECK(st.type() != fs::file_type::symlink,
            quote_path(partial) << " is a symbolic link; a checkpoint is never written through a link (it would "
                                   "change files wherever the link points): remove it and save again");
  DPT_CHECK(st.type() == fs::file_type::directory, "cannot create the checkpoint directory "
                                                       << quote_path(partial) << ": "
                                                       << (ec ? ec.message() : "something else is in the way"));
}

// Best effort: a rename lives in its directory, so sync the directory too.
void sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Errors while reading `step_dir` also point at the checkpoint before it.
template <class Body>
auto with_fallback_hint(const std::string& step_dir, Body body) {
  try {
    return body();
  } catch (const Error& e) {
    throw Error(e.what() + fallback_hint(step_dir), e.where());
  }
}

// ----------------------------------------------------------------------------
// sealing: what rank 0 does once every shard is on disk

// Shards of an earlier, crashed attempt at this step (another world size) and
// its temporary files would only confuse a reader: remove them.
void remove_leftovers(const std::string& partial, int world) {
  std::vector<std::string> ours;
  for (int k = 0; k < world; ++k) ours.push_back(shard_file_name(k, world));
  for (const auto& entry : fs::directory_iterator(partial)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("shard-", 0) == 0 && std::find(ours.begin(), ours.end(), name) == ours.end())
      fs::remove(entry.path());
  }
}

// index.json (every shard's size and CRC-32, read back from disk), then the
// marker that vouches for it: whoever sees COMPLETE sees the whole set.
void write_index_and_marker(const Index& ix) {
  json shards = json::array();
  for (int k = 0; k < ix.world; ++k) {
    ShardFile s = read_shard(ix, k);  // what gets sealed has been read back, not assumed
    shards.push_back({{"file", shard_file_name(k, ix.world)}, {"bytes", s.bytes}, {"crc32", s.crc}});
  }
  json index = {{"format", kIndexFormat},
                {"world", ix.world},
                {"step", ix.step},
                {"psi", ix.psi},
                {"shard_size", ix.shard},
                {"optimizer_state", ix.has_moments},
                {"layout", layout_json(ix.layout)},
                {"shards", shards},
                {"meta", ix.meta}};
  std::string text = index.dump(2) + "\n";
  write_output_file(join(ix.dir, "index.json"), text);
  json marker = {{"index_crc32", crc32(text.data(), text.size())}, {"step", ix.step}, {"world", ix.world}};
  write_output_file(join(ix.dir, "COMPLETE"), marker.dump() + "\n");
}

// Renames `partial` to `final_dir`. An older final_dir (a run resumed from
// before this step saves it again) is swapped out atomically, then removed.
void publish(const std::string& partial, const std::string& final_dir) {
  auto fail = [&] {
    DPT_FAIL("cannot publish " << quote_path(partial) << " as " << quote_path(final_dir) << ": "
                               << std::strerror(errno));
  };
  if (!fs::exists(final_dir)) {
    if (::rename(partial.c_str(), final_dir.c_str()) != 0) fail();
  } else if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(partial);  // the old one, now under the partial name
  } else {
    // No atomic exchange on this file system (NFS): the old one steps aside for a moment.
    std::string aside = final_dir + ".replaced";
    fs::remove_all(aside);
    if (::rename(final_dir.c_str(), aside.c_str()) != 0 || ::rename(partial.c_str(), final_dir.c_str()) != 0) fail();
    fs::remove_all(aside);
  }
}

// ----------------------------------------------------------------------------
// re-sharding: everything goes through the unpadded flat order

// Floats [begin, end) of the unpadded flat vector, gathered from old shards of
// `old_size` floats (old shard k holds [k·old_size, (k+1)·old_size)), into a
// buffer of `new_size` floats whose tail past end − begin stays zero (padding).
std::vector<float> gather_flat(int64_t begin, int64_t end, int64_t new_size, int64_t old_size,
                               const std::function<const std::vector<float>&(int)>& old_shard) {
  std::vector<float> out(std::size_t(new_size), 0.0f);
  for (int64_t i = begin; i < end;) {
    int k = int(i / old_size);                         // the old shard holding float i
    int64_t stop = std::min(end, (k + 1) * old_size);  // … up to its end or ours
    const std::vector<float>& src = old_shard(k);
    std::copy(src.begin() + (i - k * old_size), src.begin() + (stop - k * old_size), out.begin() + (i - begin));
    i = stop;
  }
  return out;
}

}  // namespace

// ----------------------------------------------------------------------------
// public API

int64_t shard_size(int64_t psi, int world) {
  DPT_CHECK(psi >= 0 && world >= 1, "shard_size: Ψ = " << psi << " over " << world << " ranks");
  return (psi + world - 1) / world;
}

void save_checkpoint_shard(const std::string& dir, const ShardState& shard) {
  check_shard_state(shard, "save_checkpoint_shard");
  PublishNow now;  // on disk before the run goes on, not at its end (output_file.h)
  std::string partial = partial_dir(dir, shard.step);
  std::error_code ec;
  fs::create_directories(partial, ec);  // every rank may race here: an existing directory is fine
  check_real_directory(partial);
  SafeTensorsFile file;
  file.tensors["params"] = floats_tensor(shard.params);
  if (!shard.exp_avg.empty()) {
    file.tensors["exp_avg"] = floats_tensor(shard.exp_avg);
    file.tensors["exp_avg_sq"] = floats_tensor(shard.exp_avg_sq);
  }
  file.metadata = {{"format", kShardFormat},
                   {"rank", std::to_string(shard.rank)},
                   {"world", std::to_string(shard.world)},
                   {"step", std::to_string(shard.step)},
                   {"psi", std::to_string(shard.psi)},
                   {"layout", layout_json(shard.layout).dump()}};
  write_safetensors(join(partial, shard_file_name(shard.rank, shard.world)), file);  // atomic
}

void finish_checkpoint(const std::string& dir, const ShardState& rank0_shard) {
  check_shard_state(rank0_shard, "finish_checkpoint");
  DPT_CHECK(rank0_shard.rank == 0, "finish_checkpoint is rank 0's job; it was called with rank " << rank0_shard.rank);
  PublishNow now;  // as save_checkpoint_shard's
  const ShardState& s = rank0_shard;
  std::string partial = partial_dir(dir, s.step), final_dir = checkpoint_step_dir(dir, s.step);
  DPT_CHECK(fs::is_directory(partial),
            "finish_checkpoint: " << quote_path(partial)
                                  << " does not exist; every rank must call save_checkpoint_shard first");
  check_real_directory(partial);  // never seal (or clean) through a link
  Index ix{partial, s.world, s.step, s.psi, shard_size(s.psi, s.world), !s.exp_avg.empty(), s.layout, {}, s.meta};
  remove_leftovers(partial, ix.world);
  write_index_and_marker(ix);
  publish(partial, final_dir);
  sync_directory(dir);
  // Last: the pointer --resume follows. Until here it named the previous checkpoint.
  write_output_file(join(dir, "latest"), fs::path(final_dir).filename().string() + "\n");
}

ShardState load_checkpoint_shard(const std::string& dir, int rank, int world) {
  DPT_CHECK(world >= 1 && rank >= 0 && rank < world,
            "load_checkpoint_shard: rank " << rank << " of " << world << " ranks is not a rank");
  std::string at = find_checkpoint(dir);
  return with_fallback_hint(at, [&] {
    Index ix = read_index(at);
    int64_t size = shard_size(ix.psi, world);
    int64_t begin = std::min(ix.psi, rank * size), end = std::min(ix.psi, begin + size);  // my unpadded floats
    std::map<int, ShardFile> old;  // only the old shards that overlap [begin, end)
    for (int64_t k = begin / ix.shard; begin < end && k * ix.shard < end; ++k) old[int(k)] = read_shard(ix, int(k));
    auto gather = [&](std::vector<float> ShardFile::*part) {
      return gather_flat(begin, end, size, ix.shard,
                         [&](int k) -> const std::vector<float>& { return old.at(k).*part; });
    };
    ShardState out;
    out.rank = rank, out.world = world, out.step = ix.step, out.psi = ix.psi;
    out.layout = ix.layout, out.meta = ix.meta;
    out.params = gather(&ShardFile::params);
    if (ix.has_moments) out.exp_avg = gather(&ShardFile::exp_avg), out.exp_avg_sq = gather(&ShardFile::exp_avg_sq);
    return out;
  });
}

void consolidate_checkpoint(const std::string& dir, const std::string& out_path) {
  check_output_path("consolidate_checkpoint", out_path);  // before reading anything
  std::string clash = distinct_paths_problem({{"the output", out_path}}, {{"the checkpoint", dir}});
  DPT_CHECK(clash.empty(), "consolidate_checkpoint: " << clash);
  std::string at = find_checkpoint(dir);
  SafeTensorsFile weights = with_fallback_hint(at, [&] {
    Index ix = read_index(at);
    std::vector<ShardFile> shards;
    for (int k = 0; k < ix.world; ++k) shards.push_back(read_shard(ix, k));
    std::vector<float> flat =
        gather_flat(0, ix.psi, ix.psi, ix.shard, [&](int k) -> const std::vector<float>& { return shards[k].params; });
    SafeTensorsFile file;
    int64_t offset = 0;
    for (const auto& [name, shape] : ix.layout) {  // cut the flat vector back into (out, in) weights and biases
      SafeTensor t{DType::F32, shape, std::vector<uint8_t>(std::size_t(shape_numel(shape)) * sizeof(float))};
      std::memcpy(t.bytes.data(), flat.data() + offset, t.bytes.size());
      offset += shape_numel(shape);
      file.tensors[name] = std::move(t);
    }
    file.metadata = {{"format", "pt"}, {"producer", "dpt"}, {"step", std::to_string(ix.step)}};
    return file;
  });
  write_safetensors(out_path, weights);
}

}  // namespace dpt
