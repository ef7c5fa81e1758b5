// heal_probe.cpp — your heal judged alone, before the run (checks.h): four
// members of a private group (two behind, a source, one in step), each
// member's state afterwards judged by the contract's laws, so a wrong heal
// is named in the heal's words even where the run would only show it later
// as a replay that disagrees. The least bytes are judged by experiment, not
// by a formula: the same heal again with more of what a step recomputes,
// and with one member behind instead of two.
#include <algorithm>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "ch16.h"
#include "checks.h"
#include "dpt/check.h"
#include "dpt/quorum_group.h"

namespace dpt::ch16 {

namespace {

constexpr int kHealProbeSource = 1;
constexpr std::size_t kHealProbePsi = 5;

// Member m's state before the heal: 0 a new process, 1 the source, 2 in step
// with it (its own identity and timing), 3 a stale member. `grad_floats`:
// the length of a last gradient, where a member has one.
MemberState heal_probe_state(int m, std::size_t grad_floats) {
  MemberState s;
  const bool current = m == 1 || m == 2;
  s.replica.params = current ? std::vector<float>{0.5f, -1.25f, 2.0f, 0.75f, -0.125f}
                             : std::vector<float>{0.1f * float(m), 0.2f, -0.3f, 0.4f, 0.05f * float(m)};
  s.replica.momentum = current ? std::vector<float>{0.25f, 0.5f, -0.75f, 1.5f, -2.0f}
                               : std::vector<float>(kHealProbePsi, m == 0 ? 0.0f : 0.125f);
  s.committed = current ? 9 : (m == 0 ? 0 : 4);
  s.cursor = current ? 72 : (m == 0 ? 0 : 32);
  if (m != 0)
    for (std::size_t i = 0; i < grad_floats; ++i) s.grad.push_back(0.01f * float(m) + 0.02f * float(i % 7));
  s.world_rank = 40 + m;
  s.step_seconds = 0.001 * double(m + 1);
  return s;
}

// The next step, written out here: a gradient made of the samples at the
// member's place in the stream (elastic_rank.h), applied, one committed step more.
void heal_probe_step(MemberState& s) {
  const std::size_t psi = s.replica.params.size();
  s.grad.assign(psi, 0.0f);
  for (std::size_t i = 0; i < psi; ++i) s.grad[i] = 0.0625f * float(sample_at(s.cursor + int64_t(i), 64, 7) + 1);
  apply_momentum(s.replica, s.grad, 0.5f);
  s.committed += 1;
  s.cursor += int64_t(psi);
}

// Unchanged: every field of `a` as in `b`.
bool heal_probe_unchanged(const MemberState& a, const MemberState& b) {
  return a.replica.params == b.replica.params && a.replica.momentum == b.replica.momentum &&
         a.committed == b.committed && a.cursor == b.cursor && a.grad == b.grad && a.world_rank == b.world_rank &&
         a.step_seconds == b.step_seconds;
}

// The first law by behaviour: `healed` beside `source`, right after the heal
// and after each of three steps, as the run sees a member (its parameters,
// the committed steps it tells the lighthouse). Where the two first part, in
// words, with the questions it raises; "" when they never do.
std::string heal_probe_parted(MemberState healed, MemberState source) {
  if (healed.replica.params.size() != source.replica.params.size() ||
      healed.replica.momentum.size() != source.replica.momentum.size())
    return "its replica changed shape";
  for (int k = 0; k <= 3; ++k) {
    if (k > 0) heal_probe_step(healed), heal_probe_step(source);
    const bool params = healed.replica.params != source.replica.params;
    const bool committed = healed.committed != source.committed;
    if (!params && !committed) continue;
    std::string d = k == 0 ? "right after the heal" : str("at step ", k, ", equal before it");
    if (committed)
      d += str(", it tells the lighthouse ", healed.committed, " committed steps, the source ", source.committed);
    if (params && k == 0) d += ", its parameters are not the source's";
    if (params && k > 0)
      d += ", the same parameters took another update than the source's: did it draw other samples than the "
           "source? did its optimizer start from other buffers?";
    return d;
  }
  return "";
}

struct HealProbeRun {
  std::vector<MemberState> before, after;
  std::vector<std::string> failed;
  std::vector<int64_t> wire, collective;  // bytes that reached each member: point to point, through a collective
};

HealProbeRun heal_probe_run(const std::vector<int>& behind, std::size_t grad_floats) {
  const int n = 4;
  auto group = make_threads_group(n, 1.0);
  HealProbeRun r;
  for (int m = 0; m < n; ++m) r.before.push_back(heal_probe_state(m, grad_floats));
  r.after = r.before;
  r.failed.resize(n);
  std::vector<std::exception_ptr> unwritten(n);
  std::vector<std::thread> members;
  for (int m = 0; m < n; ++m)
    members.emplace_back([&, m] {
      try {
        heal(*group[std::size_t(m)], kHealProbeSource, behind, r.after[std::size_t(m)]);  // your hole
      } catch (const NotImplemented&) {
        unwritten[std::size_t(m)] = std::current_exception();
      } catch (const std::exception& e) {
        r.failed[std::size_t(m)] = e.what();
      }
    });
  for (std::thread& t : members) t.join();
  for (const std::exception_ptr& e : unwritten)
    if (e) std::rethrow_exception(e);
  for (int m = 0; m < n; ++m) {
    r.wire.push_back(bytes_reaching(group[std::size_t(m)]->traffic(), m));
    r.collective.push_back(collective_payload(group[std::size_t(m)]->traffic(), m));
  }
  return r;
}

}  // namespace

int64_t bytes_reaching(const TrafficLog& log, int member) {
  int64_t sum = 0;
  for (int src = 0; src < log.world(); ++src) sum += log.bytes(src, member);
  return sum;
}

int64_t collective_payload(const TrafficLog& log, int member) {
  int64_t sum = 0;
  for (const char* name : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier"})
    sum += log.collective_bytes(name, member);
  return sum;
}

int64_t heal_bytes_alone(int64_t psi) {
  auto group = make_threads_group(2, 1.0);
  std::vector<MemberState> s(2);
  for (int m = 0; m < 2; ++m) {
    s[std::size_t(m)].replica.params.assign(std::size_t(psi), 0.5f * float(1 - m));
    s[std::size_t(m)].replica.momentum.assign(std::size_t(psi), 0.25f * float(1 - m));
    s[std::size_t(m)].committed = 3 * (1 - m), s[std::size_t(m)].cursor = 8 * (1 - m);
    s[std::size_t(m)].world_rank = m;
  }
  s[0].grad.assign(std::size_t(psi), 0.125f);  // the member behind is a new process
  bool failed = false;
  std::thread behind([&] {
    try {
      heal(*group[1], 0, {1}, s[1]);
    } catch (const std::exception&) {
      failed = true;
    }
  });
  try {
    heal(*group[0], 0, {1}, s[0]);
  } catch (const std::exception&) {
    revoke(*group[0], "the heal failed on its source");
  }
  behind.join();
  if (failed) return -1;
  return bytes_reaching(group[1]->traffic(), 1) + collective_payload(group[1]->traffic(), 1);
}

void add_heal_probe_verdicts(Verdicts& v) {
  const std::vector<int> two_behind = {0, 3};
  const HealProbeRun r = heal_probe_run(two_behind, kHealProbePsi);
  std::string same_seen, kept_seen, bytes_seen;
  for (int m = 0; m < 4; ++m) {
    const std::size_t i = std::size_t(m);
    const bool is_behind = std::count(two_behind.begin(), two_behind.end(), m) > 0;
    const std::string who = str("member ", m, m == kHealProbeSource ? " (the source)" : is_behind ? " (behind)" : " (in step)");
    if (!r.failed[i].empty()) {
      if (same_seen.empty()) same_seen = who + ": " + r.failed[i].substr(0, 160);
      continue;
    }
    if ((r.after[i].world_rank != r.before[i].world_rank || r.after[i].step_seconds != r.before[i].step_seconds) &&
        same_seen.empty())
      same_seen = who + " came out as world rank " + std::to_string(r.after[i].world_rank) + " (was " +
                  std::to_string(r.before[i].world_rank) + "), or with another step time: a member keeps what is its own";
    if (!is_behind) {
      if (r.collective[i] > 0 && kept_seen.empty())
        kept_seen = str(who, " took part in a collective of ", r.collective[i], " B: a collective reaches every member "
                        "of the group, in step or not");
      if (!heal_probe_unchanged(r.after[i], r.before[i]) && kept_seen.empty()) kept_seen = who + " changed";
      if (r.wire[i] > 0 && kept_seen.empty()) kept_seen = str(who, " was sent ", r.wire[i], " B");
      continue;
    }
    const std::string parted = heal_probe_parted(r.after[i], r.before[kHealProbeSource]);
    if (!parted.empty() && same_seen.empty()) same_seen = who + ", healed and stepped beside the source, parted from it " + parted;
    if (r.wire[i] + r.collective[i] == 0 && bytes_seen.empty()) bytes_seen = who + " received nothing";
  }
  // The least, by experiment: what a step recomputes grows tenfold; one member behind instead of two.
  const HealProbeRun grown = heal_probe_run(two_behind, 10 * kHealProbePsi);
  const HealProbeRun one = heal_probe_run({3}, kHealProbePsi);
  const int64_t b0 = r.wire[0] + r.collective[0], b3 = r.wire[3] + r.collective[3];
  const int64_t g3 = grown.wire[3] + grown.collective[3], o3 = one.wire[3] + one.collective[3];
  if (bytes_seen.empty() && g3 != b3)
    bytes_seen = str("member 3 (behind) received ", b3, " B, and ", g3, " B when only the members' last gradient held ",
                     10 * kHealProbePsi, " floats, not ", kHealProbePsi, ", all else alike: what did it receive that grows "
                     "with the last gradient, and does its next step read it?");
  if (bytes_seen.empty() && b0 != b3)
    bytes_seen = str("the two members behind received ", b0, " B and ", b3, " B: each needs the same");
  if (bytes_seen.empty() && o3 != b3)
    bytes_seen = str("member 3 (behind) received ", b3, " B with two members behind, ", o3, " B alone: each member "
                     "behind needs its own copy once, whoever else heals");
  v.holds("heal, alone: each member behind goes on exactly as the source would, and keeps what is its own",
          same_seen.empty(), same_seen.empty() ? "healed, three steps each: bit for bit the source's" : same_seen);
  v.holds("heal, alone: the source and a member in step unchanged, nothing reaches them", kept_seen.empty(),
          kept_seen.empty() ? "unchanged, 0 B each" : kept_seen);
  v.holds("heal, alone: no byte to a member behind that it can do without", bytes_seen.empty(),
          bytes_seen.empty() ? str(b0, " B and ", b3, " B; the same with a tenfold last gradient, and with one behind")
                             : bytes_seen);
}

}  // namespace dpt::ch16
