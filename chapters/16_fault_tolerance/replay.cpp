// replay.cpp — the one-device replay of the ledger and its exactly-once count
// (replay.h).
#include "replay.h"

#include "dpt/ops.h"
#include "dpt/optim.h"

namespace dpt::ch16 {

std::vector<float> replay_ledger(const Options& o, const Dataset& data, const std::vector<LedgerEntry>& ledger) {
  MLP model = build_model(o, Device::host());
  SGD sgd(model.parameters(), o.lr, 0.9f);
  for (const LedgerEntry& entry : ledger) {
    Batch batch = gather_batch(data, entry.samples, Device::host());
    sgd.zero_grad();
    softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
    sgd.lr = entry.lr;
    sgd.step();
  }
  std::vector<float> flat;
  for (const Tensor& p : model.parameters()) {
    std::vector<float> v = p.to_vector();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

ExactlyOnce check_exactly_once(const std::vector<LedgerEntry>& ledger, int64_t samples) {
  ExactlyOnce result;
  std::vector<int64_t> seen(std::size_t(samples), 0);  // times each sample came in the current epoch
  int64_t in_epoch = 0, epochs = 0;
  for (const LedgerEntry& entry : ledger)
    for (int64_t s : entry.samples) {
      if (s < 0 || s >= samples) {
        result.seen = "step " + std::to_string(entry.slot) + " consumed sample " + std::to_string(s) +
                      ", outside the data set";
        return result;
      }
      if (++seen[std::size_t(s)] > 1) {
        // Epochs are cut every `samples` consumed: a repeat inside one means a sample came twice, or
        // that some never came, so that the cut fell into the next epoch's samples.
        result.seen = "sample " + std::to_string(s) + " came a second time (in the step of slot " +
                      std::to_string(entry.slot) + ") before epoch " + std::to_string(epochs) + "'s " +
                      std::to_string(samples) + " samples had all come: a sample repeated, or others were lost";
        return result;
      }
      ++result.consumed;
      if (++in_epoch == samples) {  // a whole epoch: each came once, since none came twice
        std::fill(seen.begin(), seen.end(), 0);
        in_epoch = 0;
        ++epochs;
      }
    }
  result.ok = true;
  result.seen = std::to_string(epochs) + " whole epochs and " + std::to_string(in_epoch) +
                " samples of the next, none missing, none twice";
  return result;
}

}  // namespace dpt::ch16
