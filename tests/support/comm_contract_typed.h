// comm_contract_typed.h — the communicator contract for typed messages
// (communicator.h: send/recv/all_gather of integers and small records), run
// on every backend as the float contract is (support/comm_contract.h):
//
//   tests/core/test_comm_threads.cpp  DPT_COMM_TYPED_CONTRACT_TESTS("threads", ...)
//   tests/mpi/test_comm_mpi.cpp       DPT_COMM_TYPED_CONTRACT_TESTS("mpi", ...)
//
// Oracles are each rank's values, written down again from (rank, index): the
// integers are past float32's 24-bit significand, so a message that went
// through a float conversion anywhere cannot match.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/comm_contract.h"

namespace dpt_test {
namespace contract {

/// A small record with a padding hole and fields of three widths.
struct Record {
  int32_t rank;
  int64_t step;
  float loss;
  char label[3];
};

inline Record record_of(int rank) { return {rank, (int64_t(1) << 40) + 7 * rank, 0.5f + float(rank), {'r', char('0' + rank), 0}}; }

inline std::string record_difference(const Record& got, int rank) {
  const Record want = record_of(rank);
  if (got.rank == want.rank && got.step == want.step && got.loss == want.loss && got.label[0] == want.label[0] &&
      got.label[1] == want.label[1] && got.label[2] == want.label[2])
    return "";
  return "record from rank " + std::to_string(rank) + " arrived as {rank " + std::to_string(got.rank) + ", step " +
         std::to_string(got.step) + "}";
}

inline int64_t big(int rank, int i) { return (int64_t(1) << 53) + 1 + 1000 * rank + i; }  // odd: no float32 holds it

inline void typed_point_to_point(const ContractWorld& w) {
  std::string seen = "receiver did not run";
  int64_t logged = -1;
  bool here = false;
  dpt::launch(with_timeout(w, 10), [&](Context& ctx) {
    if (ctx.rank == 0) {
      std::vector<int64_t> ints = {big(0, 0), big(0, 1), big(0, 2)};
      const Record rec = record_of(0);
      const uint16_t shorts[3] = {1, 65535, 4242};  // 6 bytes: not a whole number of words
      ctx.comm.send(ints.data(), 3, 1);
      ctx.comm.send(&rec, 1, 1, 5);
      ctx.comm.send(shorts, 3, 1);
      logged = ctx.comm.traffic().bytes(0, 1);
    } else if (ctx.rank == 1) {
      here = true;
      std::vector<int64_t> ints(3);
      Record rec{};
      uint16_t shorts[3] = {0, 0, 0};
      ctx.comm.recv(&rec, 1, 0, 5);  // another tag first: tags are separate queues for typed messages too
      ctx.comm.recv(ints.data(), 3, 0);
      ctx.comm.recv(shorts, 3, 0);
      seen = record_difference(rec, 0);
      for (int i = 0; i < 3; ++i)
        if (ints[std::size_t(i)] != big(0, i)) seen += " int64 " + std::to_string(i) + " changed";
      if (shorts[0] != 1 || shorts[1] != 65535 || shorts[2] != 4242) seen += " uint16 values changed";
    }
  });
  if (here) CHECK(seen == "");
  if (logged >= 0) CHECK(logged == int64_t(3 * sizeof(int64_t) + sizeof(Record) + 3 * sizeof(uint16_t)));  // bytes, not words
}

inline void typed_all_gather(const ContractWorld& w) {
  const int n = w.world;
  std::vector<std::string> diff(n, "not run");
  std::vector<int64_t> logged(n, -1);
  std::vector<char> ran(n, 0);
  dpt::launch(with_timeout(w, 10), [&](Context& ctx) {
    ran[ctx.rank] = 1;
    std::string found;
    const std::vector<Record> all = ctx.comm.all_gather(record_of(ctx.rank));
    if (int(all.size()) != n) found += "got " + std::to_string(all.size()) + " records;";
    for (int r = 0; r < int(all.size()); ++r) found += record_difference(all[std::size_t(r)], r);
    std::vector<int64_t> rows(std::size_t(2 * n), 0);  // in place: this rank's row is the send buffer
    rows[std::size_t(2 * ctx.rank)] = big(ctx.rank, 0), rows[std::size_t(2 * ctx.rank + 1)] = big(ctx.rank, 1);
    ctx.comm.all_gather(rows.data() + 2 * ctx.rank, rows.data(), 2);
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < 2; ++i)
        if (rows[std::size_t(2 * r + i)] != big(r, i)) found += " row " + std::to_string(r) + " wrong;";
    diff[ctx.rank] = found;
    logged[ctx.rank] = ctx.comm.traffic().collective_bytes("all_gather", ctx.rank);
  });
  for (int r = 0; r < n; ++r) {
    if (!ran[r]) continue;
    INFO("rank " << r);
    CHECK(diff[r] == "");
    CHECK(logged[r] == int64_t(sizeof(Record) + 2 * sizeof(int64_t)));  // each rank's payload in bytes
  }
}

inline void typed_count_mismatch_is_an_error(const ContractWorld& w) {
  std::string message = launch_message(with_timeout(w, 10), [](Context& ctx) {
    std::vector<int64_t> buf(4, 1);
    if (ctx.rank == 0) ctx.comm.send(buf.data(), 3, 1);
    if (ctx.rank == 1) ctx.comm.recv(buf.data(), 2, 0);
  });
  INFO(message);
  CHECK(message.find("exactly the count") != std::string::npos);
}

}  // namespace contract
}  // namespace dpt_test

/// Defines the typed-message contract's test cases, named "<label> contract: ...".
#define DPT_COMM_TYPED_CONTRACT_TESTS(label, worlds)                                                              \
  DPT_COMM_CONTRACT_CASE(label, worlds, typed_point_to_point, "typed send/recv deliver integers and records exactly, logged in bytes") \
  DPT_COMM_CONTRACT_CASE(label, worlds, typed_all_gather, "typed all_gather gives every rank every rank's record, logged in bytes") \
  DPT_COMM_CONTRACT_CASE(label, worlds, typed_count_mismatch_is_an_error, "a typed recv of another count is an error")
