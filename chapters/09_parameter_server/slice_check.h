// slice_check.h — the slice check: does every server receive exactly the
// slice of the gradient it holds, and does every worker put every answer
// back where it belongs? A run's parameters cannot show it with one server:
// its slice is the whole gradient, at offset 0, so a slice taken from the
// wrong place looks right. Not a hole: it calls your push_and_pull.
#pragma once

#include <string>

#include "ch09.h"
#include "dpt/launch.h"

namespace dpt::ch09 {

/// The servers the slice check runs with when the run has `servers` of
/// `world` ranks: `servers`, but at least 2 when there are 3 ranks or more.
int slice_check_servers(int servers, int world);

/// Collective: ranks 0 … S−1 (S = `servers`) are servers of Ψ = `count`
/// parameters, the others workers. Each worker calls push_and_pull once with a
/// gradient whose element i holds i + 1; each server receives every worker's
/// push (its shard's length, workers in order), then answers each with −(i + 1)
/// for its elements i. Returns on rank 0 the first thing that went wrong, in
/// words ("" when every server received exactly grad[shard(s)] and every
/// worker holds every answer at its shard's place); "" on the other ranks. A
/// push of another length stops the run with the protocol's error.
std::string check_slices(Context& ctx, int64_t count, int servers);

}  // namespace dpt::ch09
