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
/// the same point, before that rank's first point-to-point message in the part
/// (library collectives that returned on every rank may come before it: they
/// leave nothing behind). Then no rank waits on a message that will never
/// come and none is left in a mailbox, so the lecture's next part starts from
/// a clean communicator. A hole that
/// breaks the contract is an error, never a recorded hole and never a hang:
///   - thrown on some ranks only, the others returning: every rank throws
///     dpt::Error naming the hole and the ranks that threw it;
///   - thrown after a message (this rank's traffic log counted a send on
///     `comm` in the part): the same, "after a message";
///   - thrown while another rank waits on the thrower's message: that rank's
///     wait is bounded (--comm-timeout), so the run stops with the timeout
///     naming the rank it waited on; the thrower's own error names the hole.
/// Every other exception passes through unchanged.
///
/// Left out: messages on another communicator than `comm` (a split group's
/// own traffic log) are not seen; a part that uses one passes that group.
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
