/// @file report.h
/// @brief What a chapter prints: rank-0 narration, a progress bar, an
/// end-of-run summary table, and per-step metrics as JSON lines.
///
/// Only rank 0 talks (every rank runs the same program; N copies of every
/// line would bury the lesson). `--quiet` silences narration and the bar but
/// never the summary table or errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "dpt/output_file.h"

namespace dpt {

/// Narration for one rank: prints when `enabled` (rank 0 and not --quiet).
class Narrator {
 public:
  /// Prints only when `enabled`.
  explicit Narrator(bool enabled) : enabled_(enabled) {}
  /// A banner for a new section of the lecture: "── 2. Backward ─────".
  void section(const std::string& title) const;
  /// One paragraph or line of narration.
  void say(const std::string& text) const;
  /// True when this narrator prints.
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
};

/// A progress bar on stderr: redrawn in place on a terminal, a line per 10%
/// otherwise (so CI logs stay short). Does nothing when disabled.
class ProgressBar {
 public:
  /// A bar named `label` counting to `total`; inert unless `enabled`.
  ProgressBar(std::string label, int64_t total, bool enabled);
  /// Marks `done` of `total` units finished; `status` is shown after the bar.
  void update(int64_t done, const std::string& status = "");
  /// Completes the bar and ends its line.
  void finish(const std::string& status = "");

 private:
  std::string label_;
  int64_t total_;
  bool enabled_, tty_;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

/// A plain-text table with a title, aligned columns, and a rule under the header.
class Table {
 public:
  /// A table titled `title` with these column headers.
  Table(std::string title, std::vector<std::string> headers);
  /// Appends a row (as many cells as headers).
  void add_row(std::vector<std::string> cells);
  /// Renders the table.
  std::string str() const;
  /// Prints the table to `out`.
  void print(std::ostream& out) const;
  /// True before the first add_row().
  bool empty() const { return rows_.empty(); }

 private:
  std::string title_;
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

/// `value` with `digits` significant digits ("0.0123", "1.23e+06").
std::string fmt(double value, int digits = 4);
/// `value` with `decimals` digits after the point ("3.14").
std::string fixed(double value, int decimals = 2);

/// Its arguments one after another, as `<<` writes them: a sentence of words
/// and counts, `str("worker ", w, " of ", W)` = "worker 2 of 4". Integers
/// read as std::to_string writes them; give a floating-point value its
/// digits with fmt() or fixed() first.
template <typename... Parts>
std::string str(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

/// Writes one JSON object per line (JSONL) to a file; does nothing without a
/// path. Like every output (output_file.h) the lines go to a temporary file
/// beside the target ("m.jsonl.tmp.XXXXXX", which can be watched while the run
/// goes) that replaces the target when the writer is done; a run that fails,
/// diverges or is interrupted leaves the old file as it was.
class MetricsWriter {
 public:
  /// Prepares `path` (with `append`, the new file starts with the lines
  /// written to it so far: this run's, inside an OutputRun; see
  /// written_so_far); an empty path writes nothing. Throws dpt::Error if the path is refused.
  explicit MetricsWriter(const std::string& path, bool append = false);
  /// Puts the file in place (commit), unless an exception is unwinding the
  /// scope that owns the writer: then the old file stays.
  ~MetricsWriter() noexcept(false);
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  /// Writes {"step": step, key: value, …} (non-finite values as null) in one write.
  void write(int64_t step, const std::map<std::string, double>& values);
  /// Puts the file in place now (the destructor does, if not called); the writer writes nothing after it.
  void commit();
  /// True when a file is being written.
  bool enabled() const { return out_ != nullptr; }

 private:
  std::unique_ptr<OutputFile> out_;
  std::string path_;
  int unwinding_at_start_ = 0;  // std::uncaught_exceptions() when constructed
};

/// Seconds since `start`.
double seconds_since(std::chrono::steady_clock::time_point start);

}  // namespace dpt
