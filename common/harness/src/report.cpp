// report.cpp — narration, progress bar, tables, metrics JSONL.
#include "dpt/report.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dpt/check.h"

namespace dpt {

// ----------------------------------------------------------------------------
// narration

void Narrator::section(const std::string& title) const {
  if (!enabled_) return;
  std::string rule(std::max<int>(4, 72 - int(title.size()) - 4), '-');
  std::cout << "\n-- " << title << " " << rule << "\n";
}

void Narrator::say(const std::string& text) const {
  if (enabled_) std::cout << text << "\n";
}

// ----------------------------------------------------------------------------
// progress bar

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), enabled_(enabled),
      tty_(::isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()), last_draw_() {}

void ProgressBar::update(int64_t done, const std::string& status) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  int decile = int(10 * done / total_);
  bool final = done >= total_;
  if (tty_) {
    if (!final && now - last_draw_ < std::chrono::milliseconds(50)) return;  // ≤ 20 redraws/s
  } else if (decile == last_decile_ && !final) {
    return;
  }
  last_draw_ = now;
  last_decile_ = decile;
  std::cout << std::flush;  // keep narration (stdout) and the bar (stderr) in order
  const int width = 30;
  int filled = int(width * std::min<int64_t>(done, total_) / total_);
  std::string bar = std::string(filled, '#') + std::string(width - filled, '.');
  double elapsed = seconds_since(start_);
  char line[256];
  std::snprintf(line, sizeof line, "%s [%s] %lld/%lld %.1fs %s", label_.c_str(), bar.c_str(),
                (long long)done, (long long)total_, elapsed, status.c_str());
  if (tty_) std::cerr << "\r" << line << "\x1b[K" << std::flush;
  else std::cerr << line << "\n";
}

void ProgressBar::finish(const std::string& status) {
  if (!enabled_) return;
  if (tty_ || last_decile_ < 10) {
    last_draw_ = {};
    update(total_, status);
  }
  if (tty_) std::cerr << "\n";
  enabled_ = false;
}

// ----------------------------------------------------------------------------
// tables

Table::Table(std::string title, std::vector<std::string> headers)
    : title_(std::move(title)), headers_(std::move(headers)) {}

void Table::add_row(std::vector<std::string> cells) {
  DPT_CHECK(cells.size() == headers_.size(),
            "table '" << title_ << "': row has " << cells.size() << " cells for " << headers_.size() << " columns");
  rows_.push_back(std::move(cells));
}

std::string Table::str() const {
  std::vector<std::size_t> width(headers_.size());
  for (std::size_t c = 0; c < headers_.size(); ++c) {
    width[c] = headers_[c].size();
    for (auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto render = [&](const std::vector<std::string>& cells) {
    std::string line = " ";
    for (std::size_t c = 0; c < cells.size(); ++c) {
      // First column left-aligned (labels), the rest right-aligned (numbers).
      std::string pad(width[c] - cells[c].size(), ' ');
      line += c == 0 ? cells[c] + pad : pad + cells[c];
      line += c + 1 < cells.size() ? "  " : "";
    }
    return line + "\n";
  };
  std::size_t total = 1;
  for (auto w : width) total += w + 2;
  std::string out = "\n" + title_ + "\n" + render(headers_) + " " + std::string(total - 3, '-') + "\n";
  for (auto& row : rows_) out += render(row);
  return out;
}

void Table::print(std::ostream& out) const { out << str() << std::flush; }

std::string fmt(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return text;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// ----------------------------------------------------------------------------
// metrics

MetricsWriter::MetricsWriter(const std::string& path, bool append)
    : path_(path), unwinding_at_start_(std::uncaught_exceptions()) {
  if (path.empty()) return;
  std::string old_lines;
  std::string so_far = append ? written_so_far(path) : "";  // in a run: its own lines, not the old file's
  struct stat st;
  if (!so_far.empty() && ::lstat(so_far.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {  // never a device's endless bytes
    std::ifstream in(so_far, std::ios::binary);
    old_lines.assign(std::istreambuf_iterator<char>(in), {});
  }
  out_ = std::make_unique<OutputFile>(path);
  out_->write(old_lines);
}

MetricsWriter::~MetricsWriter() noexcept(false) {
  if (out_ && std::uncaught_exceptions() == unwinding_at_start_) commit();
}

void MetricsWriter::commit() {
  if (!out_) return;
  std::unique_ptr<OutputFile> out = std::move(out_);
  out->commit();
}

void MetricsWriter::write(int64_t step, const std::map<std::string, double>& values) {
  if (!out_) return;
  nlohmann::json line = {{"step", step}};
  for (auto& [key, value] : values) line[key] = std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
  out_->write(line.dump() + "\n");  // one write(2) per line: a reader tailing the file sees whole lines
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace dpt
