// test_text_corpus.cpp — --data for a language model: kjv from Debian's
// `bible` (cached once, labels stripped), text:FILE and its bad files, the
// vocabulary in safetensors, --save-data's tokens, the input/output check.
#include "support/catch.h"
#include "support/parse_child.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <set>

#include "dpt/checkpoint.h"
#include "dpt/options.h"
#include "dpt/synthetic_text.h"
#include "dpt/text_corpus.h"
#include "support/folder.h"

using namespace dpt;
using dpt_test::entries_in;
using dpt_test::Folder;
using dpt_test::read_file;
using dpt_test::write_file;

TEST_CASE("text corpus: --data takes kjv, synthetic or text:FILE", "[text]") {
  CHECK(parse_text_source("kjv").kind == TextSource::Kind::Kjv);
  CHECK(parse_text_source("synthetic").kind == TextSource::Kind::Synthetic);
  TextSource file = parse_text_source("text:notes/a b.md");
  CHECK(file.kind == TextSource::Kind::File);
  CHECK(file.path == "notes/a b.md");
  for (const char* bad : {"text:", "fashion-mnist", "KJV", ""})
    CHECK_THROWS_WITH(parse_text_source(bad), contains_text("expects kjv") && contains_text("got '" + std::string(bad) + "'"));
  CHECK(text_source_file("text:x.txt") == "x.txt");
  CHECK(text_source_file("kjv").empty());
}

TEST_CASE("text corpus: synthetic text is split 9 to 1 under its 8 letters", "[text]") {
  TextData data = load_text_data("synthetic", 64, 5);
  CHECK(data.vocabulary.size() == 8);
  CHECK(int64_t(data.train.size()) == kSyntheticTextCharacters / 10 * 9);
  CHECK(int64_t(data.held_out.size()) == kSyntheticTextCharacters / 10);
  CHECK(data.vocabulary.decode(std::vector<int64_t>(data.train.begin(), data.train.begin() + 50)) ==
        make_synthetic_text(50, 5));
}

TEST_CASE("text corpus: text:FILE reads any UTF-8 file, a character a token", "[text]") {
  Folder dir("text_corpus_file");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "Caf\xC3\xA9 \xE2\x82\xAC" + std::to_string(i % 10) + "\n";  // 8 characters, 11 bytes a line
  write_file(dir / "t.txt", "\xEF\xBB\xBF" + text);  // with a byte-order mark, which is dropped
  TextData data = load_text_data("text:" + dir / "t.txt", 8, 0);
  CHECK(data.train.size() + data.held_out.size() == 40 * 8);
  CHECK(data.held_out.size() == 32);
  std::vector<int64_t> all = data.train;
  all.insert(all.end(), data.held_out.begin(), data.held_out.end());
  CHECK(data.vocabulary.decode(all) == text);
  CHECK(data.vocabulary.size() == 6 + 10 + 1);  // C a f é space €, ten digits, '\n'
}

TEST_CASE("text corpus: a missing, empty, non-UTF-8 or too short file, or a folder, gets one sentence", "[text]") {
  Folder dir("text_corpus_bad");
  write_file(dir / "empty.txt", "");
  write_file(dir / "latin1.txt", "na\xEFve\n");  // ISO-8859-1's ï, not UTF-8
  write_file(dir / "short.txt", std::string(600, 'x'));  // 60 held out: too few for context 64
  CHECK_THROWS_WITH(load_text_data("text:" + dir / "none.txt", 8, 0), contains_text("cannot open"));
  CHECK_THROWS_WITH(load_text_data("text:" + dir.path, 8, 0), contains_text("is a folder; give a text file"));
  CHECK_THROWS_WITH(load_text_data("text:" + dir / "empty.txt", 8, 0), contains_text("the file is empty"));
  CHECK_THROWS_WITH(load_text_data("text:" + dir / "latin1.txt", 8, 0),
                    contains_text("latin1.txt is not UTF-8: byte 0xEF at offset 2"));
  CHECK_THROWS_WITH(load_text_data("text:" + dir / "short.txt", 64, 0),
                    contains_text("holds 600 characters, too few for --context 64") && contains_text("at least 66"));
  CHECK_NOTHROW(load_text_data("text:" + dir / "short.txt", 50, 0));  // 60 ≥ 52
}

