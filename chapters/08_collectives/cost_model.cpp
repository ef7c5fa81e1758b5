// cost_model.cpp — the two-tier link, the replay clock, and the formulas.
//
// The clock and the formulas share no code: the clock reads the messages an
// algorithm actually sent (watch_messages), the formulas count steps on
// paper. Where they disagree, one of the two is wrong about the algorithm.
#include "cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "ch08.h"
#include "dpt/check.h"

namespace dpt::ch08 {

namespace {
double latency_s(const LinkModel& link) { return link.latency_us * 1e-6; }       // seconds per message
double per_byte(const LinkModel& link) { return link.gbps > 0 ? 8.0 / (link.gbps * 1e9) : 0.0; }  // per byte
}  // namespace

double Cluster::seconds(int a, int b, double bytes) const {
  const LinkModel& link = same_node(a, b) ? intra : inter;
  return latency_s(link) + bytes * per_byte(link);
}

// ----------------------------------------------------------------------------
// the replay clock: a discrete-event simulation of the recorded calls

namespace {
// Where the other end of one message is: rank and index of its call there.
struct End {
  int rank = -1, call = -1;
};
}  // namespace

double replay(const Schedule& schedule, const Cluster& cluster, double bytes_per_float) {
  const int n = int(schedule.size());
  // Match the k-th send from s to d with the k-th receive at d from s (messages
  // between one pair arrive in the order sent).
  std::map<std::tuple<int, int, int>, int> sends, recvs;  // (src, dst, k) -> call index at the other end
  std::vector<std::vector<End>> send_peer(static_cast<std::size_t>(n)), recv_peer(static_cast<std::size_t>(n));
  std::map<std::pair<int, int>, int> sent_so_far, received_so_far;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < int(schedule[std::size_t(r)].size()); ++i) {
      const Message& m = schedule[std::size_t(r)][std::size_t(i)];
      if (m.dst >= 0) sends[{r, m.dst, sent_so_far[{r, m.dst}]++}] = i;
      if (m.src >= 0) recvs[{m.src, r, received_so_far[{m.src, r}]++}] = i;
    }
  for (int r = 0; r < n; ++r) {
    std::map<std::pair<int, int>, int> sent, received;
    for (const Message& m : schedule[std::size_t(r)]) {
      End to, from;
      if (m.dst >= 0) {
        auto it = recvs.find({r, m.dst, sent[{r, m.dst}]++});
        DPT_CHECK(it != recvs.end(), "replay: rank " << r << " sends to rank " << m.dst << " more often than it receives");
        to = {m.dst, it->second};
      }
      if (m.src >= 0) {
        auto it = sends.find({m.src, r, received[{m.src, r}]++});
        DPT_CHECK(it != sends.end(), "replay: rank " << r << " receives from rank " << m.src << " more often than it sends");
        from = {m.src, it->second};
      }
      send_peer[std::size_t(r)].push_back(to);
      recv_peer[std::size_t(r)].push_back(from);
    }
  }
  // begin[r][i]: when rank r reaches call i; next[r]: the call it is in.
  std::vector<std::vector<double>> begin(static_cast<std::size_t>(n));
  std::vector<int> next(static_cast<std::size_t>(n), 0);
  for (int r = 0; r < n; ++r) begin[std::size_t(r)].assign(schedule[std::size_t(r)].size() + 1, 0.0);
  auto reached = [&](const End& e) { return e.rank < 0 || next[std::size_t(e.rank)] >= e.call; };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      auto& mine = begin[std::size_t(r)];
      for (int& i = next[std::size_t(r)]; i < int(schedule[std::size_t(r)].size());) {
        End to = send_peer[std::size_t(r)][std::size_t(i)], from = recv_peer[std::size_t(r)][std::size_t(i)];
        if (!reached(to) || !reached(from)) break;  // the other end is not there yet
        const Message& m = schedule[std::size_t(r)][std::size_t(i)];
        double end = mine[std::size_t(i)];
        if (to.rank >= 0)
          end = std::max(end, std::max(mine[std::size_t(i)], begin[std::size_t(to.rank)][std::size_t(to.call)]) +
                                  cluster.seconds(r, to.rank, double(m.send_count) * bytes_per_float));
        if (from.rank >= 0)
          end = std::max(end, std::max(mine[std::size_t(i)], begin[std::size_t(from.rank)][std::size_t(from.call)]) +
                                  cluster.seconds(from.rank, r, double(m.recv_count) * bytes_per_float));
        mine[std::size_t(++i)] = end;
        progress = true;
      }
    }
  }
  double last = 0;
  for (int r = 0; r < n; ++r) {
    DPT_CHECK(next[std::size_t(r)] == int(schedule[std::size_t(r)].size()),
              "replay: rank " << r << " never completes call " << next[std::size_t(r)] << " (its peer never reaches it)");
    last = std::max(last, begin[std::size_t(r)].back());
  }
  return last;
}

