// Threads all-reduce (f32 sum) per algorithm, sizes and rank counts, timed
// without thread start-up or allocation in the loop: one ThreadsWorld and its
// rank threads stay alive across iterations, waiting on a generation counter;
// each generation is one all-reduce on every rank, and an iteration's time
// runs from the bump of the counter until the last rank has finished.
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/threads.h"

namespace {

using cclab::coll::Algorithm;

// ranks rank threads, each with its send and receive buffers of `bytes`,
// allocated and touched once.
class AllReduceHarness {
 public:
  AllReduceHarness(int ranks, std::int64_t bytes)
      : ranks_(ranks), count_(static_cast<std::uint64_t>(bytes) / sizeof(float)), world_(ranks) {
    runner_ = std::thread([this] { run_world(); });
  }
  ~AllReduceHarness() {
    stop_.store(true);
    go_.fetch_add(1, std::memory_order_release);
    go_.notify_all();
    if (runner_.joinable()) runner_.join();
  }
  AllReduceHarness(const AllReduceHarness&) = delete;
  AllReduceHarness& operator=(const AllReduceHarness&) = delete;

  // One all-reduce on every rank; seconds from go to all done, or < 0 on failure.
  double run_once(Algorithm algo) {
    if (failed_.load()) return -1;  // the ranks are gone
    algo_ = algo;                   // published to the ranks by the release on go_
    done_.store(0, std::memory_order_relaxed);
    const auto start = std::chrono::steady_clock::now();
    go_.fetch_add(1, std::memory_order_release);
    go_.notify_all();
    for (int d = done_.load(std::memory_order_acquire); d < ranks_;
         d = done_.load(std::memory_order_acquire))
      done_.wait(d, std::memory_order_acquire);
    const auto stop = std::chrono::steady_clock::now();
    if (failed_.load()) return -1;
    return std::chrono::duration<double>(stop - start).count();
  }

  // After a failure: waits for the world to wind down and returns its error.
  std::string error() {
    if (runner_.joinable()) runner_.join();
    return error_;
  }

 private:
  void run_world() {
    try {
      world_.run([this](cclab::coll::Communicator& comm) { rank_loop(comm); });
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }

  void rank_loop(cclab::coll::Communicator& comm) {
    std::vector<float> send(count_, 1.0f), recv(count_, 0.0f);
    std::uint32_t seen = 0;
    while (true) {
      go_.wait(seen, std::memory_order_acquire);
      seen = go_.load(std::memory_order_acquire);
      if (stop_.load()) return;
      try {
        comm.allreduce(send.data(), recv.data(), count_, cclab::coll::DataType::kF32,
                       cclab::coll::ReduceOp::kSum, cclab::coll::AlgoConfig{algo_});
      } catch (...) {
        fail();  // wakes the benchmark thread and the ranks still waiting for go
        throw;
      }
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == ranks_) done_.notify_all();
    }
  }

  void fail() {
    failed_.store(true);
    stop_.store(true);
    done_.store(ranks_, std::memory_order_release);
    done_.notify_all();
    go_.fetch_add(1, std::memory_order_release);
    go_.notify_all();
  }

  const int ranks_;
  const std::uint64_t count_;
  cclab::coll::ThreadsWorld world_;
  Algorithm algo_ = Algorithm::kRing;
  std::atomic<std::uint32_t> go_{0};  // generation: one all-reduce per increment
  std::atomic<int> done_{0};          // ranks done with the current generation
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::string error_;  // written by the runner; read after joining it
  std::thread runner_;
};

// The harness of the current (ranks, bytes) configuration. Benchmarks are
// registered so that one configuration's algorithms are adjacent; moving to
// the next configuration frees the previous buffers first.
AllReduceHarness& harness_for(int ranks, std::int64_t bytes) {
  static std::unique_ptr<AllReduceHarness> harness;
  static std::pair<int, std::int64_t> key{0, 0};
  if (!harness || key != std::pair{ranks, bytes}) {
    harness.reset();
    harness = std::make_unique<AllReduceHarness>(ranks, bytes);
    key = {ranks, bytes};
  }
  return *harness;
}

void BM_AllReduce(benchmark::State& state, Algorithm algo) {
  const auto ranks = static_cast<int>(state.range(0));
  const auto bytes = state.range(1);
  auto& harness = harness_for(ranks, bytes);
  // One untimed call, so that whatever the first call of an algorithm sets up
  // (scratch space, first touch) is not in a sample: large sizes get few.
  if (harness.run_once(algo) < 0)
    state.SkipWithError(("all-reduce failed: " + harness.error()).c_str());
  for (auto _ : state) {
    const double seconds = harness.run_once(algo);
    if (seconds < 0) {
      state.SkipWithError(("all-reduce failed: " + harness.error()).c_str());
      break;
    }
    state.SetIterationTime(seconds);
  }
  const double bus_bytes = static_cast<double>(bytes) * 2.0 * (ranks - 1) / ranks;
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["busbw"] = benchmark::Counter(bus_bytes * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}

const bool kRegistered = [] {
  constexpr std::int64_t kSizes[] = {4 << 10, 1 << 20, 16 << 20, 128 << 20};
  for (int ranks : {2, 4})
    for (auto bytes : kSizes)
      for (auto algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kHalvingDoubling,
                        Algorithm::kHierarchical, Algorithm::kDirect}) {
        const std::string name = "BM_AllReduce/" + std::string(cclab::coll::algorithm_name(algo));
        auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_AllReduce, algo);
        b->Args({ranks, bytes})->ArgNames({"ranks", "bytes"})->UseManualTime();
        // Large sizes take long per iteration: a shorter minimum keeps the binary brief.
        if (bytes >= (16 << 20)) b->MinTime(0.2);
      }
  return true;
}();

}  // namespace
