// test_watch.cpp — watch_messages: the observer sees every point-to-point
// call before it is passed on, and the messages are the inner
// communicator's (counted once in its traffic log).
#include "support/catch.h"

#include <mutex>
#include <vector>

#include "dpt/comm/watch.h"
#include "support/ranks.h"

using namespace dpt;

TEST_CASE("watch_messages: the observer sees each message first, and traffic is counted once on the inner log", "[comm]") {
  std::vector<std::vector<Message>> seen(3);
  std::vector<std::vector<float>> before_recv(3);
  std::vector<int64_t> sent_by_0_to_1(3, -1);
  std::vector<std::vector<float>> received(3);  // checked after launch: Catch2 is not thread-safe
  dpt_test::run_ranks(3, [&](Context& ctx) {
    const int r = ctx.rank, right = (r + 1) % 3, left = (r + 2) % 3;
    std::vector<float> mine(4, float(r)), theirs(4, -1.0f), one(1, -1.0f);
    auto watched = watch_messages(ctx.comm, [&](const Message& m) {
      seen[std::size_t(r)].push_back(m);
      if (std::string(m.call) == "recv") before_recv[std::size_t(r)] = one;  // not yet received
    });
    watched->sendrecv(mine.data(), 4, right, theirs.data(), 4, left);
    received[std::size_t(r)] = theirs;
    if (r == 0) watched->send(mine.data(), 1, 1, 7);
    if (r == 1) watched->recv(one.data(), 1, 0, 7);
    ctx.comm.barrier();
    sent_by_0_to_1[std::size_t(r)] = ctx.comm.traffic().bytes(0, 1);
  });
  for (int r = 0; r < 3; ++r) CHECK(received[std::size_t(r)] == std::vector<float>(4, float((r + 2) % 3)));
  // rank 0: a sendrecv then a send; rank 1: a sendrecv then a recv; rank 2: a sendrecv
  REQUIRE(seen[0].size() == 2);
  CHECK(std::string(seen[0][0].call) == "sendrecv");
  CHECK((seen[0][0].dst == 1 && seen[0][0].send_count == 4 && seen[0][0].src == 2 && seen[0][0].recv_count == 4));
  CHECK((std::string(seen[0][1].call) == "send" && seen[0][1].dst == 1 && seen[0][1].send_count == 1 &&
         seen[0][1].src == -1));
  REQUIRE(seen[1].size() == 2);
  CHECK((std::string(seen[1][1].call) == "recv" && seen[1][1].src == 0 && seen[1][1].recv_count == 1 &&
         seen[1][1].dst == -1));
  CHECK(before_recv[1] == std::vector<float>(1, -1.0f));  // the observer ran before the message arrived
  CHECK(seen[2].size() == 1);
  // rank 0 sent 4 + 1 floats to rank 1, logged once each: 20 bytes, not 40
  for (int r = 0; r < 3; ++r) CHECK(sent_by_0_to_1[std::size_t(r)] == 20);
}
