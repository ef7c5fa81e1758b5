// exchange_pairs.cpp — the two exchange pairs (exchange_pairs.h).
#include "exchange_pairs.h"

#include "ch12.h"

namespace dpt::ch15 {

ExchangePair tensor_parallel_pair(Communicator& group) {
  Communicator* comm = &group;
  return {[comm](const Tensor& x) { return ch12::copy_to_tp_region(*comm, x); },
          [comm](const Tensor& partial) { return ch12::reduce_from_tp_region(*comm, partial); }};
}

ExchangePair sequence_parallel_pair(Communicator& group, int64_t batch) {
  Communicator* comm = &group;
  return {[comm, batch](const Tensor& mine) { return gather_sequence(*comm, mine, batch); },
          [comm, batch](const Tensor& partial) { return scatter_sequence(*comm, partial, batch); }};
}

}  // namespace dpt::ch15
