// findings.h — what rank threads' checks found, collected under a lock and
// reported from the main thread (Catch2 is not thread-safe).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "support/catch.h"

namespace dpt_test {

struct Findings {
  std::mutex mutex;
  std::vector<std::string> problems;
  /// Called on any rank thread.
  void add(const std::string& p) {
    std::lock_guard<std::mutex> lock(mutex);
    problems.push_back(p);
  }
  /// Called on the main thread once the ranks have ended.
  void require_none() {
    INFO(problems.size() << " problem(s); the first: " << (problems.empty() ? "" : problems.front()));
    CHECK(problems.empty());
  }
};

}  // namespace dpt_test
