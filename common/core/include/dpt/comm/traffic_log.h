/// @file traffic_log.h
/// @brief `TrafficLog`: who sent how many bytes to whom, per step — the
/// numbers a chapter checks its algorithm's traffic against (a ring sends only
/// to its right neighbour, 2(n-1)/n * S bytes per rank).
///
///     ctx.comm.traffic().begin_step();                    // later sends count as the next step
///     int64_t sent = ctx.comm.traffic().bytes(ctx.rank, right);
///     dpt::TrafficLog all = ctx.comm.gather_traffic();    // every rank's rows (MPI too)
///     std::cout << all.to_string();                       // the byte matrix
///
/// Left out: wire bytes of library collectives (they depend on the algorithm:
/// only their payload is logged), timings (see trace.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dpt {

/// Who sent how many bytes to whom, per step. Point-to-point messages are
/// recorded per (src, dst) pair at the sender, under the sender's current step;
/// library collectives are recorded apart, per collective name ("all_reduce",
/// "reduce_scatter", "all_gather", "broadcast", "barrier") and rank, as the
/// payload bytes each rank passed in (their wire bytes depend on the algorithm).
///
/// A rank's communicator hands out a handle bound to that rank. Threads ranks
/// share one table (every query sees every rank's sends); an MPI process sees
/// only its own sends until `Communicator::gather_traffic()` collects them all.
/// Thread-safe.
class TrafficLog {
 public:
  /// An empty standalone table for `world` ranks (records as no rank).
  explicit TrafficLog(int world = 1);
  /// A handle onto the same table that records as `rank` (0 <= rank < world()).
  TrafficLog view(int rank) const;

  /// Number of ranks the table has rows for.
  int world() const;
  /// The rank this handle records as (-1 for a standalone table).
  int rank() const { return rank_; }

  // ---- steps: set by the rank's own code, e.g. once per training step ----
  /// Records this rank's later sends under `step` (>= 0). Per rank.
  void set_step(int64_t step);
  /// set_step(step() + 1).
  void begin_step();
  /// This rank's current step (0 at the start).
  int64_t step() const;

  // ---- recording (the communicator does this; chapters never need to) ----
  /// One message of `bytes` from this rank to `dst`.
  void record_send(int dst, int64_t bytes);
  /// One call of library collective `name` by this rank with `bytes` of payload.
  void record_collective(const std::string& name, int64_t bytes);

  // ---- queries (totals over all steps unless a step is given) ----
  /// Bytes `src` sent to `dst`.
  int64_t bytes(int src, int dst) const;
  /// Bytes `src` sent to `dst` during `step`.
  int64_t bytes(int src, int dst, int64_t step) const;
  /// Messages `src` sent to `dst`.
  int64_t messages(int src, int dst) const;
  /// Bytes `rank` sent to anyone.
  int64_t bytes_sent(int rank) const;
  /// Bytes anyone sent to `rank`.
  int64_t bytes_received(int rank) const;
  /// Bytes of all point-to-point messages of `step`.
  int64_t step_bytes(int64_t step) const;
  /// Bytes of all point-to-point messages.
  int64_t total_bytes() const;
  /// matrix()[src][dst] = bytes; world() x world().
  std::vector<std::vector<int64_t>> matrix() const;
  /// The steps that have point-to-point traffic, ascending.
  std::vector<int64_t> steps() const;
  /// Payload bytes passed to collective `name` by `rank` (-1: all ranks).
  int64_t collective_bytes(const std::string& name, int rank = -1) const;
  /// Calls of collective `name` by `rank` (-1: summed over ranks).
  int64_t collective_calls(const std::string& name, int rank = -1) const;
  /// Forgets everything (for every rank sharing the table); steps are kept.
  void clear();
  /// The byte matrix as a small text table (rows: src, columns: dst).
  std::string to_string() const;

  // ---- plumbing for gather_traffic() ----
  /// This handle's own records (sends by rank(), collective calls by rank())
  /// as flat int64 records.
  std::vector<int64_t> own_records() const;
  /// Adds records made by own_records() (of any rank) to this table.
  void merge_records(const std::vector<int64_t>& records);

 private:
  struct Table;
  TrafficLog(std::shared_ptr<Table> table, int rank) : table_(std::move(table)), rank_(rank) {}
  std::shared_ptr<Table> table_;
  int rank_ = -1;
};

}  // namespace dpt
