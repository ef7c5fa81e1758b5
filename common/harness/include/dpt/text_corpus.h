/// @file text_corpus.h
/// @brief Where a language model's text comes from (`--data kjv | synthetic |
/// text:FILE`), made into tokens and split; the vocabulary saved beside the
/// weights; `--save-data`'s token file.
///
///     TextData data = load_text_data("kjv", /*context*/ 64, seed);  // or "synthetic", "text:notes.md"
///     // data.train, data.held_out: tokens; data.vocabulary: V characters
///     save_weights(path, model.named_parameters(), vocabulary_metadata(data.vocabulary));
///
/// **kjv**: Debian's King James Bible. Package `bible-kjv` brings the `bible`
/// program and depends on `bible-kjv-text` (its compressed text and
/// concordance in /usr/lib/bible.data*); scripts/install-deps installs both.
/// The first use runs `bible -p /usr/lib -f Gen1:1-Rev22:21` (pretty-printing
/// off: one verse a line, "Ge1:1 In the beginning God created …") and keeps
/// the text in a cache file, `kjv.txt` in the data cache (below), which
/// every later run reads. From each line exactly one thing is removed: the
/// verse label, its first word (book abbreviation, chapter:verse: `Ge1:1`,
/// `SSol1:10`, `1Jn3:16`), and the one space after it. The rest, newline
/// included, is kept byte for byte: 31,102 lines, one verse each, 4,137,850
/// ASCII characters, 63 distinct (bible-kjv 4.38). The cache is written to a
/// temporary file and renamed into place, so a reader (another rank, another
/// run) sees no file or the whole one; it is made again when Debian's
/// bible.data is newer than it (the package was upgraded).
///
/// **The data cache**: `$DPT_DATA_CACHE` if set, else `$XDG_CACHE_HOME/dpt`,
/// else `~/.cache/dpt`. Fashion-MNIST needs none (dpt reads Debian's
/// /usr/share/datasets/fashion-mnist in place); the Bible's package holds it
/// compressed in its own format, so the plain text is made once per user,
/// outside any checkout or build folder, writable without root.
///
/// **synthetic**: 1,000,000 characters of synthetic_text.h's rule, from the
/// run's seed, whose best possible loss is synthetic_entropy_nats().
///
/// **text:FILE**: any UTF-8 file, a character a token (vocabulary.h); a
/// byte-order mark at its start is dropped (it marks the encoding; it is not
/// text).
///
/// Every source gives its tokens under the vocabulary of its whole text (so
/// every held-out character has a token), split by split_held_out (the last
/// tenth held out) and checked long enough for windows of the context.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dpt/cli_fwd.h"
#include "dpt/vocabulary.h"

namespace dpt {

/// What `--data` names for a language model.
struct TextSource {
  /// Which text.
  enum class Kind {
    Kjv,        ///< Debian's King James Bible
    Synthetic,  ///< synthetic_text.h's rule
    File        ///< a UTF-8 file
  };
  Kind kind = Kind::Synthetic;  ///< which source
  std::string path;             ///< text:FILE's FILE ("" otherwise)
};
/// Parses "kjv", "synthetic" or "text:FILE" (FILE not empty). Throws
/// dpt::Error "expects kjv, synthetic or text:FILE, got 'x'" otherwise; the
/// file is not opened yet.
TextSource parse_text_source(const std::string& spec);
/// A CLI11 check for a chapter's `--data`: parse_text_source's sentence, so
/// a bad value prints "--data: expects kjv, …" and exits 2 (options.h).
CLI::Validator text_source_check();
/// The file `spec` reads, for the input/output clash check: FILE for
/// "text:FILE", "" for kjv and synthetic and for anything else.
std::string text_source_file(const std::string& spec);

/// Characters of synthetic text a `synthetic` corpus holds.
constexpr int64_t kSyntheticTextCharacters = 1000000;

/// The data cache directory (see the file comment); throws dpt::Error when
/// neither DPT_DATA_CACHE, XDG_CACHE_HOME nor HOME is set.
std::string default_data_cache();

/// The King James Bible as text, labels stripped (see the file comment): the
/// cache file `cache_dir`/kjv.txt, made first when it is missing or older
/// than /usr/lib/bible.data, with `bible_program` (the tests pass a missing
/// one). Creates `cache_dir` if needed. Throws dpt::Error with one sentence:
/// the package to install when `bible` cannot be run; the folder and the
/// system's reason when the cache cannot be written; the line when `bible`
/// prints one that is not "LABEL text".
std::string kjv_text(const std::string& cache_dir, const std::string& bible_program = "bible");

/// A corpus made into tokens and split, ready for windows (text_windows.h).
struct TextData {
  std::string description;       ///< e.g. "the King James Bible (Debian's bible-kjv), 4,137,850 characters"
  Vocabulary vocabulary;         ///< the whole text's distinct characters
  std::vector<int64_t> train;    ///< the first ⌊9N/10⌋ tokens
  std::vector<int64_t> held_out; ///< the rest
};
/// The tokens of `spec` (parse_text_source), split; `seed` makes synthetic
/// text. Throws dpt::Error with one sentence naming the source when a file
/// is missing, empty, not UTF-8, or too short for windows of `context`
/// (each part needs min_tokens_for(context) tokens).
TextData load_text_data(const std::string& spec, int64_t context, uint64_t seed);

/// Metadata that saves `vocabulary` in a safetensors file (checkpoint.h's
/// save_weights takes it): "vocabulary" = its characters as one UTF-8
/// string, token 0 first; "tokens" says how to read it. Metadata, not a
/// tensor, so nanoGPT's model.load_state_dict(strict) still takes the weights.
std::map<std::string, std::string> vocabulary_metadata(const Vocabulary& vocabulary);
/// The vocabulary saved in safetensors file `path`; throws dpt::Error naming
/// the file when it holds none or a damaged one.
Vocabulary read_vocabulary(const std::string& path);

/// `--save-data FILE`: `tokens` (N,) I64, the training split, with the
/// vocabulary's metadata, written atomically (an output of the run).
void save_text_data(const std::string& path, const std::vector<int64_t>& train_tokens, const Vocabulary& vocabulary);

}  // namespace dpt
