// call_check.cpp — the sentence that names the ranks whose collective calls
// differ. Shared by threads/collectives.cpp and mpi/collectives.cpp, so both
// backends report a mismatch the same way.
#include "comm/call_check.h"

#include <sstream>

namespace dpt {
namespace detail {

const char* collective_name(Collective c) {
  static const char* names[] = {"all_reduce", "reduce_scatter", "all_gather",
                                "broadcast",  "barrier",        "all_gather_bytes"};
  return names[int(c)];
}

std::string mismatch(const std::vector<CollectiveCall>& calls) {
  std::ostringstream out;
  auto list = [&](auto field) {
    for (std::size_t r = 0; r < calls.size(); ++r)
      out << (r ? ", " : "") << "rank " << r << ": " << field(calls[r]);
  };
  const CollectiveCall& first = calls.at(0);
  const char* what = collective_name(first.kind);
  for (const CollectiveCall& c : calls) {
    if (c.kind != first.kind) {
      out << "ranks called different collectives at the same point (";
      list([](const CollectiveCall& t) { return collective_name(t.kind); });
      out << "): every rank must call the same collectives in the same order";
      return out.str();
    }
  }
  for (const CollectiveCall& c : calls) {
    if (c.count != first.count) {
      out << what << ": ranks passed different counts (";
      list([](const CollectiveCall& t) { return t.count; });
      out << "): every rank must pass the same count";
      return out.str();
    }
    if (c.root != first.root) {
      out << what << ": ranks named different roots (";
      list([](const CollectiveCall& t) { return t.root; });
      out << "): every rank must name the same root";
      return out.str();
    }
    if (c.op != first.op) {
      out << what << ": ranks asked for different reductions (";
      list([](const CollectiveCall& t) { return reduce_op_name(t.op); });
      out << "): every rank must pass the same op";
      return out.str();
    }
    if (c.gpu_memory != first.gpu_memory) {
      out << what << ": ranks passed buffers in different memories (";
      list([](const CollectiveCall& t) { return t.gpu_memory ? "GPU" : "host"; });
      out << "): every rank must pass GPU memory, or every rank host memory";
      return out.str();
    }
  }
  return "";
}

}  // namespace detail
}  // namespace dpt
