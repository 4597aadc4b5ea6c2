// The waiter pool's policy for a blocking collective (gloo_waiter.h), on two
// real Gloo contexts over 127.0.0.1 in this process: the rank's own thread
// runs the transfers held for it, what the next step waits for first, then
// receives before sends, and a held
// transfer whose completion the peer needs before it can finish the one the
// rank's thread is blocked on is handed to a worker instead of deadlocking.
#include "gloo_waiter.h"

#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gtest/gtest.h>

namespace cclab::coll::detail {
namespace {

using namespace std::chrono_literals;

// Two ranks' Gloo contexts, connected to each other.
std::array<std::shared_ptr<gloo::Context>, 2> connect_two() {
  gloo::rendezvous::HashStore store;
  std::array<std::shared_ptr<gloo::Context>, 2> ctx;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      gloo::transport::tcp::attr attr;
      attr.hostname = "127.0.0.1";
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto c = std::make_shared<gloo::rendezvous::Context>(r, 2);
      c->setTimeout(20s);
      c->connectFullMesh(store, device);
      ctx[r] = c;
    });
  for (auto& t : threads) t.join();
  return ctx;
}

// What a pool's handler saw: the step ids in the order handled, and on which thread.
struct Seen {
  std::mutex mu;
  std::vector<std::int64_t> steps;
  std::vector<std::thread::id> threads;
  std::vector<bool> ok;
  void add(const Completion& c) {
    std::lock_guard lock(mu);
    steps.push_back(c.step_id);
    threads.push_back(std::this_thread::get_id());
    ok.push_back(c.ok);
  }
};

WaitJob held_job(gloo::transport::UnboundBuffer* buf, bool is_recv, std::int64_t step) {
  WaitJob job{buf, is_recv, /*op_seq=*/7, step};
  job.holdable = true;
  return job;
}

constexpr std::uint64_t kSlotA = 1, kSlotB = 2;

// Rank 0 holds a send (step 0) and receives A (1) and B (2), posted and
// submitted in that order; the peer completes all three before the rank's
// thread runs any, so the order they run in is the pool's choice alone.
// (Run while the peer was still sending, a wait that outlasted the
// watchdog's 1 ms tick under ASan on 2 busy cores handed the rest to
// workers: order 0, 1, 2.)
struct SendAndTwoReceives {
  std::array<std::shared_ptr<gloo::Context>, 2> ctx = connect_two();
  float a = 0, b = 0, out = 5;
  std::unique_ptr<gloo::transport::UnboundBuffer> recv_a = ctx[0]->createUnboundBuffer(&a, 4),
                                                  recv_b = ctx[0]->createUnboundBuffer(&b, 4),
                                                  send = ctx[0]->createUnboundBuffer(&out, 4);

  void hold_completed(WaiterPool& pool) {
    pool.rank_begin(7);
    send->send(1, kSlotA);
    pool.submit(held_job(send.get(), false, 0));
    recv_a->recv(1, kSlotA);
    pool.submit(held_job(recv_a.get(), true, 1));
    recv_b->recv(1, kSlotB);
    pool.submit(held_job(recv_b.get(), true, 2));
    float x = 1, y = 2, in = 0;
    auto sa = ctx[1]->createUnboundBuffer(&x, sizeof x);
    auto sb = ctx[1]->createUnboundBuffer(&y, sizeof y);
    auto r = ctx[1]->createUnboundBuffer(&in, sizeof in);
    sa->send(0, kSlotA);
    sb->send(0, kSlotB);
    r->recv(0, kSlotA);
    sa->waitSend();
    sb->waitSend();
    r->waitRecv();
  }

  // All three ran, in `order`, on the calling thread, and A and B arrived.
  void expect_ran(const Seen& seen, const std::vector<std::int64_t>& order) const {
    ASSERT_EQ(seen.steps, order);
    for (std::size_t i = 0; i < seen.steps.size(); ++i) {
      EXPECT_TRUE(seen.ok[i]) << "step " << seen.steps[i];
      EXPECT_EQ(seen.threads[i], std::this_thread::get_id())
          << "step " << seen.steps[i] << " ran on a worker, not the rank's thread";
    }
    EXPECT_EQ(a, 1.0f);
    EXPECT_EQ(b, 2.0f);
  }
};

TEST(GlooWaiterPool, RankThreadRunsItsHeldReceivesBeforeItsSends) {
  SendAndTwoReceives t;
  Seen seen;
  {
    WaiterPool pool(20s, [&](const Completion& c) { seen.add(c); });
    t.hold_completed(pool);
    while (pool.rank_run(7, 20s)) {
    }
    pool.rank_end();
  }
  t.expect_ran(seen, {1, 2, 0});
}

