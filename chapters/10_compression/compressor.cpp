// compressor.cpp — the compressors of compressor.h: none, the 16-bit ring,
// top-k, scaled sign, PowerSGD. Each message goes through the communicator as
// 32-bit words, so the traffic log counts exactly what a compressor sends.
#include "compressor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "ch10.h"
#include "dpt/check.h"
#include "dpt/range.h"
#include "fast_casts.h"
#include "formats.h"
#include "topk_select.h"

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
// The casts are fast_casts.h's array loops: the same bits as to_half and
// from_half (formats.h), at memory speed.
class Cast16 : public Compressor {
 public:
  explicit Cast16(Half format) : format_(format) {}
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    const int n = comm.size(), r = comm.rank();
    const int64_t psi = int64_t(x.size()), words = (psi + 1) / 2, c = (words + n - 1) / n;
    // The wire: n chunks of c words, two halves a word, the first in the low
    // bits (pack's layout: memory order on a little-endian CPU). A member,
    // kept from call to call: a fresh 1 MB vector costs more in page faults
    // than the casts. Blocks of kBlock values keep the steps in L1.
    wire_.resize(std::size_t(c * n));
    char* wire_bytes = reinterpret_cast<char*>(wire_.data());
    std::memset(wire_bytes + 2 * psi, 0, std::size_t(4 * c * n - 2 * psi));  // the padding
    delivered.resize(x.size());
    for (int64_t at = 0; at < psi; at += kBlock) {  // x/n in 16 bits, and what it stands for
      const int64_t len = std::min(kBlock, psi - at);
      float f[kBlock];
      uint16_t h[kBlock];
      for (int64_t i = 0; i < len; ++i) f[i] = x[std::size_t(at + i)] / float(n);  // pre-divided: the sum cannot overflow sooner
      to_halves(f, h, len);
      std::memcpy(wire_bytes + 2 * at, h, std::size_t(2 * len));
      from_halves(h, f, len);
      for (int64_t i = 0; i < len; ++i) delivered[std::size_t(at + i)] = f[i] * float(n);
    }
    std::vector<float> incoming(static_cast<std::size_t>(c));
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    auto chunk = [&](int index) { return wire_.data() + int64_t(mod(index, n)) * c; };
    for (int s = 0; s < n - 1; ++s) {  // scatter-reduce: add the left neighbour's partial sum into ours
      comm.sendrecv(chunk(r - s), c, right, incoming.data(), c, left);
      add_halves(chunk(r - s - 1), incoming.data(), 2 * c);
    }
    for (int s = 0; s < n - 1; ++s) {  // all-gather: pass the summed chunks round
      comm.sendrecv(chunk(r + 1 - s), c, right, incoming.data(), c, left);
      std::copy(incoming.begin(), incoming.end(), chunk(r - s));
    }
    for (int64_t at = 0; at < psi; at += kBlock) {  // the sums, back to float
      const int64_t len = std::min(kBlock, psi - at);
      uint16_t h[kBlock];
      std::memcpy(h, wire_bytes + 2 * at, std::size_t(2 * len));
      from_halves(h, x.data() + at, len);
    }
  }
  std::string name() const override { return format_ == Half::FP16 ? "fp16" : "bf16"; }

 private:
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Cast16 reads pack()'s words as uint16 pairs in memory order");
  static constexpr int64_t kBlock = 1024;
  void to_halves(const float* from, uint16_t* to, int64_t count) const {
    format_ == Half::FP16 ? to_fp16_many(from, to, count) : to_bf16_many(from, to, count);
  }
  void from_halves(const uint16_t* from, float* to, int64_t count) const {
    format_ == Half::FP16 ? from_fp16_many(from, to, count) : from_bf16_many(from, to, count);
  }
  // The `count` halves in `mine` become round(mine + incoming): added in float32, rounded back.
  void add_halves(float* mine, const float* incoming, int64_t count) const {
    char* mine_bytes = reinterpret_cast<char*>(mine);
    const char* incoming_bytes = reinterpret_cast<const char*>(incoming);
    for (int64_t at = 0; at < count; at += kBlock) {
      const int64_t len = std::min(kBlock, count - at);
      uint16_t a[kBlock], b[kBlock];
      float sum[kBlock], addend[kBlock];
      std::memcpy(a, mine_bytes + 2 * at, std::size_t(2 * len));
      std::memcpy(b, incoming_bytes + 2 * at, std::size_t(2 * len));
      from_halves(a, sum, len);
      from_halves(b, addend, len);
      for (int64_t i = 0; i < len; ++i) sum[i] += addend[i];
      to_halves(sum, a, len);
      std::memcpy(mine_bytes + 2 * at, a, std::size_t(2 * len));
    }
  }
  Half format_;
  std::vector<float> wire_;
};

