// grade_listener.cpp — a Catch2 event listener (Catch2 2 or 3) that writes one
// JSON line per test case for scripts/grade, when DPT_GRADE_JSON names a file.
//
// Each line (appended, so every CTest process adds its own test case):
//   {"chapter": "ch04", "test": "ring_all_gather: every rank ends with …",
//    "subject": "ring_all_gather", "behaviour": "every rank ends with …",
//    "holes": [...], "needs": [...], "outcome": "pass" | "fail" | "skip",
//    "failure": {"file", "line", "expression", "expansion", "message", "info"},
//    "not_implemented": "ch04: ring_all_gather — see exercises/…"}
// `failure` is the first failing assertion only; `not_implemented` the first
// "not implemented: …" seen in any failure's message, expansion or INFO.
//
// Tags (docs/exercises.md, "How tests name holes"):
//   [chNN]        the chapter;
//   [hole:NAME]   the test checks hole NAME (repeatable); untagged, the hole is
//                 the test name's prefix "NAME: behaviour" when NAME is a hole;
//   [needs:X]     the test also needs X done: a hole name or a chapter (ch03).
// Leaves out: sections, passing assertions, timings. Under mpirun only rank 0
// writes. Without DPT_GRADE_JSON it does nothing.
#if DPT_CATCH2_MAJOR < 3
#define CATCH_CONFIG_EXTERNAL_INTERFACES  // Catch2 2: TestEventListenerBase
#endif
#include "support/catch.h"

#if DPT_CATCH2_MAJOR >= 3
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>
#endif

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

#if DPT_CATCH2_MAJOR >= 3
using ListenerBase = Catch::EventListenerBase;
std::string tag_text(const Catch::Tag& tag) { return std::string(tag.original); }
#else
using ListenerBase = Catch::TestEventListenerBase;
std::string tag_text(const std::string& tag) { return tag; }
#endif

const char* const kNotImplemented = "not implemented: ";

// What follows "not implemented: " in `text` up to the end of the line or a
// closing quote (an expansion quotes the message), or "".
std::string not_implemented_in(const std::string& text) {
  auto at = text.find(kNotImplemented);
  if (at == std::string::npos) return "";
  auto from = at + std::string(kNotImplemented).size();
  return text.substr(from, text.find_first_of("\n\"", from) - from);
}

// At most 2000 characters: an expansion of a large vector would flood the file.
std::string clipped(const std::string& text) {
  return text.size() <= 2000 ? text : text.substr(0, 2000) + " …";
}

bool is_rank_zero() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return rank == nullptr || std::string(rank) == "0";
}

// ---------------------------------------------------------------------------
// the listener

class GradeListener : public ListenerBase {
 public:
  using ListenerBase::ListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    record_ = nlohmann::json::object();
    const std::string& name = info.name;
    auto colon = name.find(": ");
    record_["test"] = name;
    record_["subject"] = colon == std::string::npos ? name : name.substr(0, colon);
    record_["behaviour"] = colon == std::string::npos ? "" : name.substr(colon + 2);
    record_["chapter"] = "";
    record_["holes"] = nlohmann::json::array();
    record_["needs"] = nlohmann::json::array();
    for (const auto& tag : info.tags) read_tag(tag_text(tag));
  }

#if DPT_CATCH2_MAJOR >= 3
  void assertionEnded(const Catch::AssertionStats& stats) override { note(stats); }
#else
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    note(stats);
    return true;
  }
#endif

  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    const auto& counts = stats.totals.assertions;
    bool failed = counts.failed > 0 || record_.contains("failure");
#if DPT_CATCH2_MAJOR >= 3
    bool skipped = counts.skipped > 0 && !failed;
#else
    bool skipped = false;
#endif
    record_["outcome"] = failed ? "fail" : skipped ? "skip" : "pass";
    write(record_);
  }

 private:
  void read_tag(const std::string& tag) {
    if (tag.rfind("hole:", 0) == 0) {
      record_["holes"].push_back(tag.substr(5));
    } else if (tag.rfind("needs:", 0) == 0) {
      record_["needs"].push_back(tag.substr(6));
    } else if (tag.size() == 4 && tag.rfind("ch", 0) == 0 && isdigit(tag[2]) && isdigit(tag[3])) {
      record_["chapter"] = tag;
    }
  }

  // Keeps the first failing assertion, and the first NotImplemented message.
  void note(const Catch::AssertionStats& stats) {
    const auto& result = stats.assertionResult;
    if (result.isOk()) return;
    std::string message = result.hasMessage() ? std::string(result.getMessage()) : "";
    std::string expansion = result.hasExpandedExpression() ? result.getExpandedExpression() : "";
    nlohmann::json info = nlohmann::json::array();
    for (const auto& m : stats.infoMessages) info.push_back(clipped(m.message));
    if (!record_.contains("not_implemented")) {
      std::string why = not_implemented_in(message);
      if (why.empty()) why = not_implemented_in(expansion);
      for (const auto& m : stats.infoMessages) {
        if (why.empty()) why = not_implemented_in(m.message);
      }
      if (!why.empty()) record_["not_implemented"] = why;
    }
    if (record_.contains("failure")) return;
    auto where = result.getSourceInfo();
    record_["failure"] = {
        {"file", where.file},
        {"line", where.line},
        {"expression", result.hasExpression() ? result.getExpressionInMacro() : ""},
        {"expansion", clipped(expansion)},
        {"message", clipped(message)},
        {"info", info},
    };
  }

  static void write(const nlohmann::json& record) {
    const char* path = std::getenv("DPT_GRADE_JSON");
    if (path == nullptr || *path == '\0' || !is_rank_zero()) return;
    std::ofstream out(path, std::ios::app);
    out << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }

  nlohmann::json record_;
};

}  // namespace

CATCH_REGISTER_LISTENER(GradeListener)
