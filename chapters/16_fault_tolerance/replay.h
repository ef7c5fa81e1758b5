/// @file replay.h
/// @brief The oracles (provided): the ledger's committed steps replayed on one
/// device, and the ledger's exactly-once count. Written from the ledger
/// alone: no code shared with the ranks' path (elastic_rank.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/options.h"
#include "run_record.h"

namespace dpt::ch16 {

/// The flags' model trained on one device through every ledger entry in
/// order: its samples as one batch, the library's momentum SGD (μ = 0.9) at
/// the entry's learning rate. Returns the parameters, flat.
std::vector<float> replay_ledger(const Options& o, const Dataset& data, const std::vector<LedgerEntry>& ledger);

/// Whether the ledger consumed every sample of every epoch exactly once: its
/// samples in commit order, cut into epochs of `samples`, each whole epoch a
/// permutation of 0..samples-1 and the last, partial one without a repeat.
struct ExactlyOnce {
  bool ok = false;       ///< every sample of every whole epoch once, no repeat in the last
  int64_t consumed = 0;  ///< samples over all committed steps
  std::string seen;      ///< "3 epochs and 128 samples, none missing, none twice", or the first fault
};
/// The check above, on `ledger` over a data set of `samples` samples.
ExactlyOnce check_exactly_once(const std::vector<LedgerEntry>& ledger, int64_t samples);

}  // namespace dpt::ch16
