// holes.cpp — running a part past an unwritten hole, and the agreement that
// keeps it from swallowing a hole that would leave a rank waiting (holes.h).
#include "dpt/holes.h"

#include <algorithm>
#include <cstring>

#include "dpt/check.h"

namespace dpt {

namespace {

// What one rank says after the part: how it ended, and the hole's message
// (cut to fit: the full one stays on the ranks that threw it).
struct Outcome {
  int state = 0;  // kReturned, kNotMember, kThrew
  char hole[244] = {};
};
constexpr int kReturned = 0, kNotMember = 1, kThrew = 2;

bool threw(const Outcome& o) { return o.state == kThrew; }

// "0, 2": the ranks whose outcome passes `pick`.
template <typename Pick>
std::string ranks_where(const std::vector<Outcome>& all, Pick pick) {
  std::string ranks;
  for (std::size_t r = 0; r < all.size(); ++r)
    if (pick(all[r])) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return ranks;
}

}  // namespace

std::string unwritten_hole(Communicator& comm, const std::function<void()>& part, bool member) {
  Outcome mine;
  std::string hole;
  if (!member) {
    mine.state = kNotMember;
  } else {
    try {
      part();
    } catch (const NotImplemented& e) {
      hole = e.what();
      mine.state = kThrew;
      std::strncpy(mine.hole, hole.c_str(), sizeof(mine.hole) - 1);
    }
  }
  std::vector<Outcome> all;
  try {
    all = comm.all_gather(mine);
  } catch (const Error& e) {  // a rank still waits on this one's message: its bounded wait stops the run
    if (hole.empty()) throw;
    throw Error(hole + " — thrown on rank " + std::to_string(comm.rank()) +
                " while another rank had not finished the part (a hole must throw on every rank, before its first "
                "message): " + e.what());
  }
  const auto first = std::find_if(all.begin(), all.end(), threw);
  if (first == all.end()) return "";
  if (hole.empty()) hole = first->hole;
  const std::string returned = ranks_where(all, [](const Outcome& o) { return o.state == kReturned; });
  if (!returned.empty())
    throw Error(hole + " — thrown on rank(s) " + ranks_where(all, threw) + " only; rank(s) " + returned +
                " went on: a hole must throw on every rank, at the same point, before its first message");
  return hole;
}

std::string unwritten_hole_here(const std::function<void()>& part) {
  try {
    part();
  } catch (const NotImplemented& e) {
    return e.what();
  }
  return "";
}

bool Holes::record(const std::string& hole) {
  last_ = hole;
  if (hole.empty()) return true;
  if (std::find(missing_.begin(), missing_.end(), hole) == missing_.end()) missing_.push_back(hole);
  return false;
}

bool Holes::run(Communicator& comm, const std::function<void()>& part, bool member) {
  return record(unwritten_hole(comm, part, member));
}

bool Holes::run_here(const std::function<void()>& part) { return record(unwritten_hole_here(part)); }

std::string Holes::missing_text() const {
  std::string text;
  for (const std::string& hole : missing_) text += (text.empty() ? "" : "; ") + hole;
  return text;
}

void Holes::judge(Verdicts& v) const {
  v.holds("every part ran (holes written)", all_written(), all_written() ? "" : "not yet: " + missing_text());
}

}  // namespace dpt
