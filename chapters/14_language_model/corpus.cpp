// corpus.cpp — chapter 14's text, over dpt's text data (corpus.h).
#include "corpus.h"

#include <algorithm>

#include "dpt/check.h"

namespace {
// auto: the Bible where its package is installed (the text is made once and cached).
std::string resolve(const std::string& data) {
  if (data != "auto") return data;
  try {
    dpt::kjv_text(dpt::default_data_cache());
    return "kjv";
  } catch (const dpt::Error&) {
    return "synthetic";
  }
}
}  // namespace

Corpus load_text(const std::string& data, int64_t context, uint64_t seed) {
  Corpus t;
  t.name = resolve(data);
  dpt::TextData loaded = dpt::load_text_data(t.name, context, seed);
  t.description = loaded.description;
  t.vocabulary = loaded.vocabulary;
  t.train = std::move(loaded.train);
  t.held_out = std::move(loaded.held_out);
  return t;
}

std::string decode(const Corpus& text, const std::vector<int64_t>& tokens) { return text.vocabulary.decode(tokens); }

std::vector<int64_t> encode(const Corpus& text, const std::string& characters) {
  return text.vocabulary.encode(dpt::utf8_characters(characters));
}

std::string default_prompt(const Corpus& text) {
  const auto n = std::min<std::size_t>(4096, text.held_out.size());
  const std::string held = decode(text, {text.held_out.begin(), text.held_out.begin() + std::ptrdiff_t(n)});
  std::size_t start = held.find('\n');
  start = start == std::string::npos ? held.find(' ') : start;
  start = start == std::string::npos ? 0 : start + 1;
  const std::size_t end = held.find('\n', start);
  std::string line = held.substr(start, end == std::string::npos ? std::string::npos : end - start);
  std::vector<char32_t> characters = dpt::utf8_characters(line);
  characters.resize(std::min<std::size_t>(40, characters.size()));
  line = dpt::utf8_string(characters);
  return line.empty() ? decode(text, {text.held_out.begin(), text.held_out.begin() + std::ptrdiff_t(std::min<std::size_t>(16, n))}) : line;
}

void check_same_text(dpt::Communicator& comm, const Corpus& text) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a over tokens, then characters
  auto mix = [&hash](uint64_t v) {
    for (int b = 0; b < 8; ++b) hash = (hash ^ ((v >> (8 * b)) & 0xff)) * 1099511628211ull;
  };
  for (int64_t t : text.train) mix(uint64_t(t));
  for (int64_t t : text.held_out) mix(uint64_t(t));
  for (char32_t c : text.vocabulary.characters()) mix(uint64_t(c));
  const std::vector<uint64_t> all = comm.all_gather(hash);
  for (std::size_t r = 1; r < all.size(); ++r)
    DPT_CHECK(all[r] == all[0], "rank " << r << " read other text than rank 0 (--data " << text.name
                                        << "): every rank must train on the same characters");
}