TEST_CASE("text corpus: the vocabulary travels with the weights, --save-data writes the tokens as int64", "[text]") {
  Folder dir("text_corpus_saved");
  Vocabulary vocab = Vocabulary::of(utf8_characters("\n \"\\\xC3\xA9z"));  // JSON's special characters, and é
  Tensor w = Tensor::zeros({2, 3}, Device::host());
  save_weights(dir / "w.safetensors", {{"lm_head.weight", w}}, vocabulary_metadata(vocab));
  CHECK(read_vocabulary(dir / "w.safetensors").characters() == vocab.characters());
  CHECK_NOTHROW(load_weights(dir / "w.safetensors", {{"lm_head.weight", w}}));  // metadata is not a tensor

  std::vector<int64_t> tokens = {5, 0, 3, 4000000000LL, 1};  // one past 2^31: int64, not int32
  save_text_data(dir / "d.safetensors", tokens, vocab);
  SafeTensorsFile file = read_safetensors(dir / "d.safetensors");
  REQUIRE(file.tensors.count("tokens") == 1);
  CHECK(file.tensors["tokens"].dtype == DType::I64);
  CHECK(file.tensors["tokens"].shape == Shape{5});
  CHECK(file.tensors["tokens"].ints() == tokens);
  CHECK(Vocabulary::from_utf8(file.metadata["vocabulary"]).characters() == vocab.characters());

  save_weights(dir / "plain.safetensors", {{"lm_head.weight", w}});
  CHECK_THROWS_WITH(read_vocabulary(dir / "plain.safetensors"), contains_text("holds no vocabulary"));
}

namespace {
// What parse_flags prints for a chapter with its own --data and the common
// --save-data; "" when accepted.
std::string corpus_parse_error(std::vector<std::string> args) {
  return dpt_test::parse_error_of(
      [](CLI::App& app) {
        static std::string data = "synthetic", save_data;  // the child exits inside parse_flags
        app.add_option("--data", data)->check(text_source_check());
        add_output(app, "--save-data", save_data, "tokens");
      },
      std::move(args));
}
}  // namespace

TEST_CASE("text corpus: --save-data on --data text:FILE's own file is refused before any work", "[text]") {
  Folder dir("text_corpus_flags");
  write_file(dir / "book.txt", "precious");
  CHECK_THAT(corpus_parse_error({"--data", "text:" + dir / "book.txt", "--save-data", dir / "book.txt"}),
             contains_text("is the same file as --data"));
  CHECK_THAT(corpus_parse_error({"--data", "bible"}), contains_text("--data") && contains_text("expects kjv"));
  CHECK(corpus_parse_error({"--data", "kjv", "--save-data", dir / "tokens.safetensors"}).empty());
  CHECK(read_file(dir / "book.txt") == "precious");
}

// ----------------------------------------------------------------------------
// kjv

TEST_CASE("text corpus: kjv without Debian's bible-kjv names the package to install", "[text]") {
  Folder dir("text_corpus_no_bible");
  CHECK_THROWS_WITH(kjv_text(dir / "cache", dir / "no-such-bible"),
                    contains_text("needs Debian's bible-kjv package") && contains_text("apt-get install bible-kjv"));
  CHECK(dir.entries().empty());  // no cache folder, no half-written file
}

TEST_CASE("text corpus: kjv is the King James Bible, verse labels stripped, cached once", "[text]") {
  if (::access("/usr/bin/bible", X_OK) != 0 || ::access("/usr/lib/bible.data", R_OK) != 0)
    DPT_SKIP("Debian's bible-kjv and bible-kjv-text are not installed (scripts/install-deps installs them)");
  Folder dir("text_corpus_kjv");
  std::string text = kjv_text(dir / "cache");
  CHECK(dir.entries() == std::vector<std::string>{"cache"});
  CHECK(entries_in(dir / "cache") == std::vector<std::string>{"kjv.txt"});  // no temporary file left
  // What any edition of the KJV holds: 31,102 verses, a line each, from Genesis 1:1 to Revelation 22:21.
  CHECK(std::count(text.begin(), text.end(), '\n') == 31102);
  const std::string first = "In the beginning God created the heaven and the earth.\n";
  const std::string last = "The grace of our Lord Jesus Christ be with you all. Amen.\n";
  CHECK(text.compare(0, first.size(), first) == 0);
  CHECK(text.compare(text.size() - last.size(), last.size(), last) == 0);
  CHECK(text.compare(text.size() - last.size() - 1, 1, "\n") == 0);  // the last verse is a line of its own
  CHECK(text.find_first_of("0123456789") == std::string::npos);  // no label left: the text itself has no digit
  // Loosely pinned: bible-kjv 4.38 gives 4,137,850 characters and 63
  // distinct. Another package version may mend a typo or two; labels left in
  // (4,404,412 characters, 73 distinct) or lost verses could not pass.
  CHECK(text.size() > 4100000);
  CHECK(text.size() < 4180000);
  std::set<char> distinct(text.begin(), text.end());
  CHECK(distinct.size() >= 60);
  CHECK(distinct.size() <= 66);

  // Made once: the next call reads the cache (here marked, to see it read) …
  write_file(dir / "cache/kjv.txt", "marked\n");
  CHECK(kjv_text(dir / "cache") == "marked\n");
  // … until Debian's text is newer than the cache (an upgraded package).
  struct utimbuf old_times = {1000000000, 1000000000};  // 2001
  REQUIRE(::utime((dir / "cache/kjv.txt").c_str(), &old_times) == 0);
  CHECK(kjv_text(dir / "cache") == text);
}
