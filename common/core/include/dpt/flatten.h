/// @file flatten.h
/// @brief Many tensors as one flat buffer and back: one all-reduce payload
/// for all of a model's gradients, a host vector or a tensor on a device.
///
///     std::vector<float> saved = dpt::flatten(params);  // (Σ numel,), on the host
///     ...                                                // train on; params change
///     dpt::unflatten(saved, params);                     // each back as it was
///
/// Order is the vector's order; tensors may live on any devices. Left out:
/// padding and alignment (a slice starts where the previous one ended).
#pragma once

#include <vector>

#include "dpt/tensor.h"

namespace dpt {

/// Copies tensors (any devices) into one host vector, in order: (Σ numel,).
std::vector<float> flatten(const std::vector<Tensor>& tensors);
/// Copies consecutive slices of `flat` back into `tensors` (sizes must add up).
void unflatten(const std::vector<float>& flat, std::vector<Tensor>& tensors);

/// One new (Σ numel,) tensor on `device` holding `tensors` (any devices) back
/// to back, in order, filled with device copies: no host round trip when they
/// live on `device`'s GPU. Counted as comm buffers (memory_ledger.h).
/// On a GPU the copies are queued on the calling thread's current stream
/// (gpu.h): a Communicator call on the result waits for them.
Tensor flatten_on(const std::vector<Tensor>& tensors, Device& device);
/// flatten_on into an existing tensor: `flat` (Σ numel floats, any shape)
/// receives `tensors` back to back. Sizes must add up.
void flatten_into(const std::vector<Tensor>& tensors, Tensor& flat);
/// Copies consecutive slices of `flat` (any device) back into `tensors` (any
/// devices); sizes must add up. Device to device on a GPU: queued on the
/// current stream, in order after whatever wrote `flat` there.
void unflatten(const Tensor& flat, std::vector<Tensor>& tensors);

}  // namespace dpt