// ----------------------------------------------------------------------------
// topk:K: this rank's K largest |x| (ties: the lower index; topk_select.h),
// in index order as K index words then K values, all-gathered; the decode is
// the hole.
class TopK : public Compressor {
 public:
  explicit TopK(int64_t k) : k_(k) {}
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    const std::vector<int64_t> chosen = top_k_indices(x, k_);
    std::vector<float> message(std::size_t(2 * k_)), gathered(std::size_t(2 * k_ * comm.size()));
    delivered.assign(x.size(), 0);
    for (int64_t j = 0; j < k_; ++j) {
      const std::size_t i = std::size_t(chosen[std::size_t(j)]);
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
// scale word mean|x|; a rank's tensor decodes to ±scale. The loops run over
// whole 32-entry words so that a compiler vectorizes them.
class ScaledSign : public Compressor {
 public:
  explicit ScaledSign(std::vector<int64_t> sizes) : sizes_(std::move(sizes)) {}
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    std::vector<float> message;
    for (int64_t at = 0, t = 0; t < int64_t(sizes_.size()); at += sizes_[std::size_t(t)], ++t) {
      const int64_t size = sizes_[std::size_t(t)];
      const float* v = x.data() + at;
      for (int64_t w = 0; w < (size + 31) / 32; ++w) {
        uint32_t bits = 0;
        const int64_t width = std::min<int64_t>(32, size - 32 * w);
        for (int64_t b = 0; b < width; ++b) bits |= uint32_t(v[32 * w + b] >= 0) << b;
        message.push_back(word_of(bits));
      }
      message.push_back(size ? float(mean_magnitude(v, size)) : 0.0f);
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
        decode(row, row[words], size, x.data() + at, true);
        if (rank == comm.rank()) decode(row, row[words], size, delivered.data() + at, false);
        row += words + 1;
      }
    }
    for (float& v : x) v /= float(n);
  }
  std::string name() const override { return "sign"; }

 private:
  // mean |v| over (size,), summed in double in 8 interleaved lanes (a
  // vector's worth; in double the order changes the mean by ~1e-16·size
  // relative, far below the float it is rounded to).
  static double mean_magnitude(const float* v, int64_t size) {
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= size; i += 8)
      for (int j = 0; j < 8; ++j) lane[j] += std::fabs(v[i + j]);
    for (; i < size; ++i) lane[0] += std::fabs(v[i]);
    return (((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]))) / double(size);
  }
  // out[i] = (or, accumulating, +=) ±scale for i < size, + where bit i of the words is set.
  static void decode(const float* words, float scale, int64_t size, float* out, bool accumulate) {
    for (int64_t w = 0; w < (size + 31) / 32; ++w) {
      const uint32_t bits = bits_of(words[w]);
      const int64_t width = std::min<int64_t>(32, size - 32 * w);
      for (int64_t b = 0; b < width; ++b) {
        const float value = (bits >> b) & 1u ? scale : -scale;
        out[32 * w + b] = accumulate ? out[32 * w + b] + value : value;
      }
    }
  }
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
        Tensor approx, m = Tensor::empty(s, Device::host());
        std::copy(x.begin() + at, x.begin() + at + size, m.data());
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
