// traffic_log.cpp — the table of who sent how many bytes to whom, per step,
// shared by every rank of a threads world (one per process under MPI, merged
// by Communicator::gather_traffic). Left out: timings (trace.cpp).
#include "dpt/comm/traffic_log.h"

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "dpt/check.h"
#include "dpt/device.h"

namespace dpt {

namespace {
const char* const kCollectiveNames[] = {"all_reduce", "reduce_scatter", "all_gather",
                                        "broadcast", "barrier"};
constexpr int kCollectives = 5;
constexpr int kRecordWords = 6;  // {kind, step, src|rank, dst, bytes, messages|calls}

int collective_index(const std::string& name) {
  for (int i = 0; i < kCollectives; ++i)
    if (name == kCollectiveNames[i]) return i;
  DPT_FAIL("unknown collective '" << name
                                  << "': expected all_reduce, reduce_scatter, all_gather, "
                                     "broadcast or barrier");
}
}  // namespace

struct TrafficLog::Table {
  explicit Table(int world_size) : world(world_size), step(new std::atomic<int64_t>[world_size]) {
    for (int r = 0; r < world; ++r) step[r] = 0;
  }
  struct Cell {
    int64_t bytes = 0;
    int64_t count = 0;  // messages or calls
  };
  const int world;
  std::unique_ptr<std::atomic<int64_t>[]> step;  // per rank; read by its progress thread
  mutable std::mutex mutex;
  using Key = std::tuple<int64_t, int, int>;           // (step, src, dst)
  std::map<Key, Cell> sends;
  std::map<std::pair<int, int>, Cell> collectives;      // (collective, rank)

