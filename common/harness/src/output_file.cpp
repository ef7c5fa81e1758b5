// output_file.cpp — the output-path policy and the atomic writer (see output_file.h).
//
// Every decision starts from lstat(), never stat(): the question is what the
// path itself names, not where a link would lead.
#include "dpt/output_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include "dpt/check.h"

namespace dpt {

namespace {

std::string in_quotes(const std::string& path) { return "'" + path + "'"; }

// The directory a new entry `path` is created in ("." for a bare name).
std::string directory_of(const std::string& path) {
  std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// "" when files can be created in the directory of `path` (needed for a new
// file, and for the temporary file that replaces a regular one).
std::string directory_problem(const std::string& path) {
  std::string dir = directory_of(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return "the directory " + in_quotes(dir) + " of " + in_quotes(path) + " cannot be used: " + std::strerror(errno) +
           (errno == ENOENT ? " (create it first)" : "");
  if (!S_ISDIR(st.st_mode)) return in_quotes(dir) + " in " + in_quotes(path) + " is not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot create files in the directory " + in_quotes(dir) + ": " + std::strerror(errno);
  return "";
}

// What kind of non-regular file `mode` is, for a refusal; "" for the kinds dpt writes.
std::string refused_kind(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link; dpt neither replaces a link nor writes through it, so give the path it points to";
  if (S_ISDIR(mode)) return "a directory; give a file name inside it";
  if (S_ISFIFO(mode)) return "a named pipe (FIFO); dpt refuses it because a pipe nobody reads would hang the run";
  if (S_ISSOCK(mode)) return "a socket; dpt writes only regular files and character devices such as /dev/null";
  if (S_ISBLK(mode)) return "a block device; dpt writes only regular files and character devices such as /dev/null";
  return "";
}

// ---- temporary files that SIGINT/SIGTERM remove ----
// Fixed slots, so that the handler only reads memory and calls unlink(2),
// both async-signal-safe. A slot is free (0), being filled (1) or ready (2).
struct TempSlot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};
TempSlot g_temps[64];

void remove_temps_and_die(int sig) {
  for (TempSlot& slot : g_temps)
    if (slot.state.load() == 2) ::unlink(slot.path);
  ::signal(sig, SIG_DFL);  // then end as the signal would have ended us
  ::raise(sig);
}

// Our handler, for each signal whose disposition is still the default (a
// program or a test harness with its own handler keeps it).
void install_cleanup_handlers() {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction current;
    if (::sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction ours {};
    ours.sa_handler = remove_temps_and_die;
    sigemptyset(&ours.sa_mask);
    ::sigaction(sig, &ours, nullptr);
  }
}

// The slot now holding `path`, or -1 when none is free or the path is too
// long (that temporary file is then not removed on a signal).
int register_temp(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  install_cleanup_handlers();
  for (int i = 0; i < int(sizeof g_temps / sizeof g_temps[0]); ++i) {
    int free_slot = 0;
    if (!g_temps[i].state.compare_exchange_strong(free_slot, 1)) continue;
    std::memcpy(g_temps[i].path, path.c_str(), path.size() + 1);
    g_temps[i].state.store(2);
    return i;
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0) g_temps[slot].state.store(0);
}

// ---- the run's finished files, waiting for publish (OutputRun) ----
// Each keeps its signal slot until it is renamed, so SIGINT removes it too.
struct Waiting {
  std::string temp, target;
  int slot;
};
std::mutex g_run_mutex;        // guards the two below: rank threads commit at once
int g_run_depth = 0;           // open OutputRuns (the outermost publishes)
std::vector<Waiting> g_waiting;
thread_local int t_publish_now = 0;  // open PublishNow scopes on this thread

void remove_waiting(const Waiting& w) {
  unregister_temp(w.slot);
  ::unlink(w.temp.c_str());
}

// Renames a finished temporary file over `path`: the one step that publishes it.
void move_into_place(const std::string& temp, const std::string& path) {
  // Someone may have put a link or a device at the path since the check: never replace one.
  struct stat st;
  bool replaceable = ::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode);
  DPT_CHECK(replaceable, output_path_problem(path));
  DPT_CHECK(::rename(temp.c_str(), path.c_str()) == 0,
            "cannot move " << in_quotes(temp) << " to " << in_quotes(path) << ": " << std::strerror(errno));
  // The rename itself lives in the directory: sync it too (best effort; some file systems refuse).
  int dir = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace

// ----------------------------------------------------------------------------
// the policy, checked before any work is done

std::string output_path_problem(const std::string& path) {
  if (path.empty()) return "the output path is empty";
  if (path.back() == '/') return in_quotes(path) + " names a directory; give a file name";
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return directory_problem(path);
    return "cannot use " + in_quotes(path) + ": " + std::strerror(errno);
  }
  std::string kind = refused_kind(st.st_mode);
  if (!kind.empty()) return in_quotes(path) + " is " + kind;
  if (S_ISCHR(st.st_mode))
    return ::access(path.c_str(), W_OK) == 0 ? "" : "cannot write the device " + in_quotes(path) + ": " + std::strerror(errno);
  return directory_problem(path);  // a regular file: replaced through a temporary file beside it
}

void check_output_path(const std::string& flag, const std::string& path) {
  std::string problem = output_path_problem(path);
  DPT_CHECK(problem.empty(), flag << ": " << problem);
}

// ----------------------------------------------------------------------------
// writing

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  std::string problem = output_path_problem(path_);
  DPT_CHECK(problem.empty(), problem);
  struct stat st;
  bool exists = ::lstat(path_.c_str(), &st) == 0;
  regular_ = !exists || S_ISREG(st.st_mode);
  if (!regular_) {  // a character device: in place, never created or truncated
    fd_ = ::open(path_.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  } else {  // mkstemp opens with O_EXCL: never a file (or link) someone else made
    std::vector<char> name(path_.begin(), path_.end());
    for (char c : std::string(".tmp.XXXXXX")) name.push_back(c);
    name.push_back('\0');
    fd_ = ::mkstemp(name.data());
    if (fd_ >= 0) {
      temp_ = name.data();
      temp_slot_ = register_temp(temp_);
      ::fchmod(fd_, exists ? (st.st_mode & 07777) : 0644);  // a replaced file keeps its permissions
    }
  }
  DPT_CHECK(fd_ >= 0, "cannot open " << in_quotes(temp_.empty() ? path_ : temp_) << " for writing: " << std::strerror(errno));
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  unregister_temp(temp_slot_);
  temp_slot_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

void OutputFile::write(const void* bytes, std::size_t size) {
  DPT_CHECK(fd_ >= 0, "writing " << in_quotes(path_) << " after it was committed");
  const char* p = static_cast<const char*>(bytes);
  while (size > 0) {
    ssize_t written = ::write(fd_, p, size);
    if (written < 0 && errno == EINTR) continue;
    DPT_CHECK(written > 0, "writing " << in_quotes(path_) << " failed: " << std::strerror(written < 0 ? errno : EIO));
    p += written;
    size -= std::size_t(written);
  }
}

void OutputFile::commit() {
  DPT_CHECK(fd_ >= 0, "committing " << in_quotes(path_) << " twice");
  // Durable before visible: the bytes reach the disk before the rename publishes them.
  if (regular_) DPT_CHECK(::fsync(fd_) == 0, "writing " << in_quotes(path_) << " failed (fsync): " << std::strerror(errno));
  int rc = ::close(fd_);
  fd_ = -1;
  DPT_CHECK(rc == 0, "writing " << in_quotes(path_) << " failed (close): " << std::strerror(errno));
  if (temp_.empty()) return;  // a device: written in place
  {
    std::lock_guard<std::mutex> lock(g_run_mutex);
    if (g_run_depth > 0 && t_publish_now == 0) {  // an OutputRun is open: wait for its publish()
      for (auto it = g_waiting.begin(); it != g_waiting.end(); ++it)
        if (it->target == path_) {  // written again: the newer bytes win
          remove_waiting(*it);
          g_waiting.erase(it);
          break;
        }
      g_waiting.push_back({temp_, path_, temp_slot_});
      temp_slot_ = -1;
      temp_.clear();
      return;
    }
  }
  move_into_place(temp_, path_);
  unregister_temp(temp_slot_);
  temp_slot_ = -1;
  temp_.clear();
}

void write_output_file(const std::string& path, const std::string& text) {
  OutputFile out(path);
  out.write(text);
  out.commit();
}

// ----------------------------------------------------------------------------
// the run's outputs, published together

OutputRun::OutputRun() {
  std::lock_guard<std::mutex> lock(g_run_mutex);
  ++g_run_depth;
}

OutputRun::~OutputRun() {
  std::lock_guard<std::mutex> lock(g_run_mutex);
  if (--g_run_depth > 0) return;  // an inner run: the outer one decides
  for (const Waiting& w : g_waiting) remove_waiting(w);
  g_waiting.clear();
}

void OutputRun::publish() {
  std::lock_guard<std::mutex> lock(g_run_mutex);
  if (g_run_depth > 1) return;
  while (!g_waiting.empty()) {
    Waiting w = g_waiting.front();
    g_waiting.erase(g_waiting.begin());
    try {
      move_into_place(w.temp, w.target);
    } catch (...) {
      remove_waiting(w);  // the rest are removed by the destructor
      throw;
    }
    unregister_temp(w.slot);
  }
}

PublishNow::PublishNow() { ++t_publish_now; }
PublishNow::~PublishNow() { --t_publish_now; }

std::string written_so_far(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_run_mutex);
  if (g_run_depth == 0) return path;
  for (const Waiting& w : g_waiting)
    if (w.target == path) return w.temp;
  return "";
}

// ----------------------------------------------------------------------------
// outputs that would overwrite an input or each other

namespace {

// What a path names: its file (device and inode) when it exists, else its
// absolute, normalised spelling (two outputs not yet created).
struct Identity {
  bool exists = false, directory = false, device = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string spelling;
};

Identity identity_of(const std::string& path) {
  namespace fs = std::filesystem;
  Identity id;
  std::error_code ec;
  id.spelling = fs::absolute(path, ec).lexically_normal().string();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true, id.dev = st.st_dev, id.ino = st.st_ino;
    id.directory = S_ISDIR(st.st_mode), id.device = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode);
  }
  return id;
}

bool same_file(const Identity& a, const Identity& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.spelling == b.spelling;
}

// True when `output` lies below the directory `dir` (through any of its parents).
bool inside(const std::string& output, const Identity& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(output, ec).lexically_normal();
  for (fs::path up = p.parent_path(); !up.empty(); up = up.parent_path()) {
    struct stat st;
    if (::stat(up.c_str(), &st) == 0 && st.st_dev == dir.dev && st.st_ino == dir.ino) return true;
    if (up == up.root_path()) break;
  }
  return false;
}

}  // namespace

std::string distinct_paths_problem(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    Identity id = identity_of(out.path);
    if (id.device) continue;  // /dev/null may take every output
    for (std::size_t j = 0; j < i; ++j)
      if (same_file(id, identity_of(outputs[j].path)))
        return outputs[j].flag + " " + in_quotes(outputs[j].path) + " and " + out.flag + " " + in_quotes(out.path) +
               " name the same file: each output needs its own path";
    for (const NamedPath& in : inputs) {
      Identity source = identity_of(in.path);
      if (same_file(id, source))
        return out.flag + " " + in_quotes(out.path) + " is the same file as " + in.flag + " " + in_quotes(in.path) +
               ", which this run reads: writing it would destroy the input; give another path";
      if (source.exists && source.directory && inside(out.path, source))
        return out.flag + " " + in_quotes(out.path) + " lies inside " + in.flag + " " + in_quotes(in.path) +
               ", which this run reads: writing there could destroy the input; give a path outside it";
    }
  }
  return "";
}

}  // namespace dpt
