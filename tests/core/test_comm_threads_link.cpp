// test_comm_threads_link.cpp — the threads communicator's link model: a
// message takes at least alpha + S/beta, messages converging on one rank queue
// on its in-port, the library all_reduce takes at least the ring's modelled
// time, and the presets have the documented numbers.
#include <atomic>
#include "support/catch.h"
#include <chrono>
#include <vector>

#include "dpt/comm.h"
#include "dpt/launch.h"
#include "support/comm_contract.h"
#include "dpt/report.h"  // seconds_since
#include "support/threads_world.h"

using dpt::Context;
using dpt::ReduceOp;
using Clock = std::chrono::steady_clock;
using dpt::seconds_since;
using dpt_test::threads;

// ----------------------------------------------------------------------------
// link model: lower bounds only. The model promises "no earlier than"; how
// much later depends on the machine's scheduler, so upper bounds are loose
// sanity checks (1 s) rather than claims.

TEST_CASE("link model: a 1 MiB message over a 1 Gbps link takes at least alpha + S/beta") {
  dpt::LaunchOptions o = threads(2);
  o.link = {100.0, 1.0};  // 100 us, 1 Gbit/s
  const int64_t count = 1 << 18;  // 1 MiB
  const double transfer = 8.0 * 4 * count / 1e9, alpha = 100e-6;
  std::atomic<int64_t> t_send{0};
  double send_took = 0, arrived_after = 0, second_after = 0;
  dpt::launch(o, [&](Context& ctx) {
    std::vector<float> buf(count, 1.0f);
    if (ctx.rank == 0) {
      Clock::time_point t0 = Clock::now();
      t_send = t0.time_since_epoch().count();
      ctx.comm.send(buf.data(), count, 1);
      send_took = seconds_since(t0);
      ctx.comm.send(buf.data(), count, 1);  // queues behind the first on the link
    } else {
      ctx.comm.recv(buf.data(), count, 0);
      Clock::time_point t0{Clock::duration(t_send.load())};
      arrived_after = seconds_since(t0);
      ctx.comm.recv(buf.data(), count, 0);
      second_after = seconds_since(t0);
    }
  });
  CHECK(send_took >= transfer);                // the sender holds its port for S/beta
  CHECK(arrived_after >= transfer + alpha);    // no earlier than alpha + S/beta
  CHECK(second_after >= 2 * transfer + alpha); // the second waited for the link
  CHECK(second_after < 2 * transfer + alpha + 1.0);
}

TEST_CASE("link model: messages converging on one rank queue on its in-port") {
  dpt::LaunchOptions o = threads(3);
  o.link = {0.0, 1.0};
  const int64_t count = 1 << 17;  // 512 KiB each
  const double transfer = 8.0 * 4 * count / 1e9;
  std::atomic<int64_t> earliest{INT64_MAX};
  double both_after = 0;
  dpt::launch(o, [&](Context& ctx) {
    std::vector<float> buf(count);
    ctx.comm.barrier();
    int64_t now = Clock::now().time_since_epoch().count();
    int64_t seen = earliest.load();
    while (now < seen && !earliest.compare_exchange_weak(seen, now)) {
    }
    if (ctx.rank == 0) {
      ctx.comm.recv(buf.data(), count, 1);
      ctx.comm.recv(buf.data(), count, 2);
      both_after = seconds_since(Clock::time_point{Clock::duration(earliest.load())});
    } else {
      ctx.comm.send(buf.data(), count, 0);
    }
  });
  CHECK(both_after >= 2 * transfer);
}

TEST_CASE("link model: the library all_reduce takes at least the ring's modelled time") {
  dpt::LaunchOptions o = threads(4);
  o.link = {50.0, 1.0};
  const int64_t count = 1 << 18;
  const double ring = 2 * 3 * (50e-6 + 8.0 * 4 * count / 4 / 1e9);
  std::vector<double> took(4);
  dpt::launch(o, [&](Context& ctx) {
    std::vector<float> buf(count, 1.0f);
    Clock::time_point t0 = Clock::now();
    ctx.comm.all_reduce(buf.data(), count, ReduceOp::Sum);
    took[ctx.rank] = seconds_since(t0);
  });
  // The modelled clock starts when the last rank arrives, after every rank's
  // t0, so every rank waits at least the modelled time.
  for (int r = 0; r < 4; ++r) CHECK(took[r] >= ring);
}

TEST_CASE("link presets have the documented numbers, unknown names are errors") {
  CHECK(dpt::link_preset("pcie").gbps == 200.0);
  CHECK(dpt::link_preset("ethernet").gbps == 10.0);
  CHECK(dpt::link_preset("ethernet").latency_us == 50.0);
  CHECK_FALSE(dpt::link_preset("none").enabled());
  CHECK_THROWS_AS(dpt::link_preset("token-ring"), dpt::Error);
  CHECK(dpt::LinkModel{0, 8}.transfer_seconds(1000000000) == Approx(1.0));
}
