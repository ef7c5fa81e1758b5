/// @file vocabulary.h
/// @brief Characters as tokens: UTF-8 text to Unicode code points, and the
/// vocabulary that numbers the distinct characters of a corpus.
///
/// A token is one *character* (a Unicode code point), not one byte: a
/// character-level model should never emit half of "é", and "bits per
/// character" should mean characters. For ASCII text (the King James Bible)
/// the two coincide. The vocabulary is the corpus's distinct characters in
/// ascending code-point order, so token i is the i-th smallest character; the
/// same text gives the same numbering on every machine, and the vocabulary
/// travels with the weights as the UTF-8 string of its characters
/// (text_corpus.h).
///
///     Vocabulary vocab = Vocabulary::of(utf8_characters(text));   // sorted distinct characters
///     std::vector<int64_t> ids = vocab.encode(utf8_characters("In the"));  // each in [0, V)
///     std::string back = vocab.decode(ids);                       // "In the"
///
/// Left out: normalisation (é as one code point or as e + ◌́ are different
/// texts here), grapheme clusters, byte-pair merges.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpt {

/// The code points of UTF-8 `text`, in order. Throws dpt::Error with one
/// sentence naming the first offending byte's offset and line when `text` is
/// not UTF-8: a stray continuation byte, a truncated sequence, an overlong
/// form, a surrogate (U+D800–U+DFFF) or a value past U+10FFFF.
std::vector<char32_t> utf8_characters(const std::string& text);
/// Why `text` is not UTF-8, as the sentence utf8_characters would throw, or
/// "" when it is: for a caller that names the file in front of it.
std::string utf8_problem(const std::string& text);

/// The UTF-8 bytes of `characters` (each a valid code point).
std::string utf8_string(const std::vector<char32_t>& characters);

/// The distinct characters of a corpus, numbered in ascending code-point order.
class Vocabulary {
 public:
  /// The distinct characters of `corpus`, sorted. An empty corpus gives an empty vocabulary.
  static Vocabulary of(const std::vector<char32_t>& corpus);
  /// The vocabulary whose characters are those of UTF-8 `characters`, which
  /// must be strictly ascending (what `characters_utf8()` writes); throws
  /// dpt::Error naming `origin` otherwise: a saved vocabulary that was edited
  /// is refused.
  static Vocabulary from_utf8(const std::string& characters, const std::string& origin = "a saved vocabulary");

  /// V, the number of tokens.
  int64_t size() const { return int64_t(characters_.size()); }
  /// The characters, token 0 first.
  const std::vector<char32_t>& characters() const { return characters_; }
  /// The characters as one UTF-8 string, token 0 first (how it is saved).
  std::string characters_utf8() const { return utf8_string(characters_); }

  /// Token of each character, each in [0, V). Throws dpt::Error naming the
  /// first character that is not in the vocabulary.
  std::vector<int64_t> encode(const std::vector<char32_t>& text) const;
  /// UTF-8 text of `tokens`, each in [0, V) (else dpt::Error). decode(encode(t)) == t.
  std::string decode(const std::vector<int64_t>& tokens) const;

 private:
  std::vector<char32_t> characters_;  // strictly ascending
};

}  // namespace dpt
