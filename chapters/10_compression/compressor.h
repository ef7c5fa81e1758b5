/// @file compressor.h
/// @brief Gradient compressors behind one small interface (provided, not
/// holes): `--compress none|fp16|bf16|topk:K|sign|powersgd:R`. Each turns
/// every rank's flat gradient (Ψ,) into a message, sends it through the
/// communicator (so the traffic log counts its bytes), and returns the mean
/// of what the messages stand for.
///
///   none         library all_reduce (Avg) of Ψ floats
///   fp16, bf16   x/n cast to 16 bits, summed on a ring of 16-bit words:
///                each hop adds in float32 and rounds the partial sum back to
///                16 bits (as an fp16 all-reduce on a GPU does)
///   topk:K       the K entries of largest |x| as (index, value) pairs,
///                all-gathered (a sparse sum is not a ring: two ranks' pairs
///                may share an index), then ch10::topk_reconstruct
///   sign         per tensor: one sign bit per entry and one scale mean|x|
///                (scaled signSGD), all-gathered, decoded, averaged
///   powersgd:R   per weight matrix: ch10::powersgd_round with a Q that is
///                warm-started from the last step; vectors (biases) go
///                uncompressed in one all_reduce
///
/// Left out: compressing on a GPU (the compressors work on host vectors),
/// majority-vote signSGD, bucketing the messages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/tensor.h"

namespace dpt::ch10 {

/// One rank's compressor; every rank holds one built from the same spec.
class Compressor {
 public:
  virtual ~Compressor() = default;
  /// Collective. On entry `x` (Ψ,) is this rank's vector. On return `x` is
  /// the mean over ranks of what the ranks' messages deliver (the same bits
  /// on every rank), and `delivered` (Ψ,) is the part of this rank's input
  /// the step delivered: its own message decoded (fp16, bf16, topk, sign), or
  /// the shared approximation (powersgd, whose messages mix all ranks), or x
  /// itself (none). The mean of `delivered` over ranks is the returned `x`
  /// (up to the 16-bit sums' rounding for fp16/bf16).
  virtual void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) = 0;
  /// The spec it was built from ("topk:100").
  virtual std::string name() const = 0;
};

/// A compressor from `spec` for a model whose parameters have `shapes`, in
/// order (their sizes add up to Ψ). `seed` seeds PowerSGD's first Q, the same
/// on every rank. Throws dpt::Error with a sentence on a bad spec: an unknown
/// name, topk:K with K outside 1…Ψ, powersgd:R with R outside 1…the smallest
/// side of the model's weight matrices.
std::unique_ptr<Compressor> make_compressor(const std::string& spec, const std::vector<Shape>& shapes, uint64_t seed);

/// The word an index travels as in a top-k message (its bits: exact up to 2^31).
float index_word(int64_t index);
/// The index a top-k message's word stands for (see index_word).
int64_t word_index(float word);

}  // namespace dpt::ch10
