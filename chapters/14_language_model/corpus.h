/// @file corpus.h
/// @brief Chapter 14's text: dpt's text data (text_corpus.h: --data
/// kjv|synthetic|text:FILE, characters as tokens, the last tenth held out)
/// and the windows each replica takes (text_windows.h), in the chapter's terms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/text_corpus.h"
#include "dpt/text_windows.h"

/// The text a run trains on.
struct Corpus {
  std::string name;            ///< what --data named ("kjv", "synthetic", "text:FILE")
  std::string description;     ///< a line for the lecture ("the King James Bible …, 4,137,850 characters")
  dpt::Vocabulary vocabulary;  ///< V characters, token i = the i-th in code-point order
  std::vector<int64_t> train;     ///< the first 90 %
  std::vector<int64_t> held_out;  ///< the last 10 %
  /// V, the number of tokens.
  int64_t vocab() const { return vocabulary.size(); }
};

/// The text --data names ("auto": kjv where Debian's bible-kjv is installed,
/// else synthetic), checked long enough for windows of `context`.
Corpus load_text(const std::string& data, int64_t context, uint64_t seed);
/// Tokens → UTF-8 text.
std::string decode(const Corpus& text, const std::vector<int64_t>& tokens);
/// UTF-8 text → tokens; a character outside the vocabulary is an error naming it.
std::vector<int64_t> encode(const Corpus& text, const std::string& characters);
/// Collective: every rank holds the same text (a hash of its tokens and
/// vocabulary against rank 0's); otherwise dpt::Error naming the first rank
/// that differs (under mpirun each process reads its own files).
void check_same_text(dpt::Communicator& comm, const Corpus& text);
/// The held-out text's first whole line (40 characters at most), after its
/// first line break: the sample's prompt by default.
std::string default_prompt(const Corpus& text);
