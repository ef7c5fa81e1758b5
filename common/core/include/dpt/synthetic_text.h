/// @file synthetic_text.h
/// @brief Text a model can learn, made from a seed, whose best possible loss
/// is known exactly: what the tests and a machine without the King James
/// Bible train on.
///
/// The alphabet is the K = 8 letters "abcdefgh", letter i standing for the
/// number i. Each letter after the first two is the letter two before it
/// plus a random step, modulo K:
///
///     x[t] = (x[t−2] + step[J]) mod 8,   J = 0, 1, 2, 3 with probability 1/2, 1/4, 1/8, 1/8
///
/// where the four distinct steps are drawn from the seed (the first two
/// letters are uniform). Given the letter two before it, the next letter is
/// one of four, with those probabilities; so no predictor can do better than
/// the entropy of J,
///
///     H = −Σ p_j ln p_j = (1/2)·ln 2 + (1/4)·ln 4 + 2·(1/8)·ln 8 = 1.75 bits = 1.75·ln 2 ≈ 1.2130 nats/char,
///
/// and every predictor that knows the rule reaches it: the entropy rate is
/// exact, not an estimate (each letter's conditional distribution given all
/// of the past is a permutation of p, whatever the past). A model that looks
/// at the last letter only learns nothing: the even and the odd positions are
/// two independent chains, so the next letter is uniform given x[t−1] alone,
/// and its best loss is ln 8 ≈ 2.079 nats, the loss of guessing. The gap
/// between 2.079 and 1.213 is what attending one letter further back buys: a
/// fixed offset, which a small transformer's attention finds within a few
/// hundred steps (an earlier rule, x[t−1] + x[t−2] + step, asked for modular
/// addition of two letters, and the chapter's 150 steps did not find it).
///
/// Left out: spaces and lines (the samples read as a stream of letters).
#pragma once

#include <cstdint>
#include <string>

namespace dpt {

/// The synthetic text's letters, in token order.
inline const char* const kSyntheticAlphabet = "abcdefgh";

/// `characters` letters of the text above (ASCII, no newline); the same seed
/// gives the same text on every machine, another seed another rule (steps).
std::string make_synthetic_text(int64_t characters, uint64_t seed);

/// H, the best possible mean loss per character on synthetic text, in nats:
/// 1.75·ln 2, from the probabilities above.
double synthetic_entropy_nats();

}  // namespace dpt
