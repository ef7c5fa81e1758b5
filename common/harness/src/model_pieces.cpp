// model_pieces.cpp — a split model's pieces sent to rank 0 and put in place.
//
// Rank r > 0 sends rank 0, in this order: how many pieces it holds, their
// headers (typed), then each piece's floats. Rank 0 takes the ranks in order
// 0, 1, …, so a rank only ever waits for rank 0 to reach it (no cycle, also
// when every send is a rendezvous). Each entry of the full model remembers
// which rank filled it: a second fill, or none, is the caller's split wrong.
#include "dpt/model_pieces.h"

#include <algorithm>
#include <string>

#include "dpt/check.h"
#include "dpt/flatten.h"

namespace dpt {

namespace {

// What rank 0 needs to know of a piece before its floats arrive.
struct PieceHeader {
  int64_t parameter, row, column, rows, columns;
};

PieceHeader header_of(const ModelPiece& p) {
  DPT_CHECK(p.value.defined() && (p.value.dim() == 1 || p.value.dim() == 2),
            "a piece of parameter " << p.parameter << " must hold a (rows, columns) block of a weight or a (rows,) "
                                    "block of a bias; its tensor is " << (p.value.defined() ? shape_str(p.value.shape()) : "undefined"));
  const Shape& s = p.value.shape();
  return {p.parameter, p.row, p.column, s[0], s.size() == 2 ? s[1] : 1};
}

// "fc1.weight (256, 784)": parameter k of an MLP of `widths`, for messages.
std::string parameter_name(const std::vector<int64_t>& widths, int64_t k) {
  const std::size_t l = std::size_t(k / 2);
  return "fc" + std::to_string(l) + (k % 2 == 0 ? ".weight (" + std::to_string(widths[l + 1]) + ", " + std::to_string(widths[l]) + ")"
                                                : ".bias (" + std::to_string(widths[l + 1]) + ",)");
}

// The full model on rank 0: its floats, and which rank filled each (-1: none yet).
struct Assembly {
  std::vector<int64_t> widths;
  std::vector<int64_t> offset;  // where parameter k starts in `flat`
  std::vector<float> flat;
  std::vector<int> filled_by;

  explicit Assembly(const std::vector<int64_t>& w) : widths(w) {
    DPT_CHECK(w.size() >= 2, "gather_model_flat needs the full model's widths {in, hidden..., out}");
    int64_t at = 0;
    for (std::size_t l = 0; l + 1 < w.size(); ++l) {
      offset.push_back(at), at += w[l + 1] * w[l];  // weight (out, in)
      offset.push_back(at), at += w[l + 1];         // bias (out,)
    }
    flat.assign(std::size_t(at), 0.0f);
    filled_by.assign(std::size_t(at), -1);
  }

  // Copies `h`'s block (row-major, from `data`) into place, from rank `rank`.
  void place(const PieceHeader& h, const float* data, int rank) {
    const int64_t parameters = int64_t(offset.size());
    DPT_CHECK(h.parameter >= 0 && h.parameter < parameters,
              "rank " << rank << " holds a piece of parameter " << h.parameter << ", but the model has " << parameters
                      << " (0 to " << parameters - 1 << ")");
    const std::size_t l = std::size_t(h.parameter / 2);
    const bool weight = h.parameter % 2 == 0;
    const int64_t rows = widths[l + 1], columns = weight ? widths[l] : 1;
    DPT_CHECK(h.row >= 0 && h.column >= 0 && h.row + h.rows <= rows && h.column + h.columns <= columns,
              "rank " << rank << "'s piece of " << parameter_name(widths, h.parameter) << " (rows " << h.row << " to "
                      << h.row + h.rows - 1 << ", columns " << h.column << " to " << h.column + h.columns - 1
                      << ") lies outside it");
    for (int64_t i = 0; i < h.rows; ++i)
      for (int64_t j = 0; j < h.columns; ++j) {
        const std::size_t at = std::size_t(offset[std::size_t(h.parameter)] + (h.row + i) * columns + h.column + j);
        DPT_CHECK(filled_by[at] < 0, "entry (" << h.row + i << ", " << h.column + j << ") of "
                                               << parameter_name(widths, h.parameter) << " is held by rank "
                                               << filled_by[at] << " and by rank " << rank
                                               << ": list a tensor held by several ranks on one of them only");
        filled_by[at] = rank;
        flat[at] = data[i * h.columns + j];
      }
  }

