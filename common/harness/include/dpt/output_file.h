/// @file output_file.h
/// @brief Every file dpt writes (--save-weights, --save-data, --metrics,
/// --trace) goes through here: written so that a crash, a full disk or a
/// surprising path never destroys what was there.
///
/// The policy, by what the path names when the run starts:
///
/// | at the path              | what dpt does                                              |
/// |--------------------------|------------------------------------------------------------|
/// | nothing yet              | creates it (a document: atomically, see below)             |
/// | a regular file           | replaces it atomically, keeping its permission bits        |
/// | a character device       | writes into it in place: `/dev/null` discards, `/dev/full` fails with "no space left" |
/// | a symbolic link          | refuses: replacing the link or writing through it would both surprise someone; give the real path |
/// | a directory, a FIFO, a socket, a block device | refuses (a FIFO nobody reads would hang the run; a disk device is not a file) |
///
/// *Atomically* means: the bytes go to a fresh temporary file in the same
/// directory (so the rename cannot cross file systems), are fsync'ed, and the
/// temporary file is renamed over the target, so a reader sees the old file or
/// the whole new one, never half of it. If anything fails, the temporary file
/// is removed and the target is untouched.
///
/// Every output is a document, the metrics JSONL too: a run that is killed,
/// interrupted or fails keeps the old file. SIGINT and SIGTERM remove the
/// temporary files being written before the process ends (where the program
/// has not set its own handler for them); SIGKILL cannot, and leaves
/// `NAME.tmp.XXXXXX` beside the target.
///
/// A run's outputs are one transaction (`OutputRun`, opened by run_guarded
/// around every chapter): each finished file waits beside its target, and only
/// when the run has ended well are they all renamed into place. A run that
/// fails, is interrupted or cannot write its last output (`--save-weights
/// /dev/full`) leaves every target as it was, not the plot and metrics it
/// wrote before. A checkpoint (`PublishNow`) is the exception: it exists to
/// survive a crash later in the run.
///
/// An output may not be one of the run's inputs, or another output: same file
/// (inode) or same path, or a file inside an input directory (a checkpoint
/// being read) is refused before any work is done (parse_flags, options.h:
/// every flag registered with `add_output` or checked with `output_path()`).
///
/// `check_output_path` applies the policy before any work is done, so a run
/// never trains for minutes and then finds it cannot save.
///
/// Left out: Windows, and NFS's weaker rename guarantees.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dpt {

/// Why `path` cannot be written under the policy above, as a sentence
/// ("'/tmp/x' is a symbolic link; ..."), or "" when it can. Checks that the
/// directory exists and is writable (root passes every permission check).
std::string output_path_problem(const std::string& path);

/// Throws dpt::Error "<flag>: <problem>" when output_path_problem(path) finds one.
void check_output_path(const std::string& flag, const std::string& path);

/// One output file being written; see the file comment for the policy.
///
///     OutputFile out("w.safetensors");   // throws if the policy refuses the path
///     out.write(bytes, n);               // throws on a write error (ENOSPC, EIO, …)
///     out.commit();                      // now the target holds the new bytes
///                                        // (inside an OutputRun: at its publish())
///
/// Destroyed without commit() (an exception on the way), a document leaves the
/// target as it was and no temporary file behind.
class OutputFile {
 public:
  /// Opens `path` for writing under the policy; throws dpt::Error naming the path if refused.
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  /// Appends `size` bytes; throws dpt::Error naming the path and the system's reason.
  void write(const void* bytes, std::size_t size);
  /// Appends `text`.
  void write(const std::string& text) { write(text.data(), text.size()); }
  /// Finishes: fsync, then rename over the target (inside an OutputRun, the
  /// rename waits for its publish()). Call once.
  void commit();
  /// The path being written.
  const std::string& path() const { return path_; }

 private:
  void discard();
  std::string path_;
  std::string temp_;  // the temporary file when the target is a regular file; "" otherwise
  int temp_slot_ = -1;  // its entry in the list SIGINT/SIGTERM clean up (-1: none)
  int fd_ = -1;
  bool regular_ = true;  // false for a character device (no fsync, no rename)
};

/// Writes `text` to `path` as one document (OutputFile + commit).
void write_output_file(const std::string& path, const std::string& text);

// ---- all of a run's outputs at its end, or none ----

/// Holds back every output of a run until the run has ended well.
///
///     OutputRun run;          // outputs committed from now on wait beside their targets
///     ... train, write the plot, the metrics, the weights ...
///     run.publish();          // all of them renamed into place, in the order they were finished
///
/// While one is open, OutputFile::commit() finishes the temporary file (written
/// and fsync'ed) and leaves the target alone; a second commit to the same
/// target replaces the first's waiting file. Destroyed without publish() (an
/// error, an exception), it removes every waiting file: all targets stay as
/// they were. A character device (/dev/null, /dev/full) is written in place
/// at once, as always, so a full device fails the run before anything is
/// published. One per process: an OutputRun opened inside another joins it
/// (its publish() and destructor leave the work to the outer one).
/// Left out: the renames are not one atomic step; one failing half-way
/// (a disk removed at that moment) leaves the earlier targets replaced.
class OutputRun {
 public:
  OutputRun();
  ~OutputRun();
  OutputRun(const OutputRun&) = delete;
  OutputRun& operator=(const OutputRun&) = delete;
  /// Renames every waiting file over its target; throws dpt::Error naming the
  /// file on failure (the files not yet renamed are removed).
  void publish();
};

/// While one exists on this thread, OutputFile::commit() puts its file in place
/// at once, even inside an OutputRun: for checkpoints, which must be on disk
/// before the run goes on (a crash later is what they are for).
class PublishNow {
 public:
  PublishNow();
  ~PublishNow();
  PublishNow(const PublishNow&) = delete;
  PublishNow& operator=(const PublishNow&) = delete;
};

/// The file that holds what this process has written to `path` so far: the
/// waiting temporary file inside an OutputRun ("" when the run has not written
/// `path` yet), `path` itself outside one. How an output that is extended in
/// two steps (the metrics' held-out line) reads its first part.
std::string written_so_far(const std::string& path);

/// A path a run reads or writes, with the flag that named it ("--metrics").
struct NamedPath {
  std::string flag;  ///< the flag, "--metrics"
  std::string path;  ///< the path it was given
};
/// Why the outputs clash with the inputs or with each other, as a sentence
/// ("--save-weights 'x' is the same file as --load-weights 'y': ..."), or "".
/// An output clashes when it names the same file (inode) or path as another
/// output or an input, or lies inside an input that is a directory.
std::string distinct_paths_problem(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

}  // namespace dpt
