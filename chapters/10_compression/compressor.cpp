// compressor.cpp — the compressors of compressor.h: none, the 16-bit ring,
// top-k, scaled sign, PowerSGD. Each message goes through the communicator as
// 32-bit words, so the traffic log counts exactly what a compressor sends.
#include "compressor.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "ch10.h"
#include "dpt/check.h"
#include "dpt/range.h"
#include "formats.h"

namespace dpt::ch10 {

float index_word(int64_t index) { return word_of(uint32_t(index)); }
int64_t word_index(float word) { return int64_t(bits_of(word)); }

namespace {

// ----------------------------------------------------------------------------
// none: the library all-reduce, as chapters 04–09 average.
class NoCompression : public Compressor {
 public:
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    delivered = x;
    comm.all_reduce(x.data(), int64_t(x.size()), ReduceOp::Avg);
  }
  std::string name() const override { return "none"; }
};

// ----------------------------------------------------------------------------
// fp16 / bf16: x/n in 16 bits, summed on chapter 04's ring schedule. The
// halves are padded to n chunks of c whole words each (2c halves). Rank r
// sends chunk (r − s) mod n at scatter step s and, while its left neighbour
// sends it chunk (r − s − 1) mod n, adds that one into its own 16-bit copy;
// after n − 1 steps it owns chunk (r + 1) mod n summed over all ranks, and the
// all-gather passes the owned chunks round: 2(n − 1) messages of c words.
class Cast16 : public Compressor {
 public:
  explicit Cast16(Half format) : format_(format) {}
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    const int n = comm.size(), r = comm.rank();
    const int64_t psi = int64_t(x.size()), words = (psi + 1) / 2, c = (words + n - 1) / n;
    std::vector<uint16_t> halves(std::size_t(2 * c * n), 0);
    delivered.assign(x.size(), 0);
    for (int64_t i = 0; i < psi; ++i) {
      halves[std::size_t(i)] = to_half(format_, x[std::size_t(i)] / float(n));  // pre-divided: the sum cannot overflow sooner
      delivered[std::size_t(i)] = from_half(format_, halves[std::size_t(i)]) * float(n);
    }
    std::vector<float> wire = pack(halves), incoming(static_cast<std::size_t>(c));
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    auto chunk = [&](int index) { return wire.data() + int64_t(mod(index, n)) * c; };
    for (int s = 0; s < n - 1; ++s) {  // scatter-reduce: add the left neighbour's partial sum into ours
      comm.sendrecv(chunk(r - s), c, right, incoming.data(), c, left);
      float* mine = chunk(r - s - 1);
      for (int64_t w = 0; w < c; ++w) {
        uint32_t sum = 0;
        for (int half = 0; half < 2; ++half) {
          const int shift = 16 * half;
          const float a = from_half(format_, uint16_t(bits_of(mine[w]) >> shift));
          const float b = from_half(format_, uint16_t(bits_of(incoming[std::size_t(w)]) >> shift));
          sum |= uint32_t(to_half(format_, a + b)) << shift;
        }
        mine[w] = word_of(sum);
      }
    }
    for (int s = 0; s < n - 1; ++s) {  // all-gather: pass the summed chunks round
      comm.sendrecv(chunk(r + 1 - s), c, right, incoming.data(), c, left);
      std::copy(incoming.begin(), incoming.end(), chunk(r - s));
    }
    const std::vector<uint16_t> summed = unpack(wire, psi);
    for (int64_t i = 0; i < psi; ++i) x[std::size_t(i)] = from_half(format_, summed[std::size_t(i)]);
  }
  std::string name() const override { return format_ == Half::FP16 ? "fp16" : "bf16"; }

 private:
  Half format_;
};

