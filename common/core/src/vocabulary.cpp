// vocabulary.cpp — UTF-8 to code points and back, and the sorted character table.
#include "dpt/vocabulary.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "dpt/check.h"

namespace dpt {

// ----------------------------------------------------------------------------
// UTF-8 (RFC 3629): 1 to 4 bytes, the first says how many follow, each
// follower is 10xxxxxx; the shortest form only, no surrogates, ≤ U+10FFFF.

namespace {
std::string hex_byte(unsigned char b) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02X", b);
  return text;
}

// "offset 1234 (line 5)": where a reader finds the bad byte with a hex editor or an editor.
std::string where(const std::string& text, std::size_t offset) {
  int64_t line = 1 + std::count(text.begin(), text.begin() + std::ptrdiff_t(offset), '\n');
  return "offset " + std::to_string(offset) + " (line " + std::to_string(line) + ")";
}
}  // namespace

namespace {
// Decodes `text` into `out`; on the first bad byte returns why, as a sentence.
std::string decode_utf8(const std::string& text, std::vector<char32_t>* out) {
  std::ostringstream problem;
  out->reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    unsigned char lead = static_cast<unsigned char>(text[i]);
    int followers = lead < 0x80 ? 0 : (lead & 0xE0) == 0xC0 ? 1 : (lead & 0xF0) == 0xE0 ? 2 : (lead & 0xF8) == 0xF0 ? 3 : -1;
    if (followers < 0) {
      problem << "byte " << hex_byte(lead) << " at " << where(text, i)
              << " starts no UTF-8 character (a stray continuation byte, or not UTF-8)";
      return problem.str();
    }
    if (i + std::size_t(followers) >= text.size()) {
      problem << "the text ends inside a UTF-8 character begun at " << where(text, i) << " (a truncated file?)";
      return problem.str();
    }
    char32_t c = followers == 0 ? lead : lead & (0x3F >> followers);
    for (int k = 1; k <= followers; ++k) {
      unsigned char next = static_cast<unsigned char>(text[i + std::size_t(k)]);
      if ((next & 0xC0) != 0x80) {
        problem << "byte " << hex_byte(lead) << " at " << where(text, i) << " begins a UTF-8 character that byte "
                << hex_byte(next) << " at offset " << i + std::size_t(k) << " does not continue";
        return problem.str();
      }
      c = (c << 6) | (next & 0x3F);
    }
    static const char32_t smallest[] = {0, 0x80, 0x800, 0x10000};  // below it: an overlong form
    if (c < smallest[followers]) {
      problem << "an overlong UTF-8 form at " << where(text, i) << " (not valid UTF-8)";
      return problem.str();
    }
    if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
      problem << "code point U+" << std::hex << std::uppercase << uint32_t(c) << std::dec << " at " << where(text, i)
              << " is not a character (a surrogate or past U+10FFFF)";
      return problem.str();
    }
    out->push_back(c);
    i += 1 + std::size_t(followers);
  }
  return "";
}
}  // namespace

std::vector<char32_t> utf8_characters(const std::string& text) {
  std::vector<char32_t> out;
  std::string problem = decode_utf8(text, &out);
  DPT_CHECK(problem.empty(), problem);
  return out;
}

std::string utf8_problem(const std::string& text) {
  std::vector<char32_t> out;
  return decode_utf8(text, &out);
}

std::string utf8_string(const std::vector<char32_t>& characters) {
  std::string out;
  out.reserve(characters.size());
  for (char32_t c : characters) {
    DPT_CHECK(c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF), "U+" << std::hex << uint32_t(c) << " is not a character");
    if (c < 0x80) {
      out += char(c);
    } else if (c < 0x800) {
      out += char(0xC0 | (c >> 6));
      out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += char(0xE0 | (c >> 12));
      out += char(0x80 | ((c >> 6) & 0x3F));
      out += char(0x80 | (c & 0x3F));
    } else {
      out += char(0xF0 | (c >> 18));
      out += char(0x80 | ((c >> 12) & 0x3F));
      out += char(0x80 | ((c >> 6) & 0x3F));
      out += char(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// ----------------------------------------------------------------------------
// the vocabulary: token i = the i-th smallest distinct character

Vocabulary Vocabulary::of(const std::vector<char32_t>& corpus) {
  std::vector<bool> seen(0x110000, false);  // one bit per code point: a pass, not a sort of the corpus
  for (char32_t c : corpus) {
    DPT_CHECK(c < 0x110000, "U+" << std::hex << uint32_t(c) << " is not a character");
    seen[c] = true;
  }
  Vocabulary v;
  for (char32_t c = 0; c < 0x110000; ++c)
    if (seen[c]) v.characters_.push_back(c);
  return v;
}

Vocabulary Vocabulary::from_utf8(const std::string& characters, const std::string& origin) {
  Vocabulary v;
  std::string problem = decode_utf8(characters, &v.characters_);
  DPT_CHECK(problem.empty(), origin << " is not UTF-8: " << problem);
  for (std::size_t i = 1; i < v.characters_.size(); ++i)
    DPT_CHECK(v.characters_[i - 1] < v.characters_[i],
              origin << " should list its characters once each in ascending order; entries " << i - 1 << " and "
                     << i << " are not (was it edited?)");
  return v;
}

std::vector<int64_t> Vocabulary::encode(const std::vector<char32_t>& text) const {
  // token_of[c]: c's token, or -1; a table up to the largest character (123
  // entries for the KJV), so a corpus of millions is one lookup a character.
  std::vector<int64_t> token_of(characters_.empty() ? 0 : std::size_t(characters_.back()) + 1, -1);
  for (std::size_t i = 0; i < characters_.size(); ++i) token_of[characters_[i]] = int64_t(i);
  std::vector<int64_t> tokens(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char32_t c = text[i];
    tokens[i] = c < token_of.size() ? token_of[c] : -1;
    DPT_CHECK(tokens[i] >= 0, "character '" << (c < 0x110000 ? utf8_string({c}) : "?") << "' (U+" << std::hex
                                            << std::uppercase << uint32_t(c) << std::dec << ") at position " << i
                                            << " is not in the " << size() << "-character vocabulary");
  }
  return tokens;
}

std::string Vocabulary::decode(const std::vector<int64_t>& tokens) const {
  std::vector<char32_t> text(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    DPT_CHECK(tokens[i] >= 0 && tokens[i] < size(),
              "token " << tokens[i] << " at position " << i << " is outside the vocabulary [0, " << size() << ")");
    text[i] = characters_[std::size_t(tokens[i])];
  }
  return utf8_string(text);
}

}  // namespace dpt
