// restart_checkpoint.cpp — chapter 16's sealed state under mpirun
// (restart_checkpoint.h): the replica through the core's sharded
// checkpoints, the run's record as one more file sealed with them.
#include "restart_checkpoint.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "dpt/checkpoint.h"
#include "dpt/check.h"
#include "dpt/output_file.h"
#include "dpt/sharded_checkpoint.h"

namespace dpt::ch16 {

namespace {

constexpr const char* kLedgerFile = "ledger.safetensors";

// The flags a resumed run must share with the run that sealed: (flag, value).
std::vector<std::pair<std::string, std::string>> restart_flag_values(const Options& o, const std::string& keep) {
  std::ostringstream lr;
  lr.precision(9);
  lr << o.lr;
  return {{"--seed", std::to_string(o.seed)}, {"--model", o.model},   {"--data", o.data},
          {"--samples", std::to_string(o.samples)}, {"--batch", std::to_string(o.batch)},
          {"--lr", lr.str()},                   {"--keep", keep}};
}

// [parameters | momentum] as a layout of 2Ψ floats: each parameter, then its momentum buffer.
std::vector<std::pair<std::string, Shape>> restart_layout(const Options& o) {
  const MLP model = build_model(o, Device::host());
  std::vector<std::pair<std::string, Shape>> layout;
  for (const NamedTensor& p : model.named_parameters()) layout.push_back({p.name, p.tensor.shape()});
  for (const NamedTensor& p : model.named_parameters()) layout.push_back({"momentum." + p.name, p.tensor.shape()});
  return layout;
}

SafeTensor int_tensor(const std::vector<int64_t>& v) { return to_safetensor(v, Shape{int64_t(v.size())}); }

// Ragged rows as (offsets, flat): row i is flat[offsets[i], offsets[i + 1]).
template <typename Row>
void put_rows(SafeTensorsFile& file, const std::string& name, const std::vector<Row>& rows) {
  std::vector<int64_t> offsets{0}, flat;
  for (const Row& row : rows) {
    for (auto x : row) flat.push_back(int64_t(x));
    offsets.push_back(int64_t(flat.size()));
  }
  file.tensors[name + "_offsets"] = int_tensor(offsets);
  file.tensors[name] = int_tensor(flat);
}

std::vector<int64_t> row_of(const SafeTensorsFile& file, const std::string& name, std::size_t i) {
  const std::vector<int64_t> offsets = file.tensors.at(name + "_offsets").ints(), flat = file.tensors.at(name).ints();
  DPT_CHECK(i + 1 < offsets.size() && offsets[i] <= offsets[i + 1] && offsets[i + 1] <= int64_t(flat.size()),
            kLedgerFile << ": " << name << "_offsets does not cut " << name << " into rows (row " << i << ")");
  return {flat.begin() + offsets[i], flat.begin() + offsets[i + 1]};
}

SafeTensorsFile record_file(const RestartState& st) {
  SafeTensorsFile file;
  std::vector<int64_t> slot, id, members;
  std::vector<float> lr;
  std::vector<std::vector<int64_t>> samples;
  std::vector<std::vector<int>> ranks;
  for (const LedgerEntry& e : st.ledger)
    slot.push_back(e.slot), id.push_back(e.quorum_id), members.push_back(e.members), lr.push_back(e.lr),
        samples.push_back(e.samples), ranks.push_back(e.ranks);
  file.tensors["slot"] = int_tensor(slot);
  file.tensors["quorum_id"] = int_tensor(id);
  file.tensors["members"] = int_tensor(members);
  file.tensors["lr"] = SafeTensor{DType::F32, Shape{int64_t(lr.size())}, std::vector<uint8_t>(lr.size() * 4)};
  if (!lr.empty()) std::memcpy(file.tensors["lr"].bytes.data(), lr.data(), lr.size() * 4);
  put_rows(file, "samples", samples);
  put_rows(file, "ranks", ranks);
  std::vector<int64_t> m_slot, m_to, m_undone, m_tie;
  std::vector<std::vector<int>> named;
  for (const MismatchEntry& m : st.mismatches)
    m_slot.push_back(m.slot), m_to.push_back(m.rolled_back_to), m_undone.push_back(m.steps_undone),
        m_tie.push_back(m.tie), named.push_back(m.named);
  file.tensors["mismatch_slot"] = int_tensor(m_slot);
  file.tensors["mismatch_rolled_back_to"] = int_tensor(m_to);
  file.tensors["mismatch_undone"] = int_tensor(m_undone);
  file.tensors["mismatch_tie"] = int_tensor(m_tie);
  put_rows(file, "named", named);
  return file;
}

void read_record(const SafeTensorsFile& file, RestartState& st) {
  const std::vector<int64_t> slot = file.tensors.at("slot").ints(), id = file.tensors.at("quorum_id").ints(),
                             members = file.tensors.at("members").ints();
  const std::vector<float> lr = file.tensors.at("lr").floats();
  DPT_CHECK(id.size() == slot.size() && members.size() == slot.size() && lr.size() == slot.size(),
            kLedgerFile << ": the ledger's columns differ in length");
  for (std::size_t i = 0; i < slot.size(); ++i) {
    const std::vector<int64_t> ranks = row_of(file, "ranks", i);
    st.ledger.push_back(LedgerEntry{slot[i], id[i], int(members[i]), lr[i], row_of(file, "samples", i),
                                    std::vector<int>(ranks.begin(), ranks.end())});
  }
  const std::vector<int64_t> m_slot = file.tensors.at("mismatch_slot").ints(),
                             m_to = file.tensors.at("mismatch_rolled_back_to").ints(),
                             m_undone = file.tensors.at("mismatch_undone").ints(),
                             m_tie = file.tensors.at("mismatch_tie").ints();
  for (std::size_t i = 0; i < m_slot.size() && i < m_to.size() && i < m_undone.size() && i < m_tie.size(); ++i) {
    const std::vector<int64_t> named = row_of(file, "named", i);
    st.mismatches.push_back({m_slot[i], std::vector<int>(named.begin(), named.end()), m_to[i], m_undone[i], m_tie[i] != 0});
  }
}

uint32_t file_crc32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return crc32(bytes.data(), bytes.size());
}

std::string members_text(const std::vector<int>& members) {
  std::string text;
  for (int r : members) text += (text.empty() ? "" : ",") + std::to_string(r);
  return text;
}

}  // namespace

