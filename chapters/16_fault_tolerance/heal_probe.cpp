// heal_probe.cpp — your heal judged alone, before the run (checks.h): four
// members of a private group (two behind, a source, one in step), each
// member's state afterwards judged by the contract's laws, so a wrong heal
// is named in the heal's words even where the run would only show it later
// as a replay that disagrees.
#include <algorithm>
#include <cstring>
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
const std::vector<int> kHealProbeBehind = {0, 3};  // member 2 is in step with the source

// Member m's state before the heal: 0 a new process, 1 the source, 2 in
// step with it (its own identity and timing), 3 a stale replica.
MemberState heal_probe_state(int m) {
  MemberState s;
  const bool current = m == 1 || m == 2;
  s.replica.params = current ? std::vector<float>{0.5f, -1.25f, 2.0f, 0.75f, -0.125f}
                             : std::vector<float>{0.1f * float(m), 0.2f, -0.3f, 0.4f, 0.05f * float(m)};
  s.replica.momentum = current ? std::vector<float>{0.25f, 0.5f, -0.75f, 1.5f, -2.0f}
                               : std::vector<float>(5, m == 0 ? 0.0f : 0.125f);
  s.committed = current ? 9 : (m == 0 ? 0 : 4);
  s.cursor = current ? 72 : (m == 0 ? 0 : 32);
  if (m != 0) s.grad = {0.01f * float(m), 0.02f, 0.03f, -0.04f, 0.05f};
  s.world_rank = 40 + m;
  s.step_seconds = 0.001 * double(m + 1);
  return s;
}

// The next step, written out here: its samples from the cursor (the stream of
// elastic_rank.h), momentum SGD on a gradient made of them, one committed step more.
void heal_probe_step(MemberState& s) {
  const std::size_t psi = s.replica.params.size();
  for (std::size_t i = 0; i < psi; ++i) {
    const float g = 0.0625f * float(sample_at(s.cursor + int64_t(i), 64, 7) + 1);
    s.replica.momentum[i] = 0.9f * s.replica.momentum[i] + g;
    s.replica.params[i] -= 0.5f * s.replica.momentum[i];
  }
  s.committed += 1;
  s.cursor += int64_t(psi);
}

bool heal_probe_same(const MemberState& a, const MemberState& b) {
  return a.replica.params == b.replica.params && a.replica.momentum == b.replica.momentum &&
         a.committed == b.committed && a.cursor == b.cursor && a.grad == b.grad && a.world_rank == b.world_rank &&
         a.step_seconds == b.step_seconds;
}

}  // namespace

// A step reads Ψ parameters and Ψ momentum buffers (momentum SGD) and the
// cursor (its samples); it then tells the lighthouse its committed steps.
int64_t least_heal_bytes(int64_t psi) { return int64_t(sizeof(float)) * 2 * psi + int64_t(sizeof(int64_t)) * 2; }

void add_heal_probe_verdicts(Verdicts& v) {
  const int n = 4;
  auto group = make_threads_group(n, 1.0);
  std::vector<MemberState> after(n);
  std::vector<std::string> failed(n);
  std::vector<std::exception_ptr> unwritten(n);
  std::vector<std::thread> members;
  for (int m = 0; m < n; ++m)
    members.emplace_back([&, m] {
      after[std::size_t(m)] = heal_probe_state(m);
      try {
        heal(*group[std::size_t(m)], kHealProbeSource, kHealProbeBehind, after[std::size_t(m)]);  // your hole
      } catch (const NotImplemented&) {
        unwritten[std::size_t(m)] = std::current_exception();
      } catch (const std::exception& e) {
        failed[std::size_t(m)] = e.what();
      }
    });
  for (std::thread& t : members) t.join();
  for (const std::exception_ptr& e : unwritten)
    if (e) std::rethrow_exception(e);
  std::vector<int64_t> received(n, 0);  // bytes each member was sent, by anyone
  for (int src = 0; src < n; ++src)
    for (int dst = 0; dst < n; ++dst) received[std::size_t(dst)] += group[std::size_t(src)]->traffic().bytes(src, dst);
  const MemberState origin = heal_probe_state(kHealProbeSource);
  const int64_t least = least_heal_bytes(int64_t(origin.replica.params.size()));
  MemberState source_next = heal_probe_state(kHealProbeSource);
  heal_probe_step(source_next);
  std::string same_seen, kept_seen, bytes_seen;
  for (int m = 0; m < n; ++m) {
    const std::size_t i = std::size_t(m);
    const bool is_behind = std::count(kHealProbeBehind.begin(), kHealProbeBehind.end(), m) > 0;
    if (!failed[i].empty()) {
      if (same_seen.empty()) same_seen = str("member ", m, ": ", failed[i].substr(0, 160));
      continue;
    }
    if (after[i].world_rank != 40 + m && same_seen.empty())
      same_seen = str("member ", m, " is world rank ", 40 + m, " and came out as world rank ", after[i].world_rank,
                      ": a member keeps who it is");
    if (!is_behind) {
      if (!heal_probe_same(after[i], heal_probe_state(m)) && kept_seen.empty())
        kept_seen = str("member ", m, m == kHealProbeSource ? " (the source)" : " (in step)", " changed");
      if (received[i] > 0 && kept_seen.empty())
        kept_seen = str("member ", m, m == kHealProbeSource ? " (the source)" : " (in step)", " was sent ",
                        received[i], " B");
      continue;
    }
    MemberState next = after[i];
    const bool shaped = next.replica.params.size() == origin.replica.params.size() &&
                        next.replica.momentum.size() == origin.replica.momentum.size();
    if (shaped) heal_probe_step(next);
    const bool same = shaped && next.replica.params == source_next.replica.params &&
                      next.replica.momentum == source_next.replica.momentum &&
                      next.committed == source_next.committed && next.cursor == source_next.cursor;
    if (!same && same_seen.empty())
      same_seen = str("member ", m, " (behind), healed, then one step: ",
                      !shaped ? "its replica changed shape"
                      : after[i].replica.params != origin.replica.params ? "its parameters are not the source's"
                      : next.cursor != source_next.cursor ? "it drew other samples than the source"
                      : next.committed != source_next.committed
                          ? "it tells the lighthouse another number of committed steps than the source"
                          : "the same parameters, the same samples, and still another update than the source's");
    if (received[i] > least && bytes_seen.empty())
      bytes_seen = str("member ", m, " (behind) was sent ", received[i], " B; the least that lets it take the source's "
                       "next step is ", least, " B");
  }
  v.holds("heal, alone: each member behind goes on exactly as the source would, and keeps who it is",
          same_seen.empty(), same_seen.empty() ? "healed, one step each: bit for bit the source's" : same_seen);
  v.holds("heal, alone: the source and a member in step unchanged, nothing sent to them", kept_seen.empty(),
          kept_seen.empty() ? "unchanged, 0 B each" : kept_seen);
  v.holds("heal, alone: no more bytes to a member behind than the least that makes it a replica", bytes_seen.empty(),
          bytes_seen.empty() ? str(received[0], " B and ", received[3], " B, the least ", least, " B") : bytes_seen);
}

}  // namespace dpt::ch16