  // Sum of one field (bytes or count) over the sends whose key passes `keep`.
  template <class Keep>
  int64_t sum(int64_t Cell::*field, Keep&& keep) const {
    std::lock_guard<std::mutex> lock(mutex);
    int64_t total = 0;
    for (const auto& [key, cell] : sends)
      if (keep(key)) total += cell.*field;
    return total;
  }
  // Sum of one field over collective `index`'s calls by `rank` (-1: all ranks).
  int64_t collective_sum(int64_t Cell::*field, int index, int rank) const {
    std::lock_guard<std::mutex> lock(mutex);
    int64_t total = 0;
    for (const auto& [key, cell] : collectives)
      if (key.first == index && (rank < 0 || key.second == rank)) total += cell.*field;
    return total;
  }
};

TrafficLog::TrafficLog(int world) : table_(std::make_shared<Table>(world)) {
  DPT_CHECK(world >= 1, "a traffic log needs at least one rank, got " << world);
}

TrafficLog TrafficLog::view(int rank) const {
  DPT_CHECK(rank >= 0 && rank < world(), "rank " << rank << " is outside 0.." << world() - 1);
  return TrafficLog(table_, rank);
}

int TrafficLog::world() const { return table_->world; }

void TrafficLog::set_step(int64_t step) {
  DPT_CHECK(rank_ >= 0, "set_step on a standalone traffic log: use a communicator's traffic()");
  DPT_CHECK(step >= 0, "steps are >= 0, got " << step);
  table_->step[rank_] = step;
}

void TrafficLog::begin_step() { set_step(step() + 1); }

int64_t TrafficLog::step() const { return rank_ >= 0 ? table_->step[rank_].load() : 0; }

void TrafficLog::record_send(int dst, int64_t bytes) {
  DPT_CHECK(rank_ >= 0, "record_send on a standalone traffic log");
  std::lock_guard<std::mutex> lock(table_->mutex);
  Table::Cell& cell = table_->sends[{table_->step[rank_].load(), rank_, dst}];
  cell.bytes += bytes;
  cell.count += 1;
}

void TrafficLog::record_collective(const std::string& name, int64_t bytes) {
  DPT_CHECK(rank_ >= 0, "record_collective on a standalone traffic log");
  int index = collective_index(name);
  std::lock_guard<std::mutex> lock(table_->mutex);
  Table::Cell& cell = table_->collectives[{index, rank_}];
  cell.bytes += bytes;
  cell.count += 1;
}

int64_t TrafficLog::bytes(int src, int dst) const {
  return table_->sum(&Table::Cell::bytes, [&](const Table::Key& k) { return std::get<1>(k) == src && std::get<2>(k) == dst; });
}

int64_t TrafficLog::bytes(int src, int dst, int64_t step) const {
  std::lock_guard<std::mutex> lock(table_->mutex);
  auto it = table_->sends.find({step, src, dst});
  return it == table_->sends.end() ? 0 : it->second.bytes;
}

int64_t TrafficLog::messages(int src, int dst) const {
  return table_->sum(&Table::Cell::count, [&](const Table::Key& k) { return std::get<1>(k) == src && std::get<2>(k) == dst; });
}

int64_t TrafficLog::bytes_sent(int rank) const {
  return table_->sum(&Table::Cell::bytes, [&](const Table::Key& k) { return std::get<1>(k) == rank; });
}

int64_t TrafficLog::bytes_received(int rank) const {
  return table_->sum(&Table::Cell::bytes, [&](const Table::Key& k) { return std::get<2>(k) == rank; });
}

int64_t TrafficLog::step_bytes(int64_t step) const {
  return table_->sum(&Table::Cell::bytes, [&](const Table::Key& k) { return std::get<0>(k) == step; });
}

int64_t TrafficLog::total_bytes() const {
  return table_->sum(&Table::Cell::bytes, [](const Table::Key&) { return true; });
}

std::vector<std::vector<int64_t>> TrafficLog::matrix() const {
  std::vector<std::vector<int64_t>> m(world(), std::vector<int64_t>(world(), 0));
  std::lock_guard<std::mutex> lock(table_->mutex);
  for (const auto& [key, cell] : table_->sends) m[std::get<1>(key)][std::get<2>(key)] += cell.bytes;
  return m;
}

std::vector<int64_t> TrafficLog::steps() const {
  std::lock_guard<std::mutex> lock(table_->mutex);
  std::vector<int64_t> out;
  for (const auto& entry : table_->sends)  // keys sort by step first
    if (out.empty() || out.back() != std::get<0>(entry.first)) out.push_back(std::get<0>(entry.first));
  return out;
}

int64_t TrafficLog::collective_bytes(const std::string& name, int rank) const {
  return table_->collective_sum(&Table::Cell::bytes, collective_index(name), rank);
}

int64_t TrafficLog::collective_calls(const std::string& name, int rank) const {
  return table_->collective_sum(&Table::Cell::count, collective_index(name), rank);
}

void TrafficLog::clear() {
  std::lock_guard<std::mutex> lock(table_->mutex);
  table_->sends.clear();
  table_->collectives.clear();
}

std::string TrafficLog::to_string() const {
  auto m = matrix();
  std::ostringstream out;
  char cell[32];
  out << "bytes sent (row: from rank, column: to rank)\n" << "        ";
  for (int dst = 0; dst < world(); ++dst) {
    std::snprintf(cell, sizeof cell, "%12s", ("to " + std::to_string(dst)).c_str());
    out << cell;
  }
  for (int src = 0; src < world(); ++src) {
    std::snprintf(cell, sizeof cell, "\nfrom %-3d", src);
    out << cell;
    for (int dst = 0; dst < world(); ++dst) {
      std::string text = m[src][dst] ? format_bytes(double(m[src][dst])) : "-";
      std::snprintf(cell, sizeof cell, "%12s", text.c_str());
      out << cell;
    }
  }
  return out.str() + "\n";
}

std::vector<int64_t> TrafficLog::own_records() const {
  std::lock_guard<std::mutex> lock(table_->mutex);
  std::vector<int64_t> out;
  for (const auto& [key, cell] : table_->sends) {
    auto [step, src, dst] = key;
    if (src == rank_) out.insert(out.end(), {0, step, src, dst, cell.bytes, cell.count});
  }
  for (const auto& [key, cell] : table_->collectives)
    if (key.second == rank_)
      out.insert(out.end(), {1 + key.first, 0, key.second, -1, cell.bytes, cell.count});
  return out;
}

void TrafficLog::merge_records(const std::vector<int64_t>& records) {
  DPT_CHECK(records.size() % kRecordWords == 0,
            "traffic records come in groups of " << kRecordWords << ", got " << records.size());
  std::lock_guard<std::mutex> lock(table_->mutex);
  for (std::size_t i = 0; i < records.size(); i += kRecordWords) {
    const int64_t* r = &records[i];
    Table::Cell& cell = r[0] == 0 ? table_->sends[{r[1], int(r[2]), int(r[3])}]
                                  : table_->collectives[{int(r[0] - 1), int(r[2])}];
    cell.bytes += r[4];
    cell.count += r[5];
  }
}

}  // namespace dpt
