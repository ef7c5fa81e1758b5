// draw_ring.h — chapter 04's --explain: the student's ring drawn step by step.
#pragma once

#include "dpt/launch.h"

/// Runs ring_scatter_reduce then ring_all_gather on a vector of one element
/// per chunk (rank r contributes 2^r) through a watching communicator, and
/// rank 0 prints each step's grid: whose contributions every rank's copy of
/// every chunk sums, * on what arrived in the step. Collective.
/// Rank 0 prints only when `print`.
void draw_ring(dpt::Context& ctx, bool print);
