// test_ch10_plot.cpp — the accuracy-against-bytes plot, read back from its
// SVG: every label sits beside its own point (no other marker nearer to it
// than its own) and covers no marker, on the page's Fashion-MNIST numbers
// (sign and sign +EF drawn on one spot, fp16 and bf16 3 px apart) and a
// bare run's.
#include "support/catch.h"
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "bytes_and_plot.h"
#include "support/run_program.h"

using namespace dpt;
using namespace dpt::ch10;

namespace {
struct Drawn {
  double cx, cy;           // the marker's centre
  double x0, y0, x1, y1;   // its label's box
  std::string label;
};

// Every <circle> with the <text> that follows it in the same <g>. A label's
// box: 7 px a character (12 px sans-serif, generous), 10 px above its
// baseline, 3 below; text-anchor="end" puts the box left of x.
std::vector<Drawn> read_plot(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string svg = text.str();
  const std::regex point("<g><circle cx=\"([-0-9.e]+)\" cy=\"([-0-9.e]+)\"[^>]*/><text x=\"([-0-9.e]+)\" y=\"([-0-9.e]+)\"( text-anchor=\"end\")?>([^<]*)</text></g>");
  std::vector<Drawn> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), point); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const double x = std::stod(m[3]), y = std::stod(m[4]), w = 7.0 * double(m[6].length());
    const bool end = m[5].matched;
    out.push_back({std::stod(m[1]), std::stod(m[2]), end ? x - w : x, y - 10, end ? x : x + w, y + 3, m[6]});
  }
  return out;
}

// Distance from (x, y) to a box; 0 inside it.
double distance(const Drawn& box, double x, double y) {
  const double dx = std::max({box.x0 - x, 0.0, x - box.x1}), dy = std::max({box.y0 - y, 0.0, y - box.y1});
  return std::hypot(dx, dy);
}

void check_labels(const std::vector<PlotPoint>& points, const std::string& name) {
  const std::string path = dpt_test::temp_path("ch10_plot_" + name + ".svg");
  write_accuracy_plot(path, "test", points);
  const std::vector<Drawn> drawn = read_plot(path);
  std::remove(path.c_str());
  REQUIRE(drawn.size() == points.size());
  const double marker = 6;  // radius 5 and a 2 px stroke
  for (const Drawn& d : drawn) {
    const double own = distance(d, d.cx, d.cy);
    INFO(name << ": label '" << d.label << "' is " << own << " px from its own marker's centre");
    CHECK(own >= marker);        // it does not cover its own marker
    CHECK(own <= marker + 12);   // and stays beside it
    for (const Drawn& other : drawn) {
      if (&other == &d) continue;
      const double far = distance(d, other.cx, other.cy);
      INFO(name << ": label '" << d.label << "' is " << far << " px from the marker of '" << other.label << "', "
                << own << " px from its own — a label never covers another marker, and never sits nearer to "
                   "another point than to its own");
      CHECK(far >= marker);
      CHECK(far >= own - 1e-9);
    }
  }
}
}  // namespace

TEST_CASE("the accuracy-against-bytes plot: every label beside its own point, covering no marker", "[ch10]") {
  const double KiB = 1024, MiB = 1024 * 1024;
  check_labels({{"none", 1.16 * MiB, 0.817, false}, {"fp16", 596 * KiB, 0.818, false}, {"bf16", 596 * KiB, 0.817, false},
                {"topk:2035", 47.7 * KiB, 0.782, false}, {"sign", 74.6 * KiB, 0.824, false},
                {"powersgd:2", 16.9 * KiB, 0.763, false}, {"topk:2035 +EF", 47.7 * KiB, 0.828, true},
                {"sign +EF", 74.6 * KiB, 0.824, true}, {"powersgd:2 +EF", 16.9 * KiB, 0.820, true}},
               "fashion");
  check_labels({{"none", 1.16 * MiB, 0.779, false}, {"fp16", 596 * KiB, 0.778, false}, {"bf16", 596 * KiB, 0.778, false},
                {"topk:2035", 47.7 * KiB, 0.730, false}, {"sign", 74.6 * KiB, 0.763, false},
                {"powersgd:2", 16.9 * KiB, 0.705, false}, {"topk:2035 +EF", 47.7 * KiB, 0.772, true},
                {"sign +EF", 74.6 * KiB, 0.777, true}, {"powersgd:2 +EF", 16.9 * KiB, 0.780, true}},
               "bare");
}
