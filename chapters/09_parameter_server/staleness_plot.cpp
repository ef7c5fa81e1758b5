// staleness_plot.cpp — the staleness histogram as SVG (staleness_plot.h).
// Hand-written SVG: a frame, one bar per staleness value, its count above it.
#include "staleness_plot.h"

#include <algorithm>
#include <sstream>

#include "dpt/output_file.h"

namespace dpt::ch09 {

namespace {
// counts[s] = how many entries equal s, for s = 0 … largest.
std::vector<int64_t> histogram(const std::vector<int64_t>& staleness, int64_t largest) {
  std::vector<int64_t> counts(std::size_t(largest + 1), 0);
  for (int64_t s : staleness)
    if (s >= 0 && s <= largest) ++counts[std::size_t(s)];
  return counts;
}

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}
}  // namespace

void write_staleness_plot(const std::string& path, const std::string& title, const std::vector<int64_t>& measured,
                          const std::vector<int64_t>& implied) {
  if (path.empty()) return;
  int64_t largest = 0;
  for (int64_t s : measured) largest = std::max(largest, s);
  for (int64_t s : implied) largest = std::max(largest, s);
  const std::vector<int64_t> seen = histogram(measured, largest), expected = histogram(implied, largest);
  int64_t tallest = 1;
  for (std::size_t s = 0; s < seen.size(); ++s) tallest = std::max({tallest, seen[s], expected[s]});
  const double left = 60, top = 40, width = 560, height = 260, slot = width / double(seen.size());
  auto y_of = [&](int64_t count) { return top + height - height * double(count) / double(tallest); };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"660\" height=\"360\" font-family=\"sans-serif\" "
      << "font-size=\"12\">\n<rect width=\"660\" height=\"360\" fill=\"white\"/>\n"
      << "<text x=\"330\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" << escaped(title) << "</text>\n"
      << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << width << "\" height=\"" << height
      << "\" fill=\"none\" stroke=\"#888\"/>\n";
  const int64_t every = std::max<int64_t>(1, int64_t(seen.size()) / 20);  // at most ~20 labels
  for (std::size_t s = 0; s < seen.size(); ++s) {
    const double x = left + slot * double(s) + slot * 0.15, w = slot * 0.7;
    svg << "<rect x=\"" << x << "\" y=\"" << y_of(seen[s]) << "\" width=\"" << w << "\" height=\""
        << top + height - y_of(seen[s]) << "\" fill=\"#4a7fb0\"/>\n"
        << "<rect x=\"" << x << "\" y=\"" << y_of(expected[s]) << "\" width=\"" << w << "\" height=\""
        << top + height - y_of(expected[s]) << "\" fill=\"none\" stroke=\"#d0652a\" stroke-width=\"2\"/>\n";
    if (int64_t(s) % every == 0)
      svg << "<text x=\"" << x + w / 2 << "\" y=\"" << top + height + 16 << "\" text-anchor=\"middle\">" << s
          << "</text>\n";
    if (seen[s] > 0)
      svg << "<text x=\"" << x + w / 2 << "\" y=\"" << y_of(seen[s]) - 4 << "\" text-anchor=\"middle\" "
          << "font-size=\"10\">" << seen[s] << "</text>\n";
  }
  svg << "<text x=\"" << left + width / 2 << "\" y=\"" << top + height + 36 << "\" text-anchor=\"middle\">"
      << "staleness: updates the shard took between the worker's pull and its push</text>\n"
      << "<text x=\"16\" y=\"" << top + height / 2 << "\" transform=\"rotate(-90 16 " << top + height / 2
      << ")\" text-anchor=\"middle\">pushes</text>\n"
      << "<text x=\"" << left + width - 4 << "\" y=\"" << top + 14 << "\" text-anchor=\"end\">"
      << "<tspan fill=\"#4a7fb0\">■ measured</tspan>  <tspan fill=\"#d0652a\">□ implied by the arrival order</tspan>"
      << "</text>\n</svg>\n";
  write_output_file(path, svg.str());
}

}  // namespace dpt::ch09
