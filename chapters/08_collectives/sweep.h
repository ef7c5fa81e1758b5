// sweep.h — what chapter 08's lecture calls to run an algorithm by name, to
// record the messages it sends, and to sweep sizes and world sizes through
// the clock and the formulas (the crossover table, the tuner, the plot).
#pragma once

#include <string>
#include <vector>

#include "cost_model.h"
#include "dpt/comm.h"

namespace dpt::ch08 {

/// Runs all-reduce `name` (algorithm_names()) on every rank of `comm`, on
/// `nodes` nodes where the algorithm cares (two-level).
void run_algorithm(const std::string& name, Communicator& comm, float* data, int64_t count, int nodes);

/// Floats per rank of a recorded run: with 16·n floats every block of every
/// algorithm divides evenly, so each message is an exact fraction of S and
/// the schedule scales to any S.
constexpr int64_t kRecordedFloatsPerRank = 16;

/// Runs `name` on a fresh threads world of `ranks` ranks with 16·ranks floats
/// each and returns every rank's calls (a private world: also inside an
/// mpirun process). Throws NotImplemented for a hole not written yet.
Schedule record_schedule(const std::string& name, int ranks, int nodes);

/// S from 4 B to 256 MiB by factors of 4.
std::vector<double> sweep_sizes();

/// The clock's seconds for a recorded schedule at `bytes`.
double clock_seconds(const Schedule& schedule, const Cluster& cluster, double bytes);

/// The tuner: the index in `names` (not empty) of the algorithm whose
/// formula is smallest for `bytes` on `cluster`, as NCCL's tuner picks from
/// its model; the first of equals.
std::size_t tuner_pick(const std::vector<std::string>& names, const Cluster& cluster, double bytes);

/// The crossover sweep: worlds n = K, 2K, … up to max_ranks (K = cluster.nodes)
/// by sweep_sizes(); per cell the clock's fastest algorithm, and the tuner's
/// pick (the smallest formula).
struct Crossover {
  std::vector<int> worlds;    ///< the columns: numbers of ranks
  std::vector<double> sizes;  ///< the rows: bytes per all-reduce
  std::vector<std::vector<std::string>> cells;  ///< [size][world]: the fastest's letter; lower case: the tuner missed it
  int hits = 0;   ///< cells where the tuner picked the clock's fastest
  int close = 0;  ///< cells where its pick was within 1% of the fastest
  int total = 0;  ///< cells
  std::vector<std::vector<double>> plot_seconds;  ///< [algorithm][size]: the clock at the largest world
};
/// Records every algorithm of `names` at each world and replays it. `cluster`
/// gives the links and nodes (its ranks field is ignored).
Crossover sweep_crossover(const std::vector<std::string>& names, const Cluster& cluster, int max_ranks);

/// Writes an SVG line plot: seconds against bytes, log-log, one line per
/// algorithm. `seconds[a][i]` is algorithm names[a] at sizes[i] (NaN: none).
void write_plot(const std::string& path, const std::string& title, const std::vector<std::string>& names,
                const std::vector<double>& sizes, const std::vector<std::vector<double>>& seconds);

}  // namespace dpt::ch08
