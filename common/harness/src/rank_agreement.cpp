// rank_agreement.cpp — check_ranks_agree: every rank trains with the same
// flags and the same data, or every rank stops with one line saying who differs.
//
// Under mpirun each process parses its own command line (and MPMD syntax, or a
// wrapper script, can give each a different one), so nothing else would notice
// that rank 1 runs with --batch 16 while rank 0 runs with --batch 8.
//
// How: each rank writes its fingerprint as text ("--batch 16", ..., "data set
// 4096 x 784, 10 classes, hash 9f0c..."), and the texts are exchanged with the
// communicator's all_gather on floats, one byte per float: every byte value
// 0–255 is exact in a float, so the texts arrive unchanged and both values can
// be named. A few hundred bytes, once per run.
//
// Left out: launch flags (--ranks, --comm...) that launch itself reconciles,
// and flags that may rightly differ (output paths, --quiet, --load-weights).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "dpt/check.h"
#include "dpt/comm.h"
#include "dpt/options.h"

namespace dpt {

namespace {

using Fingerprint = std::vector<std::pair<std::string, std::string>>;  // (what, value)

// The shortest decimal that reads back as exactly `value` ("0.05", not "0.0500000007").
std::string exact(float value) {
  char text[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, double(value));
    if (std::strtof(text, nullptr) == value) break;
  }
  return text;
}

// FNV-1a, 64 bits, over x's float bytes, the labels and the class count.
uint64_t data_hash(const Dataset& data) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](const void* bytes, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      hash ^= static_cast<const unsigned char*>(bytes)[i];
      hash *= 1099511628211ull;
    }
  };
  if (data.x.defined()) mix(data.x.data(), std::size_t(data.x.numel()) * sizeof(float));
  mix(data.y.data(), data.y.size() * sizeof(int64_t));
  mix(&data.classes, sizeof data.classes);
  return hash;
}

Fingerprint fingerprint(const Options& o, const Dataset& data) {
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", (unsigned long long)data_hash(data));
  return {{"--steps", std::to_string(o.steps)},
          {"--batch", std::to_string(o.batch)},
          {"--lr", exact(o.lr)},
          {"--seed", std::to_string(o.seed)},
          {"--optimizer", o.optimizer},
          {"--model", o.model},
          {"--data", o.data},
          {"--samples", std::to_string(o.samples)},
          {"--no-shuffle", o.no_shuffle ? "given" : "not given"},
          {"data set", std::to_string(data.size()) + " x " + std::to_string(data.features()) + ", " +
                           std::to_string(data.classes) + " classes, hash " + hash}};
}

// Unit (\x1f) and record (\x1e) separators: no flag value a shell passes holds them.
std::string encode(const Fingerprint& print) {
  std::string text;
  for (const auto& [what, value] : print) text += what + '\x1f' + value + '\x1e';
  return text;
}

Fingerprint decode(const std::string& text) {
  Fingerprint print;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t unit = text.find('\x1f', at), record = text.find('\x1e', at);
    DPT_CHECK(unit < record && record != std::string::npos, "check_ranks_agree: a rank sent a garbled fingerprint");
    print.push_back({text.substr(at, unit - at), text.substr(unit + 1, record - unit - 1)});
    at = record + 1;
  }
  return print;
}

// Every rank's text, rank r's at [r]. Two all_gathers: the lengths, then the
// bytes (one per float) padded to the longest.
std::vector<std::string> gather_texts(Communicator& comm, const std::string& mine) {
  DPT_CHECK(mine.size() < (std::size_t(1) << 24), "check_ranks_agree: a fingerprint of " << mine.size()
                                                      << " bytes is too long to count exactly in a float");
  float length = float(mine.size());
  std::vector<float> lengths(comm.size());
  comm.all_gather(&length, lengths.data(), 1);
  std::size_t longest = 0;
  for (float l : lengths) longest = std::max(longest, std::size_t(l));
  std::vector<float> send(longest, 0.0f), all(longest * comm.size());
  for (std::size_t i = 0; i < mine.size(); ++i) send[i] = float(static_cast<unsigned char>(mine[i]));
  comm.all_gather(send.data(), all.data(), int64_t(longest));
  std::vector<std::string> texts(comm.size());
  for (int r = 0; r < comm.size(); ++r)
    for (std::size_t i = 0; i < std::size_t(lengths[r]); ++i)
      texts[r] += char(static_cast<unsigned char>(all[r * longest + i]));
  return texts;
}

// "" when `theirs` (rank r) agrees with rank 0's `ours`, else the sentence.
std::string difference(int rank, const Fingerprint& reference, const Fingerprint& theirs) {
  DPT_CHECK(reference.size() == theirs.size(), "rank " << rank << " runs a different dpt build than rank 0 "
                                                         << "(its start-up fingerprint has other fields)");
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const auto& [what, expected] = reference[i];
    const std::string& seen = theirs[i].second;
    if (seen == expected) continue;
    if (what == "data set")
      return "rank " + std::to_string(rank) + " holds a different data set than rank 0 (" + seen + " vs " + expected +
             "): every rank must read the same --data files";
    if (seen == "given" || seen == "not given")  // a switch, or whether a flag was given
      return "rank " + std::to_string(rank) + (seen == "given" ? " was started with " + what + ", rank 0 without it"
                                                               : " was started without " + what + ", rank 0 with it") +
             ": every rank needs the same flags";
    return "rank " + std::to_string(rank) + " was started with " + what + " " + seen + ", rank 0 with " + what + " " +
           expected + ": every rank needs the same flags";
  }
  return "";
}

}  // namespace

void check_ranks_agree(Communicator& comm, const Options& options, const Dataset& data,
                       const std::vector<std::pair<std::string, std::string>>& chapter_flags) {
  if (comm.size() == 1) return;
  Fingerprint print = fingerprint(options, data);
  print.insert(print.end() - 1, chapter_flags.begin(), chapter_flags.end());  // flags first, the data set last
  std::vector<std::string> texts = gather_texts(comm, encode(print));
  Fingerprint reference = decode(texts[0]);
  // Every rank has every text, so every rank finds the same first difference.
  for (int r = 1; r < comm.size(); ++r) {
    std::string problem = difference(r, reference, decode(texts[r]));
    DPT_CHECK(problem.empty(), problem);
  }
}

}  // namespace dpt