// ----------------------------------------------------------------------------
// the formulas: steps on paper, each charged at its slowest pair's link

namespace {
using Pairs = std::vector<std::pair<int, int>>;

double step(const Cluster& c, const Pairs& pairs, double bytes) {
  double worst = 0;
  for (auto [a, b] : pairs) worst = std::max(worst, c.seconds(a, b, bytes));
  return worst;
}

double ring(const Cluster& c, double s) {
  const int n = c.ranks;
  Pairs edges;
  for (int r = 0; r < n; ++r) edges.push_back({r, (r + 1) % n});
  return n == 1 ? 0 : 2.0 * (n - 1) * step(c, edges, s / n);  // 2(n-1) steps of S/n
}

double recursive_doubling(const Cluster& c, double s) {
  const int n = c.ranks, p = power_of_two_below(n), rem = n - p;
  auto rank_of = [&](int new_rank) { return new_rank < rem ? 2 * new_rank + 1 : new_rank + rem; };
  Pairs fold;
  for (int i = 0; i < rem; ++i) fold.push_back({2 * i, 2 * i + 1});
  double t = rem > 0 ? 2 * step(c, fold, s) : 0;
  for (int d = 1; d < p; d *= 2) {  // log2 p steps of the whole vector
    Pairs pairs;
    for (int q = 0; q < p; ++q) pairs.push_back({rank_of(q), rank_of(q ^ d)});
    t += step(c, pairs, s);
  }
  return t;
}

// Halving-doubling from its cost on paper, not from a schedule (which partner
// comes when is a hole): 2 lg p steps sending (p-1)/p of S in each phase, plus
// the fold's two whole-vector messages when n > p. Every step is charged the
// slowest link the team of the first p ranks spans, and the fold the slowest
// of the world's: exact on one tier, an upper bound on two.
double halving_doubling(const Cluster& c, double s) {
  const int n = c.ranks, p = power_of_two_below(n);
  if (n == 1) return 0;
  const LinkModel& team = c.same_node(0, p - 1) ? c.intra : c.inter;  // the first p ranks
  double t = 2 * std::log2(double(p)) * latency_s(team) + 2.0 * (p - 1) / p * s * per_byte(team);
  return n > p ? t + 2 * c.seconds(0, n - 1, s) : t;  // the fold: the world's slowest link
}

double tree(const Cluster& c, double s) {
  double t = 0;
  for (int d = 1; d < c.ranks; d *= 2) {  // ceil(log2 n) levels, down and up
    Pairs pairs;
    for (int r = 0; r + d < c.ranks; r += 2 * d) pairs.push_back({r, r + d});
    t += 2 * step(c, pairs, s);
  }
  return t;
}

// Two-level from the page's table: 2(G-1) steps of S/G inside a node, then
// halving-doubling's cost on paper for S/G among K ranks, one per node.
double two_level(const Cluster& c, double s) {
  const int g = c.per_node(), k = c.nodes;
  double inside = 2.0 * (g - 1) * (latency_s(c.intra) + s / g * per_byte(c.intra));
  Cluster across{k, k, c.intra, c.inter};  // one rank per node: every pair crosses
  return inside + halving_doubling(across, s / g);
}
}  // namespace

const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names = {"ring", "recursive doubling", "halving-doubling", "binomial tree",
                                                 "two-level"};
  return names;
}

char algorithm_letter(const std::string& name) {
  if (name == "ring") return 'R';
  if (name == "recursive doubling") return 'D';
  if (name == "halving-doubling") return 'H';
  if (name == "binomial tree") return 'T';
  return '2';
}

std::string formula_text(const std::string& name) {
  if (name == "ring") return "2(n-1)a + 2(n-1)/n Sb";
  if (name == "recursive doubling") return "lg p (a + Sb)  [+ 2(a + Sb) fold]";
  if (name == "halving-doubling") return "2 lg p a + 2(p-1)/p Sb  [+ 2(a + Sb) fold]";
  if (name == "binomial tree") return "2 ceil(lg n) (a + Sb)";
  return "2(G-1)(a_in + S/G b_in) + H(K, S/G) on a_out, b_out";
}

double formula_seconds(const std::string& name, const Cluster& cluster, double bytes) {
  if (name == "ring") return ring(cluster, bytes);
  if (name == "recursive doubling") return recursive_doubling(cluster, bytes);
  if (name == "halving-doubling") return halving_doubling(cluster, bytes);
  if (name == "binomial tree") return tree(cluster, bytes);
  DPT_CHECK(name == "two-level", "formula_seconds: no algorithm '" << name << "'");
  return two_level(cluster, bytes);
}

}  // namespace dpt::ch08