  void check_complete() const {
    for (std::size_t k = 0; k < offset.size(); ++k) {
      const int64_t end = k + 1 < offset.size() ? offset[k + 1] : int64_t(flat.size());
      const auto first = std::find(filled_by.begin() + offset[k], filled_by.begin() + end, -1);
      DPT_CHECK(first == filled_by.begin() + end,
                "no rank holds entry " << (first - filled_by.begin()) - offset[k] << " (row-major) of "
                                       << parameter_name(widths, int64_t(k)) << ": the pieces must cover the whole model");
    }
  }
};

}  // namespace

std::vector<ModelPiece> gradients_of(const std::vector<ModelPiece>& pieces) {
  std::vector<ModelPiece> grads = pieces;
  for (ModelPiece& p : grads) {
    DPT_CHECK(p.value.defined() && p.value.grad().defined(),
              "fc" << p.parameter / 2 << (p.parameter % 2 == 0 ? ".weight" : ".bias")
                   << "'s piece has no gradient after backward: the loss depends on it, so backward must reach it");
    p.value = p.value.grad();
  }
  return grads;
}

std::vector<ModelPiece> whole_layers(int64_t first_layer, const std::vector<Tensor>& params) {
  std::vector<ModelPiece> pieces;
  for (std::size_t i = 0; i < params.size(); ++i) pieces.push_back({2 * first_layer + int64_t(i), 0, 0, params[i]});
  return pieces;
}

std::vector<float> gather_model_flat(Communicator& comm, const std::vector<int64_t>& widths,
                                     const std::vector<ModelPiece>& pieces) {
  std::vector<PieceHeader> mine;
  for (const ModelPiece& p : pieces) mine.push_back(header_of(p));
  if (comm.rank() != 0) {  // rank 0 is taking the ranks before this one; then this one's count, headers, floats
    const int64_t count = int64_t(mine.size());
    comm.send(&count, 1, 0);
    comm.send(mine.data(), count, 0);
    for (const ModelPiece& p : pieces) comm.send(p.value, 0);
    return {};
  }
  Assembly full(widths);
  for (std::size_t k = 0; k < pieces.size(); ++k) full.place(mine[k], pieces[k].value.to(Device::host()).data(), 0);
  // Received on the device rank 0's own pieces live on (a GPU's buffers for a GPU's sends), then copied here.
  Device& device = pieces.empty() ? Device::host() : pieces.front().value.device();
  for (int r = 1; r < comm.size(); ++r) {
    int64_t count = 0;
    comm.recv(&count, 1, r);
    std::vector<PieceHeader> theirs(static_cast<std::size_t>(count));
    comm.recv(theirs.data(), count, r);
    for (const PieceHeader& h : theirs) {
      Tensor block = Tensor::empty({h.rows * h.columns}, device);
      comm.recv(block, r);
      full.place(h, block.to(Device::host()).data(), r);
    }
  }
  full.check_complete();
  return full.flat;
}

void gather_model(Communicator& comm, const std::vector<ModelPiece>& pieces, MLP* full) {
  DPT_CHECK(comm.rank() != 0 || full != nullptr, "gather_model: rank 0 must pass the model to gather into");
  const std::vector<float> flat = gather_model_flat(comm, comm.rank() == 0 ? full->widths() : std::vector<int64_t>{}, pieces);
  if (comm.rank() != 0) return;
  std::vector<Tensor> params = full->parameters();
  unflatten(flat, params);
}

}  // namespace dpt