// ----------------------------------------------------------------------------
// topk:K: this rank's K largest |x| (ties: the lower index), as K index words
// then K values, all-gathered; the decode is the hole.
class TopK : public Compressor {
 public:
  explicit TopK(int64_t k) : k_(k) {}
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    std::vector<int64_t> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k_, order.end(), [&](int64_t a, int64_t b) {
      const float fa = std::fabs(x[std::size_t(a)]), fb = std::fabs(x[std::size_t(b)]);
      return fa > fb || (fa == fb && a < b);
    });
    std::vector<float> message(std::size_t(2 * k_)), gathered(std::size_t(2 * k_ * comm.size()));
    delivered.assign(x.size(), 0);
    for (int64_t j = 0; j < k_; ++j) {
      const std::size_t i = std::size_t(order[std::size_t(j)]);
      message[std::size_t(j)] = index_word(int64_t(i));
      message[std::size_t(k_ + j)] = x[i];
      delivered[i] = x[i];
    }
    comm.all_gather(message.data(), gathered.data(), 2 * k_);
    topk_reconstruct(gathered, comm.size(), k_, x);  // the hole
  }
  std::string name() const override { return "topk:" + std::to_string(k_); }

 private:
  int64_t k_;
};

// ----------------------------------------------------------------------------
// sign: per tensor, ceil(numel/32) words of sign bits (1: x >= 0) and one
// scale word mean|x|; a rank's tensor decodes to ±scale.
class ScaledSign : public Compressor {
 public:
  explicit ScaledSign(std::vector<int64_t> sizes) : sizes_(std::move(sizes)) {}
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    std::vector<float> message;
    for (int64_t at = 0, t = 0; t < int64_t(sizes_.size()); at += sizes_[std::size_t(t)], ++t) {
      const int64_t size = sizes_[std::size_t(t)];
      double magnitude = 0;
      for (int64_t i = 0; i < size; ++i) magnitude += std::fabs(x[std::size_t(at + i)]);
      for (int64_t w = 0; w < (size + 31) / 32; ++w) {
        uint32_t bits = 0;
        for (int64_t b = 0; b < 32 && 32 * w + b < size; ++b)
          if (x[std::size_t(at + 32 * w + b)] >= 0) bits |= 1u << b;
        message.push_back(word_of(bits));
      }
      message.push_back(size ? float(magnitude / double(size)) : 0.0f);
    }
    const int n = comm.size();
    std::vector<float> gathered(message.size() * std::size_t(n));
    comm.all_gather(message.data(), gathered.data(), int64_t(message.size()));
    std::fill(x.begin(), x.end(), 0.0f);
    delivered.assign(x.size(), 0.0f);
    for (int rank = 0; rank < n; ++rank) {  // in rank order: the same bits on every rank
      const float* row = gathered.data() + message.size() * std::size_t(rank);
      for (int64_t at = 0, t = 0; t < int64_t(sizes_.size()); at += sizes_[std::size_t(t)], ++t) {
        const int64_t size = sizes_[std::size_t(t)], words = (size + 31) / 32;
        const float scale = row[words];
        for (int64_t i = 0; i < size; ++i) {
          const float value = (bits_of(row[i / 32]) >> (i % 32)) & 1u ? scale : -scale;
          x[std::size_t(at + i)] += value;
          if (rank == comm.rank()) delivered[std::size_t(at + i)] = value;
        }
        row += words + 1;
      }
    }
    for (float& v : x) v /= float(n);
  }
  std::string name() const override { return "sign"; }

 private:
  std::vector<int64_t> sizes_;
};

