/// @file bytes_and_plot.h
/// @brief Chapter 10's report (provided, not a hole): each compressor's bytes
/// per step written out as a formula (from the message layouts in
/// compressor.h, not from its code), what the traffic log measured, the
/// PowerSGD full-rank check, and the accuracy-against-bytes plot.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/tensor.h"

namespace dpt::ch10 {

/// Bytes one rank hands to the communicator per step under `spec` (Ψ = Σ numel):
///   none           4Ψ                               (all_reduce)
///   fp16, bf16     2(n−1) · ⌈⌈Ψ/2⌉/n⌉ · 4           (ring messages of 16-bit pairs)
///   topk:K         8K                               (all_gather: K indices + K values)
///   sign           Σ_tensors 4 (⌈numel/32⌉ + 1)     (all_gather: sign bits + a scale)
///   powersgd:R     Σ_matrices 4R(rows + cols) + 4 Σ_vectors numel   (all_reduce)
double payload_formula(const std::string& spec, const std::vector<Shape>& shapes, int world);

/// payload_formula's bytes as a rank puts them on the wire when the library
/// collectives are rings: 2(n−1)/n of an all_reduce payload (none, powersgd),
/// (n−1)× an all_gather payload (topk, sign); fp16/bf16's ring messages as they are.
double wire_formula(const std::string& spec, const std::vector<Shape>& shapes, int world);

/// What the traffic log says rank `rank` handed over per step: its
/// point-to-point bytes plus its all_reduce and all_gather payloads, less
/// the 4 bytes per step of the loop's own loss all_reduce.
double measured_payload(const TrafficLog& traffic, int rank, int64_t steps);

/// Bytes rank `rank` puts on the wire per step when the library collectives
/// are rings: 2(n−1)/n of an all_reduce payload, (n−1)× an all_gather
/// payload, point-to-point bytes as they are (the loss all_reduce left out).
double wire_bytes(const TrafficLog& traffic, int rank, int64_t steps);

/// What a probe of a hole on known inputs measured.
struct HoleProbe {
  std::string hole;              ///< the hole's NotImplemented message when it is not written yet, else ""
  double error = std::nan("");   ///< the probe's relative error (rank 0; 0 elsewhere)
  double factors = std::nan(""); ///< PowerSGD only: max |approxᵀ approx − q qᵀ| / max |q qᵀ| (rank 0)
};

/// Collective: PowerSGD at full rank on random per-rank matrices of each
/// weight shape in `shapes` (rank r's from seed + r, so every rank can
/// rebuild all of them). `error`: the largest |approx − mean_r M_r| / max
/// |mean M| over the matrices, the mean computed serially in double here.
/// `factors`: whether the returned approx and q are of the contract's form
/// approx = P qᵀ with PᵀP = I, which holds exactly when approxᵀ approx =
/// q qᵀ; seen here along 8 random directions z (|approx z|'s Gram against
/// |qᵀ z|'s), the largest gap over the matrices relative to the largest
/// entry. Both on rank 0 alone (n matrices, not n² over the ranks; 0
/// elsewhere); `hole` set, on every rank, when a hole is not written.
HoleProbe powersgd_full_rank_probe(Communicator& comm, const std::vector<Shape>& shapes, uint64_t seed);

/// Collective: top-k's decode on random per-rank vectors of Ψ entries whose
/// largest entries overlap between ranks (rank r's from seed + r): `error`,
/// the largest |decoded − the serial mean of every rank's top-k| relative to
/// the largest entry, the top-k found here by a full sort, on rank 0 alone
/// (0 elsewhere); `hole` set, on every rank, when a hole is not written.
HoleProbe topk_decode_probe(Communicator& comm, int64_t psi, int64_t k, uint64_t seed);

/// One point of the plot.
struct PlotPoint {
  std::string label;   ///< "topk:2035 +EF"
  double bytes = 0;    ///< wire bytes per rank per step
  double accuracy = 0; ///< held-out accuracy, 0…1
  bool error_feedback = false;  ///< drawn filled
};
/// Writes an SVG: held-out accuracy against wire bytes per step (log axis),
/// one point per setting, filled with error feedback, hollow without.
void write_accuracy_plot(const std::string& path, const std::string& title, const std::vector<PlotPoint>& points);

}  // namespace dpt::ch10
