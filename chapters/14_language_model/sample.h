/// @file sample.h
/// @brief Text from the model: one character at a time, each drawn from the
/// model's distribution for the next one given the last T.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/nn.h"
#include "gpt.h"

/// `prompt` followed by `count` tokens drawn one by one from softmax(logits /
/// temperature) of the last position, the model seeing at most its context.
std::vector<int64_t> generate(const Gpt& model, const std::vector<int64_t>& prompt, int64_t count, float temperature,
                              dpt::Rng& rng);