// ----------------------------------------------------------------------------
// powersgd:R: each weight matrix through the hole, with its own Q kept from
// the last step (the warm start); the vectors in one uncompressed all_reduce.
class PowerSgd : public Compressor {
 public:
  PowerSgd(int64_t rank, const std::vector<Shape>& shapes, uint64_t seed) : rank_(rank), shapes_(shapes) {
    std::mt19937_64 generator(seed);
    std::normal_distribution<float> normal;
    for (const Shape& s : shapes_)
      if (s.size() == 2) {  // Q (cols, R), the same draws on every rank
        std::vector<float> q(std::size_t(s[1] * rank_));
        for (float& v : q) v = normal(generator);
        qs_.push_back(Tensor::from_vector({s[1], rank_}, q, Device::host()));
      }
  }
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    std::vector<float> vectors;
    std::size_t matrix = 0;
    int64_t at = 0;
    for (const Shape& s : shapes_) {
      const int64_t size = shape_numel(s);
      if (s.size() == 2) {
        Tensor approx, m = Tensor::from_vector(s, std::vector<float>(x.begin() + at, x.begin() + at + size), Device::host());
        powersgd_round(comm, m, qs_[matrix++], approx);  // the hole
        DPT_CHECK(approx.defined() && approx.shape() == s, "powersgd_round: approx must be " << shape_str(s) << ", got "
                                                                     << (approx.defined() ? shape_str(approx.shape()) : "none"));
        std::copy(approx.data(), approx.data() + size, x.begin() + at);
      } else {
        vectors.insert(vectors.end(), x.begin() + at, x.begin() + at + size);
      }
      at += size;
    }
    if (!vectors.empty()) comm.all_reduce(vectors.data(), int64_t(vectors.size()), ReduceOp::Avg);
    delivered = x;  // before the vectors are written back: this rank's own vector entries
    at = 0;
    std::size_t v = 0;
    for (const Shape& s : shapes_) {
      const int64_t size = shape_numel(s);
      if (s.size() != 2)
        for (int64_t i = 0; i < size; ++i) x[std::size_t(at + i)] = vectors[v++];
      at += size;
    }
  }
  std::string name() const override { return "powersgd:" + std::to_string(rank_); }

 private:
  int64_t rank_;
  std::vector<Shape> shapes_;
  std::vector<Tensor> qs_;  // each matrix's Q (cols, R), the warm start
};

// The integer after "name:" in a spec; throws a sentence when it is not one.
int64_t spec_number(const std::string& spec, std::size_t colon) {
  const std::string digits = spec.substr(colon + 1);
  DPT_CHECK(!digits.empty() && digits.size() <= 12 && digits.find_first_not_of("0123456789") == std::string::npos,
            spec << ": expects a whole number after ':', as in topk:100 or powersgd:2");
  return std::stoll(digits);
}

}  // namespace

std::unique_ptr<Compressor> make_compressor(const std::string& spec, const std::vector<Shape>& shapes, uint64_t seed) {
  int64_t psi = 0, smallest_side = -1;
  std::vector<int64_t> sizes;
  for (const Shape& s : shapes) {
    sizes.push_back(shape_numel(s));
    psi += sizes.back();
    if (s.size() == 2) smallest_side = smallest_side < 0 ? std::min(s[0], s[1]) : std::min({smallest_side, s[0], s[1]});
  }
  const std::size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  if (colon == std::string::npos && name == "none") return std::make_unique<NoCompression>();
  if (colon == std::string::npos && name == "fp16") return std::make_unique<Cast16>(Half::FP16);
  if (colon == std::string::npos && name == "bf16") return std::make_unique<Cast16>(Half::BF16);
  if (colon == std::string::npos && name == "sign") return std::make_unique<ScaledSign>(sizes);
  if (colon != std::string::npos && name == "topk") {
    const int64_t k = spec_number(spec, colon);
    DPT_CHECK(k >= 1 && k <= psi, spec << ": K must be from 1 to the model's " << psi
                                                << " parameters (K entries of the gradient are sent)");
    return std::make_unique<TopK>(k);
  }
  if (colon != std::string::npos && name == "powersgd") {
    const int64_t rank = spec_number(spec, colon);
    DPT_CHECK(smallest_side > 0, spec << ": the model has no weight matrix to compress");
    DPT_CHECK(rank >= 1 && rank <= smallest_side,
              spec << ": R must be from 1 to " << smallest_side
                            << ", the smallest side of the model's weight matrices (a rank-R factor of an a×b matrix needs R <= min(a, b))");
    return std::make_unique<PowerSgd>(rank, shapes, seed);
  }
  throw Error(spec + ": unknown compressor; expected none, fp16, bf16, topk:K, sign or powersgd:R");
}

}  // namespace dpt::ch10
