// bytes_and_plot.cpp — bytes per step by formula and by the traffic log, the
// PowerSGD full-rank check, the SVG plot (bytes_and_plot.h).
#include "bytes_and_plot.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "ch10.h"
#include "dpt/holes.h"
#include "dpt/output_file.h"

namespace dpt::ch10 {

double payload_formula(const std::string& spec, const std::vector<Shape>& shapes, int world) {
  const double n = world;
  double psi = 0, sign = 0, matrices = 0, vectors = 0;
  const std::size_t colon = spec.find(':');
  const double r = colon == std::string::npos ? 0 : std::stod(spec.substr(colon + 1));
  for (const Shape& s : shapes) {
    const double size = double(shape_numel(s));
    psi += size;
    sign += 4 * (std::ceil(size / 32) + 1);
    if (s.size() == 2) matrices += 4 * r * double(s[0] + s[1]);
    else vectors += 4 * size;
  }
  if (spec == "none") return 4 * psi;
  if (spec == "fp16" || spec == "bf16") return 2 * (n - 1) * std::ceil(std::ceil(psi / 2) / n) * 4;
  if (spec.rfind("topk:", 0) == 0) return 8 * r;
  if (spec == "sign") return sign;
  return matrices + vectors;  // powersgd:R
}

double wire_formula(const std::string& spec, const std::vector<Shape>& shapes, int world) {
  const double n = world, payload = payload_formula(spec, shapes, world);
  if (spec == "fp16" || spec == "bf16") return payload;
  if (spec == "sign" || spec.rfind("topk:", 0) == 0) return (n - 1) * payload;
  return 2 * (n - 1) / n * payload;
}

double measured_payload(const TrafficLog& t, int rank, int64_t steps) {
  if (steps <= 0) return 0;
  const double all = double(t.bytes_sent(rank) + t.collective_bytes("all_reduce", rank) +
                            t.collective_bytes("all_gather", rank));
  return all / double(steps) - 4;  // the loop's loss: one float all-reduced per step
}

double wire_bytes(const TrafficLog& t, int rank, int64_t steps) {
  if (steps <= 0) return 0;
  const double n = t.world();
  const double reduce = double(t.collective_bytes("all_reduce", rank)) / double(steps) - 4;
  const double gather = double(t.collective_bytes("all_gather", rank)) / double(steps);
  return 2 * (n - 1) / n * reduce + (n - 1) * gather + double(t.bytes_sent(rank)) / double(steps);
}

namespace {
// max |approxᵀ approx − q qᵀ| / max |q qᵀ| seen along `count` random unit-
// normal directions z_j (cols,): the Gram of the a_j = approx z_j against
// the Gram of the b_j = qᵀ z_j. approx = P qᵀ with PᵀP = I makes them equal
// (a_iᵀ a_j = z_iᵀ q PᵀP qᵀ z_j = b_iᵀ b_j); a q that is not approx's factor
// (left as it came, or not transposed back) does not. NaN for wrong shapes.
double factor_gap(const std::vector<float>& approx, const Tensor& q, int64_t rows, int64_t cols, uint64_t seed) {
  if (int64_t(approx.size()) != rows * cols || q.shape().size() != 2 || q.shape()[0] != cols) return std::nan("");
  const int64_t rank = q.shape()[1];
  const std::size_t count = 8;
  const std::vector<float> qv = q.to_vector();
  std::mt19937_64 generator(seed);
  std::normal_distribution<double> normal;
  std::vector<std::vector<double>> a(count), b(count);  // a_j = approx z_j (rows,), b_j = qᵀ z_j (R,)
  for (std::size_t j = 0; j < count; ++j) {
    std::vector<double> z(static_cast<std::size_t>(cols));
    for (double& v : z) v = normal(generator);
    a[j].assign(static_cast<std::size_t>(rows), 0), b[j].assign(static_cast<std::size_t>(rank), 0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < cols; ++c) a[j][std::size_t(i)] += double(approx[std::size_t(i * cols + c)]) * z[std::size_t(c)];
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t k = 0; k < rank; ++k) b[j][std::size_t(k)] += double(qv[std::size_t(c * rank + k)]) * z[std::size_t(c)];
  }
  auto dot = [](const std::vector<double>& x, const std::vector<double>& y) {
    double sum = 0;
    for (std::size_t e = 0; e < x.size(); ++e) sum += x[e] * y[e];
    return sum;
  };
  double gap = 0, largest = 0;
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t j = 0; j < count; ++j) {
      const double d = std::fabs(dot(a[i], a[j]) - dot(b[i], b[j]));
      gap = std::isnan(d) || std::isnan(gap) ? std::nan("") : std::max(gap, d);
      largest = std::max(largest, std::fabs(dot(b[i], b[j])));
    }
  return gap / largest;
}

double worse(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }
}  // namespace

