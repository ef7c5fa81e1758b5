/// @file holes.h
/// @brief Running a lecture past a hole not written yet: the part that meets
/// it stops, the hole is recorded, the next part runs, and one verdict at the
/// end names every hole still to fill.
///
///     Holes holes;
///     if (holes.run(ctx.comm, [&] { out = train(ctx, o); }))   // collective
///       report(out);
///     else if (ctx.is_root())
///       std::cout << "  training: not written yet (" << holes.last() << ")\n";
///     ...
///     holes.judge(verdicts);   // "every part ran (holes written)", or ✘ "not yet: …"
///
/// The contract a collective part keeps (what makes running past it safe): a
/// hole not written throws dpt::NotImplemented on every rank taking part, at
/// the same point, before any message of the part is left unreceived: at the
/// hole's top (every stub in exercises/ throws there), or after exchanges
/// that finished on every rank (ch10's top-k gathers, then decodes in its
/// hole; a training run's set-up). Then no rank waits on a message that will
/// never come and none is left in a mailbox, so the lecture's next part
/// starts from a clean communicator. After the part the ranks agree (one
/// all_gather on `comm`), so a hole that breaks the contract stops the run,
/// never a recorded hole and never a hang:
///   - thrown on some ranks only, the others returning: every rank throws
///     dpt::Error naming the hole and the ranks that threw it;
///   - thrown while another rank waits on the thrower's message: that rank's
///     wait is bounded (--comm-timeout), so the run stops with the timeout
///     naming the rank it waited on and the thrower waiting in all_gather;
///     the thrower's own error names the hole.
/// Every other exception passes through unchanged.
///
/// Left out: a message sent and never received before every rank threw is
/// not detected (the communicator counts no receives); no stub does that,
/// since each throws before its first message.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dpt/comm/communicator.h"
#include "dpt/verdict.h"

namespace dpt {

/// Collective over `comm`: runs `part`. "" when it returned on every rank
/// taking part; the NotImplemented message ("not implemented: ch04: …") when it
/// threw one on every rank taking part before any message (holes.h's
/// contract). `member` false: this rank does not take part (`part` is not
/// called) but still joins the agreement. Throws dpt::Error naming the hole
/// when the contract is broken; passes every other exception through.
std::string unwritten_hole(Communicator& comm, const std::function<void()>& part, bool member = true);

/// This rank alone: runs `part`, which sends no message on any communicator
/// shared with other ranks (a local probe, a private world of its own). ""
/// when it returned, else the NotImplemented message it threw.
std::string unwritten_hole_here(const std::function<void()>& part);

/// The holes a lecture ran past, in the order met (each message once).
class Holes {
 public:
  /// unwritten_hole(comm, part, member), recording its hole; true when it ran.
  bool run(Communicator& comm, const std::function<void()>& part, bool member = true);
  /// unwritten_hole_here(part), recording its hole; true when it ran.
  bool run_here(const std::function<void()>& part);
  /// The last part's NotImplemented message ("" when it ran).
  const std::string& last() const { return last_; }
  /// The holes met so far: "not implemented: …" messages, each once.
  const std::vector<std::string>& missing() const { return missing_; }
  /// No part met an unwritten hole so far.
  bool all_written() const { return missing_.empty(); }
  /// The holes met, "; "-joined ("" when none).
  std::string missing_text() const;
  /// The verdict "every part ran (holes written)"; ✘ "not yet: <holes>".
  void judge(Verdicts& v) const;

 private:
  bool record(const std::string& hole);
  std::vector<std::string> missing_;
  std::string last_;
};

}  // namespace dpt
