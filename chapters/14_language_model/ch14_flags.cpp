// ch14_flags.cpp — chapter 14's flags and their bounds (ch14_flags.h).
#include "ch14_flags.h"

#include <CLI/CLI.hpp>

#include "ch05_flags.h"
#include "dpt/options.h"
#include "dpt/text_corpus.h"

void add_ch14_flags(CLI::App& app, Ch14Flags& f) {
  app.add_option("--data", f.data, "Text: auto (kjv where installed, else synthetic) | kjv | synthetic | text:FILE")
      ->check(CLI::Validator(
          [](std::string& value) {
            return value == "auto" ? std::string() : dpt::text_source_check()(value);  // auto: kjv or synthetic
          },
          ""))
      ->capture_default_str();
  // Sizes: at most what a 2-core course machine can hold and step in minutes;
  // beyond them a value can only be a typo.
  app.add_option("--layers", f.shape.layers, "L: transformer blocks")->check(dpt::integer_in(1, 96))->capture_default_str();
  app.add_option("--heads", f.shape.heads, "H: attention heads (must divide --width)")
      ->check(dpt::integer_in(1, 128))->capture_default_str();
  app.add_option("--width", f.shape.width, "C: the residual stream's width")
      ->check(dpt::integer_in(1, 8192))->capture_default_str();
  app.add_option("--context", f.shape.context, "T: tokens per sequence (learned positions)")
      ->check(dpt::integer_in(1, 8192))->capture_default_str();
  app.add_option("--batch", f.batch, "B: sequences per step, per rank")->check(dpt::integer_in(1, 65536))->capture_default_str();
  app.add_option("--steps", f.steps, "Optimizer steps (0: only write --save-* outputs)")
      ->check(dpt::integer_in(0, 10000000))->capture_default_str();
  app.add_option("--lr", f.lr, "Learning rate")->check(dpt::number_in(0, 10))->capture_default_str();
  app.add_option("--optimizer", f.optimizer, "sgd | adamw (PyTorch's defaults: betas 0.9, 0.999, eps 1e-8)")
      ->check(CLI::IsMember({"sgd", "adamw"}))->capture_default_str();
  app.add_option("--weight-decay", f.weight_decay, "AdamW's decoupled weight decay λ")
      ->check(dpt::number_from(0, 1))->capture_default_str();
  app.add_option("--sync", f.sync,
                 "How replicas average gradients: buckets (your ring from chapter 04, your buckets from 05, "
                 "all-reduced during backward) | library (the library's all-reduce, after backward)")
      ->check(CLI::IsMember({"buckets", "library"}))->capture_default_str();
  app.add_option("--bucket-mb", f.bucket_mb, "--sync buckets: each bucket's cap in MiB (0: one all-reduce per tensor)")
      ->check(dpt::ch05::bucket_mebibytes())->capture_default_str();
  app.add_option("--seed", f.seed, "Seeds the initial weights, the shuffling and the sample")->capture_default_str();
  app.add_flag("--no-shuffle", f.no_shuffle, "Take windows in order: step s, window g starts at ((s·G + g)·T) mod (N − T − 1)");
  app.add_option("--eval-every", f.eval_every, "Held-out loss every N steps (and after the last)")
      ->check(dpt::integer_in(1, 10000000))->capture_default_str();
  app.add_option("--eval-batches", f.eval_batches, "Held-out batches of B windows per evaluation (0: none)")
      ->check(dpt::integer_in(0, 10000))->capture_default_str();
  app.add_option("--sample", f.sample, "Characters to generate after training (0: none)")
      ->check(dpt::integer_in(0, 100000))->capture_default_str();
  app.add_option("--prompt", f.prompt, "The sample's first characters (default: the held-out text's first line)");
  app.add_option("--load-weights", f.load_weights, "Start from these weights (safetensors, nanoGPT's names)")
      ->check(CLI::ExistingFile);
  dpt::add_output(app, "--save-weights", f.save_weights, "Write the final weights (safetensors, nanoGPT's names, the vocabulary)");
  dpt::add_output(app, "--save-data", f.save_data, "Write the training split's tokens (safetensors: tokens (N,) int64)");
  dpt::add_output(app, "--metrics", f.metrics, "Write per-step metrics (JSONL)");
  dpt::add_output(app, "--plot", f.plot, "SVG: train and held-out loss against steps (with --batch-sweep: its chart)");
  app.add_flag("--quiet", f.quiet, "No narration and no progress bar");
}
