// kjv_text.cpp — the King James Bible from Debian's `bible`, labels stripped,
// cached once as plain text (text_corpus.h says what and where).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "dpt/check.h"
#include "dpt/text_corpus.h"

namespace dpt {

namespace {
// Where bible-kjv-text puts the compressed text. `bible` looks in the current
// directory first: -p pins it here, so a stray bible.data cannot change the text.
const char* const kBibleDataDir = "/usr/lib";
const char* const kBibleData = "/usr/lib/bible.data";
const char* const kInstall =
    "--data kjv needs Debian's bible-kjv package (the `bible` program; it brings the text, bible-kjv-text): "
    "apt-get install bible-kjv, or scripts/install-deps";

std::string system_reason() { return std::strerror(errno); }

// mkdir -p: each missing folder of `dir` in turn.
void make_folders(const std::string& dir) {
  for (std::size_t slash = dir.find('/', 1); ; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    DPT_CHECK(::mkdir(prefix.c_str(), 0755) == 0 || errno == EEXIST,
              "cannot make the data cache folder '" << prefix << "' (" << system_reason()
                                                    << "): set DPT_DATA_CACHE to a folder you can write");
    if (slash == std::string::npos) return;
  }
}

// "Ge1:1 In the beginning …" → "In the beginning …". The label is one word:
// [1-3]? letters, digits ':' digits. Anything else means `bible` printed
// something other than a verse, and the text would be wrong.
std::string verse_text(const std::string& line, int64_t number) {
  std::size_t i = 0;
  if (i < line.size() && line[i] >= '1' && line[i] <= '3') ++i;
  std::size_t letters = i;
  while (i < line.size() && std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
  std::size_t chapter = i;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  bool colon = i > chapter && i < line.size() && line[i] == ':';
  std::size_t verse = colon ? ++i : i;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  DPT_CHECK(i > letters && chapter > letters && colon && i > verse && i < line.size() && line[i] == ' ',
            "`bible` printed line " << number << " as '" << line.substr(0, 60)
                                    << "', not a verse label and its text (is bible-kjv broken?)");
  return line.substr(i + 1);
}

// Runs `bible` and returns its verses, labels stripped.
std::string run_bible(const std::string& program) {
  DPT_CHECK(program.find('\'') == std::string::npos, "a program path with a quote: '" << program << "'");
  std::string command = "'" + program + "' -p " + kBibleDataDir + " -f Gen1:1-Rev22:21 </dev/null 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  DPT_CHECK(pipe != nullptr, "cannot start `" << program << "` (" << system_reason() << "); " << kInstall);
  std::string raw;
  char buffer[1 << 16];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) raw.append(buffer, got);
  int status = ::pclose(pipe);
  int code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  DPT_CHECK(code != 127 && code != 126, kInstall << " (`" << program << "` is not there)");
  DPT_CHECK(code == 0, "`" << program << "` failed (exit " << code << ": '" << raw.substr(0, raw.find('\n'))
                           << "'); reinstall bible-kjv-text (apt-get install --reinstall bible-kjv-text)");
  std::string text;
  text.reserve(raw.size());
  int64_t number = 0;
  for (std::size_t begin = 0; begin < raw.size();) {
    std::size_t end = raw.find('\n', begin);
    DPT_CHECK(end != std::string::npos, "`bible`'s output ends inside a verse (line " << number + 1 << ")");
    text += verse_text(raw.substr(begin, end - begin), ++number);
    text += '\n';
    begin = end + 1;
  }
  DPT_CHECK(!text.empty(), "`" << program << "` printed nothing; reinstall bible-kjv-text");
  return text;
}

// Writes `text` to `path` atomically: a temporary file beside it, fsync'ed,
// renamed over it. Two writers at once (two ranks) each rename a whole file.
void write_cache(const std::string& path, const std::string& text) {
  std::string temp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(temp.data());
  DPT_CHECK(fd >= 0, "cannot write the text cache beside '" << path << "' (" << system_reason()
                                                            << "): set DPT_DATA_CACHE to a folder you can write");
  std::size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += std::size_t(n);
  }
  bool ok = written == text.size() && ::fsync(fd) == 0;
  std::string reason = ok ? "" : system_reason();
  ok = ::close(fd) == 0 && ok;
  ok = ok && ::chmod(temp.c_str(), 0644) == 0 && ::rename(temp.c_str(), path.c_str()) == 0;
  if (!ok) {
    if (reason.empty()) reason = system_reason();
    ::unlink(temp.c_str());
    DPT_FAIL("cannot write the text cache '" << path << "' (" << reason << ")");
  }
}

// True when `cache` exists and is not older than Debian's bible.data (when that exists).
bool cache_is_fresh(const std::string& cache) {
  struct stat mine {}, debian {};
  if (::stat(cache.c_str(), &mine) != 0) return false;
  if (::stat(kBibleData, &debian) != 0) return true;  // the package is gone: the cache is all there is
  return mine.st_mtime >= debian.st_mtime;
}
}  // namespace

std::string default_data_cache() {
  for (const char* name : {"DPT_DATA_CACHE", "XDG_CACHE_HOME", "HOME"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    std::string dir = value;
    if (std::string(name) == "DPT_DATA_CACHE") return dir;
    return dir + (std::string(name) == "HOME" ? "/.cache/dpt" : "/dpt");
  }
  DPT_FAIL("no folder for the data cache: set DPT_DATA_CACHE (or HOME)");
}

std::string kjv_text(const std::string& cache_dir, const std::string& bible_program) {
  std::string cache = cache_dir + "/kjv.txt";
  if (!cache_is_fresh(cache)) {
    std::string text = run_bible(bible_program);  // before any folder is made: a missing package changes nothing
    make_folders(cache_dir);
    write_cache(cache, text);
  }
  std::ifstream in(cache, std::ios::binary);
  DPT_CHECK(in, "cannot read the text cache '" << cache << "' (" << system_reason() << ")");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace dpt