HoleProbe powersgd_full_rank_probe(Communicator& comm, const std::vector<Shape>& shapes, uint64_t seed) {
  HoleProbe probe;
  probe.error = probe.factors = 0;
  for (const Shape& s : shapes) {
    if (s.size() != 2) continue;
    const int64_t rows = s[0], cols = s[1], rank = std::min(rows, cols);
    auto matrix_of = [&](int r) {  // rank r's matrix, entries N(0, 1)
      std::mt19937_64 generator(seed + uint64_t(r));
      std::normal_distribution<float> normal;
      std::vector<float> m(std::size_t(rows * cols));
      for (float& v : m) v = normal(generator);
      return m;
    };
    std::vector<double> mean(std::size_t(rows * cols), 0);
    for (int r = 0; r < comm.size() && comm.rank() == 0; ++r) {  // rank 0 judges: n matrices, not n² over the ranks
      const std::vector<float> m = matrix_of(r);
      for (std::size_t i = 0; i < m.size(); ++i) mean[i] += double(m[i]) / comm.size();
    }
    std::mt19937_64 generator(seed + 1000003);
    std::normal_distribution<float> normal;
    std::vector<float> q_in(std::size_t(cols * rank));
    for (float& v : q_in) v = normal(generator);
    Tensor q = Tensor::from_vector({cols, rank}, q_in, Device::host()), result;
    const auto round = [&] { powersgd_round(comm, Tensor::from_vector(s, matrix_of(comm.rank()), Device::host()), q, result); };
    probe.hole = unwritten_hole(comm, round);
    if (!probe.hole.empty()) {  // the hole, not written yet: nothing measured
      probe.error = probe.factors = std::nan("");
      return probe;
    }
    const std::vector<float> approx = result.defined() ? result.to_vector() : std::vector<float>();
    if (comm.rank() != 0) continue;
    double largest = 0, gap = 0;
    for (std::size_t i = 0; i < mean.size(); ++i) {
      largest = std::max(largest, std::fabs(mean[i]));
      const double d = i < approx.size() ? std::fabs(double(approx[i]) - mean[i]) : std::nan("");
      gap = std::isnan(d) || std::isnan(gap) ? std::nan("") : std::max(gap, d);
    }
    if (approx.size() != mean.size()) gap = std::nan("");
    probe.error = worse(probe.error, gap / largest);
    probe.factors = worse(probe.factors, factor_gap(approx, q, rows, cols, seed + 2000003));
  }
  return probe;
}

HoleProbe topk_decode_probe(Communicator& comm, int64_t psi, int64_t k, uint64_t seed) {
  auto vector_of = [&](int r) {  // distinct magnitudes; entries 0, 7, 14, … large on every rank
    std::mt19937_64 generator(seed + uint64_t(r));
    std::uniform_real_distribution<float> uniform(-1, 1);
    std::vector<float> x(static_cast<std::size_t>(psi));
    for (float& v : x) v = uniform(generator);
    for (int64_t i = 0; i < psi; i += 7) x[std::size_t(i)] += float(4 + r);
    return x;
  };
  std::vector<double> mean(static_cast<std::size_t>(psi), 0);
  for (int r = 0; r < comm.size() && comm.rank() == 0; ++r) {  // rank 0 judges
    const std::vector<float> x = vector_of(r);
    std::vector<int64_t> order(x.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return std::fabs(x[std::size_t(a)]) > std::fabs(x[std::size_t(b)]); });
    for (int64_t j = 0; j < k; ++j) mean[std::size_t(order[std::size_t(j)])] += double(x[std::size_t(order[std::size_t(j)])]) / comm.size();
  }
  std::vector<float> x = vector_of(comm.rank()), delivered;
  const auto reduce = [&] { make_compressor("topk:" + std::to_string(k), {{psi}}, seed)->reduce(comm, x, delivered); };
  HoleProbe probe;
  probe.hole = unwritten_hole(comm, reduce);
  if (!probe.hole.empty()) return probe;  // the hole decodes: not written yet, nothing measured
  probe.error = 0;
  if (comm.rank() != 0) return probe;
  double gap = 0, largest = 0;
  for (std::size_t i = 0; i < mean.size(); ++i) {
    const double d = std::fabs(double(x[i]) - mean[i]);
    gap = std::isnan(d) || std::isnan(gap) ? std::nan("") : std::max(gap, d);
    largest = std::max(largest, std::fabs(mean[i]));
  }
  probe.error = gap / largest;
  return probe;
}

