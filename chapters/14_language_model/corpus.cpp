// corpus.cpp — placeholder text loading for chapter 14 (replaced by the data work).
#include "corpus.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "dpt/check.h"
#include "dpt/nn.h"

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DPT_CHECK(in, "--data: cannot read " << path);
  std::ostringstream all;
  all << in.rdbuf();
  return all.str();
}
std::string synthetic_text(uint64_t seed) {
  dpt::Rng rng(seed);
  const char* words[] = {"the ", "lord ", "said ", "unto ", "him ", "and ", "it ", "was ", "good. ", "light "};
  std::string out;
  while (out.size() < 200000) out += words[rng.below(10)];
  return out;
}
}  // namespace

TextData load_text(const std::string& data, uint64_t seed) {
  TextData t;
  std::string all;
  if (data == "synthetic" || data == "auto") {
    t.name = "synthetic";
    all = synthetic_text(seed);
  } else if (data.rfind("text:", 0) == 0) {
    t.name = data;
    all = read_file(data.substr(5));
  } else {
    DPT_FAIL("--data " << data << ": not written yet");
  }
  std::string vocab = all;
  std::sort(vocab.begin(), vocab.end());
  vocab.erase(std::unique(vocab.begin(), vocab.end()), vocab.end());
  t.vocabulary = vocab;
  std::vector<int64_t> tokens = encode(t, all);
  const std::size_t cut = tokens.size() * 9 / 10;
  t.train.assign(tokens.begin(), tokens.begin() + std::ptrdiff_t(cut));
  t.held_out.assign(tokens.begin() + std::ptrdiff_t(cut), tokens.end());
  return t;
}

std::string decode(const TextData& text, const std::vector<int64_t>& tokens) {
  std::string out;
  for (int64_t t : tokens) out += text.vocabulary[std::size_t(t)];
  return out;
}

std::vector<int64_t> encode(const TextData& text, const std::string& characters) {
  std::vector<int64_t> out;
  for (char c : characters) {
    auto at = text.vocabulary.find(c);
    DPT_CHECK(at != std::string::npos, "'" << c << "' is not in the vocabulary of " << text.name);
    out.push_back(int64_t(at));
  }
  return out;
}

Windows step_windows(const std::vector<int64_t>& tokens, int64_t step, int64_t global, int64_t first, int64_t count,
                     int64_t T, bool shuffle, uint64_t seed) {
  const int64_t N = int64_t(tokens.size());
  DPT_CHECK(N > T + 1, "the text has " << N << " tokens, too few for windows of " << T + 1);
  Windows w;
  for (int64_t g = first; g < first + count; ++g) {
    int64_t start;
    if (shuffle) {
      dpt::Rng rng(seed * 1000003u + uint64_t(step * global + g));
      start = int64_t(rng.below(uint64_t(N - T - 1)));
    } else {
      start = ((step * global + g) * T) % (N - T - 1);
    }
    w.inputs.insert(w.inputs.end(), tokens.begin() + start, tokens.begin() + start + T);
    w.targets.insert(w.targets.end(), tokens.begin() + start + 1, tokens.begin() + start + T + 1);
  }
  return w;
}

std::string default_prompt(const TextData& text) {
  std::string held = decode(text, {text.held_out.begin(), text.held_out.begin() + std::min<std::ptrdiff_t>(4096, std::ptrdiff_t(text.held_out.size()))});
  std::size_t start = held.find('\n');
  start = start == std::string::npos ? held.find(' ') : start;
  start = start == std::string::npos ? 0 : start + 1;
  std::size_t end = held.find('\n', start);
  std::string line = held.substr(start, end == std::string::npos ? std::string::npos : end - start);
  return line.substr(0, 40).empty() ? held.substr(0, 16) : line.substr(0, 40);
}
