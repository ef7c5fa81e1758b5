/// @file sync_batch_norm.h
/// @brief Chapter 03's batch norm across ranks: the BatchStatistics
/// (dpt/ops.h) that hands the two SyncBatchNorm holes of ch03.h
/// (sync_batch_moments, sync_gradient_sums) to the model
/// (MLP::set_batch_statistics).
///
/// With --batchnorm local, each rank normalizes by its own shard's mean and
/// variance: N ranks × batch M then compute something else than one device ×
/// batch N·M, and the step check shows by how much. SyncBatchNorm normalizes
/// every rank's rows by the statistics of the whole global batch, and in
/// backward combines the two sums the input's gradient needs over the whole
/// batch too, which makes data parallel one device again.
#pragma once

#include "ch03.h"

namespace dpt::ch03 {

/// The BatchStatistics of SyncBatchNorm: ch03.h's two holes over `comm`.
/// Attach it with replica.set_batch_statistics(&sync); it must outlive the
/// training run. Every rank must run the same forwards and backwards.
class SyncBatchStatistics : public BatchStatistics {
 public:
  /// Statistics over every rank of `comm`.
  explicit SyncBatchStatistics(Communicator& comm) : comm_(comm) {}
  /// sync_batch_moments(comm, local).
  BatchMoments combine(const BatchMoments& local) override { return sync_batch_moments(comm_, local); }
  /// sync_gradient_sums(comm, …).
  void combine_gradient_sums(Tensor& sum_dy, Tensor& sum_dy_xhat) override {
    sync_gradient_sums(comm_, sum_dy, sum_dy_xhat);
  }

 private:
  Communicator& comm_;
};

}  // namespace dpt::ch03