void save_restart_checkpoint(Context& ctx, const std::string& dir, const RestartState& st, const Options& o,
                             const std::string& keep) {
  const int64_t psi = int64_t(st.params.size());
  ShardState shard;
  shard.rank = ctx.rank, shard.world = ctx.world, shard.step = st.slot, shard.psi = 2 * psi;
  shard.layout = restart_layout(o);
  const int64_t size = shard_size(2 * psi, ctx.world);
  for (int64_t i = ctx.rank * size; i < (ctx.rank + 1) * size; ++i)  // this rank's cut of [params | momentum], 0 past 2Ψ
    shard.params.push_back(i < psi ? st.params[std::size_t(i)] : i < 2 * psi ? st.momentum[std::size_t(i - psi)] : 0.0f);
  for (const auto& [flag, value] : restart_flag_values(o, keep)) shard.meta[flag] = value;
  shard.meta["committed"] = std::to_string(st.committed);
  shard.meta["cursor"] = std::to_string(st.cursor);
  shard.meta["quorum_id"] = std::to_string(st.quorum.id);
  shard.meta["quorum_members"] = members_text(st.quorum.members);
  shard.meta["first_world"] = std::to_string(st.first_world);
  shard.meta["checks"] = std::to_string(st.checks);
  shard.meta["batch_kept_by"] = "program";  // scripts/dptrun: relaunch with --batch as it is
  save_checkpoint_shard(dir, shard);
  ctx.comm.barrier();  // every shard on disk before rank 0 seals
  if (ctx.is_root()) {
    // The step's .partial directory (sharded_checkpoint.h's layout): sealed, and renamed, with the shards.
    const std::string ledger = checkpoint_step_dir(dir, st.slot) + ".partial/" + kLedgerFile;
    {
      PublishNow now;  // on disk before the seal, as the shards are (output_file.h)
      write_safetensors(ledger, record_file(st));
    }
    shard.meta["ledger_crc32"] = std::to_string(file_crc32(ledger));
    finish_checkpoint(dir, shard);
  }
  ctx.comm.barrier();  // nobody goes on (or dies) before the seal
}

RestartState load_restart_checkpoint(const std::string& dir, const Options& o, const std::string& keep) {
  const std::string path = find_checkpoint(dir);
  const ShardState whole = load_checkpoint_shard(path, 0, 1);
  for (const auto& [flag, value] : restart_flag_values(o, keep)) {
    const auto saved = whole.meta.find(flag);
    DPT_CHECK(saved != whole.meta.end() && saved->second == value,
              "--resume " << path << ": written by a run with " << flag << " "
                          << (saved == whole.meta.end() ? std::string("(none)") : saved->second) << ", this one has "
                          << flag << " " << value << "; a resumed run keeps the run's flags");
  }
  const int64_t psi = whole.psi / 2;
  RestartState st;
  st.params.assign(whole.params.begin(), whole.params.begin() + psi);
  st.momentum.assign(whole.params.begin() + psi, whole.params.begin() + 2 * psi);
  st.slot = whole.step;
  try {
    st.committed = std::stoll(whole.meta.at("committed"));
    st.cursor = std::stoll(whole.meta.at("cursor"));
    st.quorum.id = std::stoll(whole.meta.at("quorum_id"));
    std::stringstream members(whole.meta.at("quorum_members"));
    for (std::string r; std::getline(members, r, ',');) st.quorum.members.push_back(std::stoi(r));
    st.first_world = std::stoi(whole.meta.at("first_world"));
    st.checks = std::stoll(whole.meta.at("checks"));
    const std::string ledger = path + "/" + kLedgerFile;
    DPT_CHECK(std::to_string(file_crc32(ledger)) == whole.meta.at("ledger_crc32"),
              ledger << ": its CRC-32 is not the one index.json sealed: the ledger was changed or truncated");
    read_record(read_safetensors(ledger), st);
  } catch (const std::out_of_range&) {
    DPT_FAIL("--resume " << path << ": index.json lacks chapter 16's run state (committed, cursor, quorum, ledger): "
                            "not a checkpoint of ch16_fault_tolerance under mpirun");
  } catch (const std::invalid_argument&) {
    DPT_FAIL("--resume " << path << ": index.json's chapter 16 run state is not made of numbers");
  }
  st.quorum.step = st.committed;
  return st;
}

}  // namespace dpt::ch16
