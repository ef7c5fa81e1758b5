// test_text_tokens.cpp — characters as tokens (UTF-8 code points, the sorted
// vocabulary, encode and decode) and the synthetic text's rule and entropy.
#include "support/catch.h"

#include <cmath>
#include <map>
#include <set>

#include "dpt/synthetic_text.h"
#include "dpt/vocabulary.h"

using namespace dpt;

TEST_CASE("text tokens: UTF-8 decodes to the code points a table gives", "[text]") {
  // "aé€😀": U+61, U+E9 (C3 A9), U+20AC (E2 82 AC), U+1F600 (F0 9F 98 80), from Unicode's tables.
  std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  CHECK(utf8_characters(text) == std::vector<char32_t>{0x61, 0xE9, 0x20AC, 0x1F600});
  CHECK(utf8_string({0x61, 0xE9, 0x20AC, 0x1F600}) == text);
  CHECK(utf8_problem(text).empty());
}

TEST_CASE("text tokens: text that is not UTF-8 is refused with a sentence naming the byte", "[text]") {
  struct Case { std::string bytes, says; };
  for (const Case& c : {Case{"ab\xFF", "byte 0xFF at offset 2 (line 1) starts no UTF-8 character"},
                        Case{"x\n\x80", "byte 0x80 at offset 2 (line 2) starts no UTF-8 character"},
                        Case{"ab\xC3", "ends inside a UTF-8 character begun at offset 2"},
                        Case{"\xC3(", "byte 0xC3 at offset 0 (line 1) begins a UTF-8 character that byte 0x28 at offset 1 does not continue"},
                        Case{"\xC0\xAF", "overlong"},
                        Case{"\xED\xA0\x80", "U+D800"},
                        Case{"\xF4\x90\x80\x80", "U+110000"}}) {
    INFO("bytes of '" << c.bytes << "'");
    CHECK_THAT(utf8_problem(c.bytes), contains_text(c.says));
    CHECK_THROWS_WITH(utf8_characters(c.bytes), contains_text(c.says));
  }
}

TEST_CASE("text tokens: the vocabulary is the sorted distinct characters, decode(encode(t)) = t", "[text]") {
  std::string text = "the caf\xC3\xA9, the \xE2\x82\xAC and a \xF0\x9F\x98\x80\nthe end";
  std::vector<char32_t> characters = utf8_characters(text);
  Vocabulary vocab = Vocabulary::of(characters);
  std::set<char32_t> distinct(characters.begin(), characters.end());  // std::set: sorted, once each
  CHECK(vocab.characters() == std::vector<char32_t>(distinct.begin(), distinct.end()));
  std::vector<int64_t> tokens = vocab.encode(characters);
  REQUIRE(tokens.size() == characters.size());  // a token per character, not per byte
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    REQUIRE(tokens[i] >= 0);
    REQUIRE(tokens[i] < vocab.size());
    CHECK(vocab.characters()[std::size_t(tokens[i])] == characters[i]);
  }
  CHECK(vocab.decode(tokens) == text);
  CHECK(vocab.encode(utf8_characters("\n")) == std::vector<int64_t>{0});  // '\n' is the smallest character here
  CHECK(Vocabulary::from_utf8(vocab.characters_utf8()).characters() == vocab.characters());
}

TEST_CASE("text tokens: unknown characters, tokens out of range, an edited vocabulary are refused", "[text]") {
  Vocabulary vocab = Vocabulary::of(utf8_characters("abc"));
  CHECK_THROWS_WITH(vocab.encode(utf8_characters("abd")), contains_text("'d' (U+64) at position 2 is not in the 3-character vocabulary"));
  CHECK_THROWS_WITH(vocab.decode({0, 3}), contains_text("token 3 at position 1 is outside the vocabulary [0, 3)"));
  CHECK_THROWS_WITH(Vocabulary::from_utf8("acb", "the vocabulary in 'w.safetensors'"),
                    contains_text("the vocabulary in 'w.safetensors' should list its characters once each in ascending order"));
  CHECK_THROWS_WITH(Vocabulary::from_utf8("aab"), contains_text("ascending"));
  CHECK_THROWS_WITH(Vocabulary::from_utf8("a\xFF"), contains_text("is not UTF-8"));
}

// ----------------------------------------------------------------------------
// synthetic text

namespace {
// Plug-in conditional entropy H(x[t] | the `order` letters before it), in nats.
double conditional_entropy(const std::string& text, int order) {
  std::map<std::string, std::map<char, double>> counts;
  for (std::size_t t = std::size_t(order); t < text.size(); ++t) counts[text.substr(t - std::size_t(order), std::size_t(order))][text[t]] += 1;
  double n = double(text.size() - std::size_t(order)), h = 0;
  for (auto& [context, next] : counts) {
    double total = 0;
    for (auto& [c, k] : next) total += k;
    for (auto& [c, k] : next) h -= k / n * std::log(k / total);
  }
  return h;
}
}  // namespace

TEST_CASE("synthetic text: the same seed gives the same text, letters a to h only", "[text]") {
  std::string a = make_synthetic_text(5000, 3);
  CHECK(a == make_synthetic_text(5000, 3));
  CHECK(a != make_synthetic_text(5000, 4));
  CHECK(make_synthetic_text(100, 3) == a.substr(0, 100));  // a prefix does not depend on the length asked
  CHECK(a.find_first_not_of("abcdefgh") == std::string::npos);
  CHECK(std::string(kSyntheticAlphabet) == "abcdefgh");
}

TEST_CASE("synthetic text: its measured entropy is 1.75 bits a character, the formula's", "[text]") {
  // The formula by hand: -(1/2 ln 1/2 + 1/4 ln 1/4 + 2 * 1/8 ln 1/8) = 1.75 ln 2.
  const double best = 1.75 * std::log(2.0), guessing = std::log(8.0);
  CHECK(synthetic_entropy_nats() == Approx(best).epsilon(1e-12));
  // Measured on 400,000 letters, given the two letters before: the plug-in
  // estimate's bias is about 64 contexts * 3 / (2 * 400,000) ≈ 2.4e-4 nats and
  // its standard error about 0.6 / sqrt(400,000) ≈ 1e-3, so 0.01 is ~10 of
  // them; a rule with probabilities 1/2, 1/4, 1/4 (1.5 bits) is 0.17 away.
  // Given one letter only, the next is uniform: ln 8, what guessing scores.
  for (uint64_t seed : {1, 2, 42}) {
    std::string text = make_synthetic_text(400000, seed);
    INFO("seed " << seed);
    CHECK(std::abs(conditional_entropy(text, 2) - best) < 0.01);
    CHECK(std::abs(conditional_entropy(text, 1) - guessing) < 0.01);
    CHECK(std::abs(conditional_entropy(text, 0) - guessing) < 0.01);
  }
}