// The communicator's hint (what the next step to issue waits for) comes
// before the receives-first rule: a hint naming B, then one naming the
// send, then none, runs B, the send, A. An eager inbox is wanted by its
// peer, not by step id.
TEST(GlooWaiterPool, RankThreadRunsWhatTheNextStepWaitsForFirst) {
  SendAndTwoReceives t;
  Seen seen;
  {
    WaiterPool pool(20s, [&](const Completion& c) { seen.add(c); });
    t.hold_completed(pool);
    WaitHint want_b, want_send;
    want_b.add_step(2);
    want_send.add_step(0);
    EXPECT_TRUE(pool.rank_run(7, 20s, want_b));
    EXPECT_TRUE(pool.rank_run(7, 20s, want_send));
    EXPECT_TRUE(pool.rank_run(7, 20s));
    EXPECT_FALSE(pool.rank_run(7, 20s));
    pool.rank_end();
  }
  t.expect_ran(seen, {2, 0, 1});
  WaitHint eager;
  eager.add_eager_peer(3);
  WaitJob inbox{nullptr, true, 7, /*step_id=*/2, /*eager_peer=*/3};
  EXPECT_TRUE(eager.wants(inbox));
  inbox.signal = true;
  EXPECT_FALSE(eager.wants(inbox)) << "a credit signal is no message";
  EXPECT_FALSE(eager.wants(held_job(t.recv_b.get(), true, 3))) << "step 3 is not peer 3's inbox";
}

TEST(GlooWaiterPool, HeldTransferThePeerWaitsForGoesToAWorker) {
  // The rank's thread blocks on receive A (the older); the peer sends A only
  // after the handler of receive B has run. Held behind the blocked wait, B
  // would never be handled: the watchdog must hand it to a worker.
  auto ctx = connect_two();
  float a = 0, b = 0;
  auto recv_a = ctx[0]->createUnboundBuffer(&a, sizeof a);
  auto recv_b = ctx[0]->createUnboundBuffer(&b, sizeof b);
  std::promise<void> b_handled;
  Seen seen;
  std::string peer_error;
  {
    WaiterPool pool(20s, [&](const Completion& c) {
      seen.add(c);
      if (c.step_id == 2) b_handled.set_value();
    });
    pool.rank_begin(7);
    recv_a->recv(1, kSlotA);
    pool.submit(held_job(recv_a.get(), true, 1));
    recv_b->recv(1, kSlotB);
    pool.submit(held_job(recv_b.get(), true, 2));
    std::thread peer([&] {
      float x = 1, y = 2;
      auto sa = ctx[1]->createUnboundBuffer(&x, sizeof x);
      auto sb = ctx[1]->createUnboundBuffer(&y, sizeof y);
      sb->send(0, kSlotB);
      sb->waitSend();
      // Bounded: without the hand-over this fails the test instead of hanging it.
      if (b_handled.get_future().wait_for(10s) != std::future_status::ready)
        peer_error = "receive B was not handled within 10 s while the rank's thread waited on A";
      sa->send(0, kSlotA);
      sa->waitSend();
    });
    while (pool.rank_run(7, 20s)) {
    }
    pool.rank_end();
    peer.join();
  }
  EXPECT_EQ(peer_error, "");
  ASSERT_EQ(seen.steps, (std::vector<std::int64_t>{2, 1}));
  EXPECT_TRUE(seen.ok[0] && seen.ok[1]);
  EXPECT_NE(seen.threads[0], std::this_thread::get_id()) << "B ran on a worker";
  EXPECT_EQ(seen.threads[1], std::this_thread::get_id()) << "A ran on the rank's thread";
  EXPECT_EQ(a, 1.0f);
  EXPECT_EQ(b, 2.0f);
}

// A rank's thread that sits in one wait for a second gets the prober called
// by the watchdog (the communicator then checks whether that peer is gone).
// Here the first probe plays the peer: it sends what the rank waits for, so
// without a probe the wait would last its whole 20 s and fail.
TEST(GlooWaiterPool, TheWatchdogProbesWhenTheRanksThreadWaitsLong) {
  auto ctx = connect_two();
  float in = 0, out = 3;
  auto recv = ctx[0]->createUnboundBuffer(&in, sizeof in);
  auto send = ctx[1]->createUnboundBuffer(&out, sizeof out);
  Seen seen;
  std::atomic<int> probes{0};
  {
    WaiterPool pool(
        20s, [&](const Completion& c) { seen.add(c); },
        [&] {
          if (probes++ == 0) send->send(0, kSlotA);
        });
    pool.rank_begin(7);
    recv->recv(1, kSlotA);
    pool.submit(held_job(recv.get(), true, 1));
    EXPECT_TRUE(pool.rank_run(7, 20s));
    pool.rank_end();
  }
  send->waitSend();
  EXPECT_GE(probes.load(), 1);
  ASSERT_EQ(seen.steps, (std::vector<std::int64_t>{1}));
  EXPECT_TRUE(seen.ok[0]) << "the wait ran to its timeout: no probe came";
  EXPECT_EQ(seen.threads[0], std::this_thread::get_id());
  EXPECT_EQ(in, 3.0f);
}

}  // namespace
}  // namespace cclab::coll::detail
