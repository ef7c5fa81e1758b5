// text_corpus.cpp — --data for a language model: the source, its tokens and
// split, the vocabulary in safetensors, --save-data.
#include "dpt/text_corpus.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "dpt/check.h"
#include "dpt/checkpoint.h"
#include "dpt/synthetic_text.h"
#include "dpt/text_windows.h"

namespace dpt {

TextSource parse_text_source(const std::string& spec) {
  if (spec == "kjv") return {TextSource::Kind::Kjv, ""};
  if (spec == "synthetic") return {TextSource::Kind::Synthetic, ""};
  const std::string prefix = "text:";
  if (spec.size() > prefix.size() && spec.compare(0, prefix.size(), prefix) == 0)
    return {TextSource::Kind::File, spec.substr(prefix.size())};
  DPT_FAIL("expects kjv (Debian's King James Bible), synthetic or text:FILE (a UTF-8 file), got '" << spec << "'");
}

CLI::Validator text_source_check() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          parse_text_source(value);
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      "kjv|synthetic|text:FILE");
}

std::string text_source_file(const std::string& spec) {
  const std::string prefix = "text:";
  return spec.size() > prefix.size() && spec.compare(0, prefix.size(), prefix) == 0 ? spec.substr(prefix.size()) : "";
}

namespace {
// "4137850" → "4,137,850"
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string read_text_file(const std::string& path) {
  struct stat info {};
  DPT_CHECK(::stat(path.c_str(), &info) == 0, "--data text:" << path << ": cannot open '" << path << "' ("
                                                              << std::strerror(errno) << ")");
  DPT_CHECK(!S_ISDIR(info.st_mode), "--data text:" << path << ": '" << path << "' is a folder; give a text file");
  std::ifstream in(path, std::ios::binary);
  DPT_CHECK(in, "--data text:" << path << ": cannot open '" << path << "'");
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  DPT_CHECK(!in.bad(), "--data text:" << path << ": reading '" << path << "' failed");
  return text;
}

// The characters of `source`, and a name for them.
std::vector<char32_t> source_characters(const TextSource& source, uint64_t seed, std::string* name) {
  if (source.kind == TextSource::Kind::Synthetic) {
    *name = "synthetic text (seed " + std::to_string(seed) + ")";
    return utf8_characters(make_synthetic_text(kSyntheticTextCharacters, seed));
  }
  if (source.kind == TextSource::Kind::Kjv) {
    *name = "the King James Bible (Debian's bible-kjv)";
    return utf8_characters(kjv_text(default_data_cache()));
  }
  *name = "'" + source.path + "'";
  std::string bytes = read_text_file(source.path);
  DPT_CHECK(!bytes.empty(), "--data text:" << source.path << ": the file is empty; give a text to learn from");
  if (bytes.compare(0, 3, "\xEF\xBB\xBF") == 0) bytes.erase(0, 3);  // a byte-order mark
  std::string problem = utf8_problem(bytes);
  DPT_CHECK(problem.empty(), "--data text:" << source.path << " is not UTF-8: " << problem);
  return utf8_characters(bytes);
}
}  // namespace

TextData load_text_data(const std::string& spec, int64_t context, uint64_t seed) {
  TextSource source = parse_text_source(spec);
  TextData data;
  std::string name;
  std::vector<char32_t> characters = source_characters(source, seed, &name);
  data.vocabulary = Vocabulary::of(characters);
  TextSplit split = split_held_out(data.vocabulary.encode(characters));
  const int64_t need = min_tokens_for(context), n = int64_t(characters.size());
  DPT_CHECK(int64_t(split.held_out.size()) >= need && int64_t(split.train.size()) >= need,
            "--data " << spec << ": " << name << " holds " << with_commas(n) << " characters, too few for --context "
                      << context << ": its held-out last tenth (" << split.held_out.size() << ") and the rest ("
                      << split.train.size() << ") each need at least " << need
                      << "; give a longer text or a smaller --context");
  data.train = std::move(split.train);
  data.held_out = std::move(split.held_out);
  data.description = name + ", " + with_commas(n) + " characters, " + std::to_string(data.vocabulary.size()) +
                     " distinct";
  return data;
}

// ----------------------------------------------------------------------------
// the vocabulary in a safetensors file

std::map<std::string, std::string> vocabulary_metadata(const Vocabulary& vocabulary) {
  return {{"vocabulary", vocabulary.characters_utf8()},
          {"tokens", "characters: token i is the i-th Unicode character of 'vocabulary' (ascending code points)"}};
}

Vocabulary read_vocabulary(const std::string& path) {
  SafeTensorsFile file = read_safetensors(path);
  auto it = file.metadata.find("vocabulary");
  DPT_CHECK(it != file.metadata.end(),
            "'" << path << "' holds no vocabulary (metadata 'vocabulary'): it was not saved by a language model's run");
  return Vocabulary::from_utf8(it->second, "the vocabulary in '" + path + "'");
}

void save_text_data(const std::string& path, const std::vector<int64_t>& train_tokens, const Vocabulary& vocabulary) {
  SafeTensorsFile file;
  file.tensors["tokens"] = to_safetensor(train_tokens, {int64_t(train_tokens.size())});
  file.metadata = vocabulary_metadata(vocabulary);
  write_safetensors(path, file);
}

}  // namespace dpt
