// output_file.cpp — the output-path policy and the atomic writer (see output_file.h).
//
// Every decision starts from lstat(), never stat(): the question is what the
// path itself names, not where a link would lead.
#include "dpt/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "dpt/check.h"

namespace dpt {

namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

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
    return "the directory " + quoted(dir) + " of " + quoted(path) + " cannot be used: " + std::strerror(errno) +
           (errno == ENOENT ? " (create it first)" : "");
  if (!S_ISDIR(st.st_mode)) return quoted(dir) + " in " + quoted(path) + " is not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot create files in the directory " + quoted(dir) + ": " + std::strerror(errno);
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

}  // namespace

// ----------------------------------------------------------------------------
// the policy, checked before any work is done

std::string output_path_problem(const std::string& path) {
  if (path.empty()) return "the output path is empty";
  if (path.back() == '/') return quoted(path) + " names a directory; give a file name";
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return directory_problem(path);
    return "cannot use " + quoted(path) + ": " + std::strerror(errno);
  }
  std::string kind = refused_kind(st.st_mode);
  if (!kind.empty()) return quoted(path) + " is " + kind;
  if (S_ISCHR(st.st_mode))
    return ::access(path.c_str(), W_OK) == 0 ? "" : "cannot write the device " + quoted(path) + ": " + std::strerror(errno);
  return directory_problem(path);  // a regular file: replaced through a temporary file beside it
}

void check_output_path(const std::string& flag, const std::string& path) {
  std::string problem = output_path_problem(path);
  DPT_CHECK(problem.empty(), flag << ": " << problem);
}

// ----------------------------------------------------------------------------
// writing

OutputFile::OutputFile(std::string path, Mode mode) : path_(std::move(path)) {
  std::string problem = output_path_problem(path_);
  DPT_CHECK(problem.empty(), problem);
  struct stat st;
  bool exists = ::lstat(path_.c_str(), &st) == 0;
  regular_ = !exists || S_ISREG(st.st_mode);
  if (!regular_) {  // a character device: in place, never created or truncated
    fd_ = ::open(path_.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  } else if (mode != Mode::Document) {  // O_NOFOLLOW: a link that appeared since the check is refused
    int keep = mode == Mode::Append ? O_APPEND : O_TRUNC;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | keep | O_NOFOLLOW | O_CLOEXEC, 0644);
  } else {  // mkstemp opens with O_EXCL: never a file (or link) someone else made
    std::vector<char> name(path_.begin(), path_.end());
    for (char c : std::string(".tmp.XXXXXX")) name.push_back(c);
    name.push_back('\0');
    fd_ = ::mkstemp(name.data());
    if (fd_ >= 0) {
      temp_ = name.data();
      ::fchmod(fd_, exists ? (st.st_mode & 07777) : 0644);  // a replaced file keeps its permissions
    }
  }
  DPT_CHECK(fd_ >= 0, "cannot open " << quoted(temp_.empty() ? path_ : temp_) << " for writing: " << std::strerror(errno));
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

void OutputFile::write(const void* bytes, std::size_t size) {
  DPT_CHECK(fd_ >= 0, "writing " << quoted(path_) << " after it was committed");
  const char* p = static_cast<const char*>(bytes);
  while (size > 0) {
    ssize_t written = ::write(fd_, p, size);
    if (written < 0 && errno == EINTR) continue;
    DPT_CHECK(written > 0, "writing " << quoted(path_) << " failed: " << std::strerror(written < 0 ? errno : EIO));
    p += written;
    size -= std::size_t(written);
  }
}

void OutputFile::commit() {
  DPT_CHECK(fd_ >= 0, "committing " << quoted(path_) << " twice");
  // Durable before visible: the bytes reach the disk before the rename publishes them.
  if (regular_) DPT_CHECK(::fsync(fd_) == 0, "writing " << quoted(path_) << " failed (fsync): " << std::strerror(errno));
  int rc = ::close(fd_);
  fd_ = -1;
  DPT_CHECK(rc == 0, "writing " << quoted(path_) << " failed (close): " << std::strerror(errno));
  if (temp_.empty()) return;  // a log or a device: written in place
  // Someone may have put a link or a device at the path since the check: never replace one.
  struct stat st;
  bool replaceable = ::lstat(path_.c_str(), &st) != 0 || S_ISREG(st.st_mode);
  DPT_CHECK(replaceable, output_path_problem(path_));
  DPT_CHECK(::rename(temp_.c_str(), path_.c_str()) == 0,
            "cannot move " << quoted(temp_) << " to " << quoted(path_) << ": " << std::strerror(errno));
  temp_.clear();
  // The rename itself lives in the directory: sync it too (best effort; some file systems refuse).
  int dir = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void write_output_file(const std::string& path, const std::string& text) {
  OutputFile out(path);
  out.write(text);
  out.commit();
}

}  // namespace dpt
