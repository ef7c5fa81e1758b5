// ch11_flags.cpp — chapter 11's flags and their bounds (ch11_flags.h).
#include "ch11_flags.h"

#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/options.h"
#include "mixed_training.h"

namespace dpt::ch11 {

void add_ch11_flags(CLI::App& app, Ch11Flags& flags) {
  limit_optimizers(app, {"sgd", "momentum", "adam", "adamw"}, "the bytes-per-parameter formula knows these four");
  app.add_option("--precision", flags.precision, "Where weights, activations and gradients live: fp32, bf16 or fp16. "
                 "16-bit runs need an optimizer that keeps fp32 state: every --optimizer here does "
                 "(sgd, momentum, adam, adamw: the master copy and the moments are fp32)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))->capture_default_str();
  app.add_option("--loss-scale", flags.loss_scale, "dynamic (GradScaler's defaults), static:S (S > 0, 1/S a finite float) or none")
      ->check([](const std::string& text) -> std::string {
        try { parse_loss_scale(text, 1); } catch (const Error& e) { return e.what(); }
        return "";
      })->capture_default_str();
  app.add_option("--recompute", flags.recompute, "The flags' own run: none, every-layer or sqrt (checkpoints)")
      ->check(CLI::IsMember({"none", "every-layer", "sqrt"}))->capture_default_str();
  app.add_option("--recompute-model", flags.recompute_model, "The deeper model section 6 recomputes")
      ->check([](const std::string& spec) -> std::string {
        try { parse_widths(spec); } catch (const Error& e) { return e.what(); }
        return "";
      })->capture_default_str();
  app.add_option("--growth-interval", flags.growth_interval,
                 "Dynamic scaling: n, the scaler's patience (GradScaler grows after n clean steps in a row; "
                 "ch11.h's laws ask any policy to try a larger scale within 4n; PyTorch: 2000)")
      ->check(positive_integer())->capture_default_str();
  app.add_option("--stage", flags.stage, "Section 7: the ZeRO stage whose model states are measured: 0, 1, 2, 3 or all")
      ->check(CLI::IsMember({"all", "0", "1", "2", "3"}))->capture_default_str();
  app.add_option("--ranks", flags.ranks, "Section 7: N, the thread ranks ZeRO divides the model states among")
      ->check(integer_in(1, kMaxZeroRanks))->capture_default_str();
  app.add_flag("--compare,!--no-compare", flags.compare, "Also train fp32, bf16, fp16 with and without scaling (default on)")
      ->capture_default_str();
}

}  // namespace dpt::ch11
