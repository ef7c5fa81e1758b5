// test_gpu_ch11.cpp — chapter 11's mixed-precision training on cuda:0 against
// the same run on cpu:0, from the same weights on the same batches: the
// rounding and overflow counts run as kernels there (kernels.h's round_half
// and count_inf_or_nan, which call dpt/gpu_half.h's), the
// Linear GEMMs as bf16/fp16 tensor-core GEMMs summing in fp32
// (half_linear.h), and the holes (master_step, update_loss_scale,
// recompute_backward) unchanged on cuda tensors. Oracle: the cpu run, whose
// math the ch11 tests and tests/pytorch/crosscheck_ch11.py pin.
//
// The curve's tolerance, argued. Both sides multiply the same 16-bit values
// (products exact in fp32) and differ only in the order of the fp32 sums: at
// most (k + 4)·2^-22 of Σ|products| apart (test_gpu_half.cpp's bound for
// tensor cores), ≤ 1.6e-5 at k ≤ 64 here. A stored value rounds differently
// only when its sum lies that close to a rounding boundary — then it moves by
// one 16-bit step (bf16: 2^-8 of itself). A flipped logit of size ~1 moves
// its sample's loss by at most ~2^-8, the batch's mean loss (16 samples,
// ~2.3) by ≤ 1.1e-4 relative; a flipped hidden value by less. SGD is linear
// in the gradient, so these stay small along the run: what grows is the odd
// weight whose master, updated from a slightly other gradient, rounds to the
// next 16-bit value (crosscheck_ch11.py measured 3.1e-5 relative on the curve
// from such flips on the CPU). kCurveRtol = 1e-3 allows ~9 flipped logits in
// one step, or 30x the flips measured; a learning rate 25 % off moves this
// curve by 1.7e-2 (measured on cpu: 17x the tolerance; checked below as a
// control), and a wrong transpose, bias or gradient moves it by more.
// Left out: Adam, whose per-entry normalisation turns one flipped rounding
// into an lr-sized step (crosscheck_ch11.py): no tolerance tells that from a bug.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ch11.h"
#include "dpt/data.h"
#include "dpt/device.h"
#include "dpt/flatten.h"
#include "dpt/options.h"
#include "mixed_training.h"
#include "recompute.h"
#include "support/gpu.h"
#include "support/run_program.h"

using namespace dpt;
using namespace dpt::ch11;

namespace {

constexpr double kCurveRtol = 1e-3;

Options small_run(int64_t steps, float lr) {
  Options o;
  o.model = "64-32-10", o.optimizer = "sgd", o.lr = lr, o.batch = 16, o.steps = steps, o.seed = 1;
  o.no_shuffle = true;
  return o;
}

const Dataset& data() {
  static const Dataset d = make_synthetic(512, 64, 10, 1);
  return d;
}

// The largest |a − b| / |b| over the steps where both losses are finite (an
// overflowed step may record a non-finite loss on both sides); NaN-aware.
double curve_gap(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t t = 0; t < a.size(); ++t) {
    if (!std::isfinite(b[t]) && !std::isfinite(a[t])) continue;
    const double gap = std::fabs(a[t] - b[t]) / std::fabs(b[t]);
    if (!(gap <= worst)) worst = gap;
  }
  return worst;
}