namespace {
constexpr double kMarkerRadius = 5;      // drawn with a 2 px stroke: it reaches 6 px from its centre
constexpr double kCharWidth = 7;         // 12 px sans-serif, a generous average
constexpr double kAscent = 10, kDescent = 3;

struct LabelPlace { double x, y; bool end; };  // baseline start (or end, text-anchor="end")
struct Box { double x0, y0, x1, y1; };

Box box_of(const LabelPlace& l, std::size_t chars) {
  const double w = kCharWidth * double(chars);
  return l.end ? Box{l.x - w, l.y - kAscent, l.x, l.y + kDescent} : Box{l.x, l.y - kAscent, l.x + w, l.y + kDescent};
}
bool overlap(const Box& a, const Box& b) { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1; }

// Each label beside its own point: right, left, then above or below on
// either side; the first place that covers no marker and no label placed
// before it, else the first that covers no marker. A label never moves
// away from its point to make room.
std::vector<LabelPlace> place_labels(const std::vector<PlotPoint>& points, const std::vector<std::pair<double, double>>& at) {
  const double reach = kMarkerRadius + 1;
  std::vector<Box> markers, placed;
  for (const auto& [x, y] : at) markers.push_back({x - reach, y - reach, x + reach, y + reach});
  std::vector<LabelPlace> out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double x = at[i].first, y = at[i].second, gap = reach + 3;
    const std::vector<LabelPlace> options = {{x + gap, y + 4, false}, {x - gap, y + 4, true},
                                             {x + 2, y - gap, false}, {x + 2, y + gap + kAscent, false},
                                             {x - 2, y - gap, true},  {x - 2, y + gap + kAscent, true}};
    const LabelPlace* chosen = nullptr;
    for (int pass = 0; pass < 2 && !chosen; ++pass)
      for (const LabelPlace& l : options) {
        const Box b = box_of(l, points[i].label.size());
        bool clear = true;
        for (const Box& m : markers) clear = clear && !overlap(b, m);
        for (const Box& p : placed) clear = clear && (pass == 1 || !overlap(b, p));
        if (clear) { chosen = &l; break; }
      }
    out.push_back(chosen ? *chosen : options[0]);
    placed.push_back(box_of(out.back(), points[i].label.size()));
  }
  return out;
}
}  // namespace

void write_accuracy_plot(const std::string& path, const std::string& title, const std::vector<PlotPoint>& points) {
  if (path.empty() || points.empty()) return;
  double low = 1e300, high = 0, worst = 1, best = 0;
  for (const PlotPoint& p : points) {
    low = std::min(low, std::max(p.bytes, 1.0)), high = std::max(high, std::max(p.bytes, 1.0));
    worst = std::min(worst, p.accuracy), best = std::max(best, p.accuracy);
  }
  const double lo = std::floor(std::log10(low)), hi = std::max(lo + 1, std::ceil(std::log10(high)));
  const double acc_lo = std::floor(worst * 20) / 20, acc_hi = std::max(acc_lo + 0.05, std::ceil(best * 20) / 20);
  const double left = 70, top = 40, width = 560, height = 300;
  auto x_of = [&](double b) { return left + width * (std::log10(std::max(b, 1.0)) - lo) / (hi - lo); };
  auto y_of = [&](double a) { return top + height - height * (a - acc_lo) / (acc_hi - acc_lo); };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"400\" font-family=\"sans-serif\" "
         "font-size=\"12\">\n<rect width=\"720\" height=\"400\" fill=\"white\"/>\n"
      << "<text x=\"360\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" << title << "</text>\n"
      << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << width << "\" height=\"" << height
      << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (double e = lo; e <= hi; ++e)
    svg << "<text x=\"" << x_of(std::pow(10, e)) << "\" y=\"" << top + height + 16 << "\" text-anchor=\"middle\">1e"
        << int(e) << "</text>\n";
  for (double a = acc_lo; a <= acc_hi + 1e-9; a += 0.05)
    svg << "<text x=\"" << left - 6 << "\" y=\"" << y_of(a) + 4 << "\" text-anchor=\"end\">" << int(std::lround(100 * a))
        << "%</text>\n";
  svg << "<text x=\"" << left + width / 2 << "\" y=\"" << top + height + 34
      << "\" text-anchor=\"middle\">bytes on the wire per rank per step (log)</text>\n"
      << "<text x=\"18\" y=\"" << top + height / 2 << "\" transform=\"rotate(-90 18 " << top + height / 2
      << ")\" text-anchor=\"middle\">held-out accuracy</text>\n";
  std::vector<std::pair<double, double>> at;
  for (const PlotPoint& p : points) at.push_back({x_of(p.bytes), y_of(p.accuracy)});
  const std::vector<LabelPlace> places = place_labels(points, at);
  for (std::size_t i = 0; i < points.size(); ++i) {  // a point, then its label beside it
    const PlotPoint& p = points[i];
    svg << "<g><circle cx=\"" << at[i].first << "\" cy=\"" << at[i].second << "\" r=\"" << kMarkerRadius
        << "\" stroke=\"#1f77b4\" stroke-width=\"2\" fill=\"" << (p.error_feedback ? "#1f77b4" : "white") << "\"/><text x=\""
        << places[i].x << "\" y=\"" << places[i].y << "\"" << (places[i].end ? " text-anchor=\"end\"" : "") << ">" << p.label
        << "</text></g>\n";
  }
  svg << "<text x=\"" << left + 8 << "\" y=\"" << top + 16 << "\">filled: with error feedback; hollow: without</text>\n"
      << "</svg>\n";
  write_output_file(path, svg.str());
}

}  // namespace dpt::ch10
