// memory.cpp — chapter 14's memory table (memory.h).
#include "memory.h"

#include "dpt/device.h"
#include "dpt/report.h"

double attention_probability_bytes(const GptShape& s, int64_t batch) {
  return double(s.layers) * double(batch) * double(s.heads) * double(s.context) * double(s.context) * 4.0;
}

dpt::Table memory_table(const Gpt& model, const Ch14Flags& f, const LmRun& run) {
  const double psi = double(model.num_parameters()), states = f.optimizer == "adamw" ? 2 : 0;
  const double probs = attention_probability_bytes(f.shape, f.batch), held = double(run.peak_activation_bytes);
  dpt::Table t("ch14: memory per rank", {"what", "bytes", "formula"});
  t.add_row({"parameters", dpt::format_bytes(4 * psi), "4·Ψ"});
  t.add_row({"gradients", dpt::format_bytes(4 * psi), "4·Ψ"});
  t.add_row({"optimizer state (" + f.optimizer + ")", dpt::format_bytes(4 * states * psi),
             states > 0 ? "4·2Ψ (m and v)" : "none"});
  double bucket_bytes = 0;  // chapter 05 copies each gradient into its bucket (DDP makes the gradients views instead)
  for (const dpt::ch05::Bucket& b : run.layout) bucket_bytes += double(b.bytes);
  if (!run.layout.empty())
    t.add_row({"gradient buckets (--sync buckets)", dpt::format_bytes(bucket_bytes), "4·Ψ: the gradients, packed again"});
  t.add_row({"activations kept for backward (measured)", dpt::format_bytes(held), "grows with B·T and B·H·T²"});
  t.add_row({"  of which attention probabilities", dpt::format_bytes(probs),
             "4·L·B·H·T² (" + (held > 0 ? dpt::fixed(100 * probs / held, 1) : std::string("-")) + " %)"});
  return t;
}