std::vector<float> grads_of(const MLP& model) {
  std::vector<Tensor> grads;
  for (const Tensor& w : model.parameters()) grads.push_back(w.grad());
  return flatten(grads);  // to the host, in order
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("ch11 bf16 on cuda: the loss curve is the cpu run's within 1e-3, and a 25 % learning rate error is not",
          "[gpu][ch11]") {
  DPT_REQUIRE_GPU();
  const Setting bf16{Precision::BF16, parse_loss_scale("none", 50), "none"};
  const MixedRun cpu = train_mixed(small_run(40, 0.05f), data(), Device::cpu(0), bf16, false);
  const MixedRun gpu = train_mixed(small_run(40, 0.05f), data(), Device::cuda(0), bf16, false);
  const double gap = curve_gap(gpu.losses, cpu.losses);
  INFO("max |loss_cuda - loss_cpu| / loss_cpu over 40 steps = " << gap);
  CHECK(gap <= kCurveRtol);
  CHECK(gpu.skipped() == 0);
  CHECK(gpu.measured.total() == cpu.measured.total());  // 2 + 2 + 4 bytes per parameter on both ledgers

  const MixedRun off = train_mixed(small_run(40, 0.0625f), data(), Device::cuda(0), bf16, false);
  const double control = curve_gap(off.losses, cpu.losses);
  INFO("the control (lr 0.0625 on cuda) is " << control << " from the cpu run");
  CHECK(control > 2 * kCurveRtol);
}

TEST_CASE("ch11 fp16 + dynamic scaling on cuda: the same steps overflow and are skipped as on cpu, the same "
          "scales, weights untouched by a skipped step",
          "[gpu][ch11]") {
  DPT_REQUIRE_GPU();
  // Growth every 5 clean steps: the scale doubles until fp16 overflows, backs
  // off, and grows again (on cpu: steps 15, 21, 27, 32, 44, 50, 56 skip).
  const Setting fp16{Precision::FP16, parse_loss_scale("dynamic", 5), "dynamic"};
  const MixedRun cpu = train_mixed(small_run(60, 0.05f), data(), Device::cpu(0), fp16, false);
  const MixedRun gpu = train_mixed(small_run(60, 0.05f), data(), Device::cuda(0), fp16, false);
  REQUIRE(cpu.skipped() >= 3);  // the run is built to overflow
  int differ = 0;
  for (std::size_t t = 0; t < cpu.overflowed.size(); ++t) differ += gpu.overflowed[t] != cpu.overflowed[t];
  INFO("cpu skipped " << cpu.skipped() << " steps, cuda " << gpu.skipped() << "; " << differ << " steps differ");
  CHECK(differ == 0);
  CHECK(gpu.scales == cpu.scales);
  CHECK(gpu.skipped_changed == 0);  // a skipped step left cuda's weights, masters and state bit-identical
  const double gap = curve_gap(gpu.losses, cpu.losses);
  INFO("max relative loss gap = " << gap);
  CHECK(gap <= kCurveRtol);
}

// Flush counts: both sides count the same kind of entry (non-zero gradients
// stored, those rounded to 0, those below 2^-14) over runs kCurveRtol apart.
// A gradient is counted differently only when it lies within ~1e-3 of itself
// from 2^-25 or 2^-14 — a few in a thousand of the entries near there — so the
// fractions agree to well within 10 % of themselves (or 3 flushed entries,
// where there are few); a count lost, doubled, or taken from one block of
// the kernel's grid is off by 50 % or more.
TEST_CASE("ch11 fp16 without scaling on cuda: the flush and below-normal fractions are the cpu run's within 10 %",
          "[gpu][ch11]") {
  DPT_REQUIRE_GPU();
  const Setting fp16{Precision::FP16, parse_loss_scale("none", 50), "none"};
  const MixedRun cpu = train_mixed(small_run(40, 0.05f), data(), Device::cpu(0), fp16, false);
  const MixedRun gpu = train_mixed(small_run(40, 0.05f), data(), Device::cuda(0), fp16, false);
  INFO("cpu: " << cpu.flushes.nonzero << " non-zero, " << cpu.flushes.flushed << " flushed, " << cpu.flushes.tiny
               << " tiny; cuda: " << gpu.flushes.nonzero << ", " << gpu.flushes.flushed << ", " << gpu.flushes.tiny);
  REQUIRE(cpu.flushes.tiny > 0);
  CHECK(std::fabs(double(gpu.flushes.nonzero - cpu.flushes.nonzero)) <= 0.1 * double(cpu.flushes.nonzero));
  CHECK(std::fabs(gpu.flushes.tiny_fraction() - cpu.flushes.tiny_fraction()) <= 0.1 * cpu.flushes.tiny_fraction());
  CHECK(std::fabs(double(gpu.flushes.flushed - cpu.flushes.flushed)) <=
        std::max(3.0, 0.1 * double(cpu.flushes.flushed)));
}

TEST_CASE("ch11 on cuda: recomputing every layer, or every sqrt(L), gives no recomputation's gradients bit for bit",
          "[gpu][ch11]") {
  DPT_REQUIRE_GPU();
  Options o = small_run(1, 0.05f);
  o.model = "64-48-48-48-48-48-10";
  const MLP net = build_model(o, Device::cuda(0));
  std::vector<Tensor> params = net.parameters();
  const Batch batch = gather_batch(data(), BatchSampler(data().size(), 32, false, 0).indices(0), Device::cuda(0));
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    INFO(precision_name(p));
    for (Tensor& w : params) round_(w, p);
    std::vector<float> reference;
    for (Recompute r : {Recompute::None, Recompute::EveryLayer, Recompute::Sqrt}) {
      INFO("--recompute " << recompute_name(r));
      for (Tensor& w : params) w.zero_grad();
      forward_backward(net, batch, p, 1024.0f, r, nullptr);
      const std::vector<float> grads = grads_of(net);
      if (r == Recompute::None) reference = grads;
      CHECK(same_bits(grads, reference));
    }
  }
}

// The whole lecture on cuda, sections 1–7 (ZeRO's rank threads share the GPU,
// each on its own account): every verdict it prints must hold.
TEST_CASE("ch11_mixed_precision --device cuda passes every verdict", "[gpu][ch11][chapters]") {
  DPT_REQUIRE_GPU();
  auto run = dpt_test::run_program("ch11_mixed_precision", "--device cuda --steps 40 --quiet");
  INFO(dpt_test::summary_line(run.output) << "\n" << run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("this run uses cpu:0") == std::string::npos);
}
