// Threads all-reduce (f32 sum) per algorithm, sizes and rank counts, timed
// without thread start-up or allocation in the loop. The benchmark thread
// plays rank 0 itself and ranks 1..n-1 are threads that stay alive across
// iterations, spinning on a generation counter: with 2 ranks on 2 cores no
// third thread competes for a core, and no futex wake-up sits in the timed
// path. An iteration's time runs from the bump of the counter until the last
// rank has finished its all-reduce (the maximum over ranks).
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

void spin_pause(std::uint32_t& spins) {
  if (++spins < 256) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

// `ranks` ranks, each with its send and receive buffers of `bytes`, allocated
// and touched once.
class AllReduceHarness {
 public:
  AllReduceHarness(int ranks, std::int64_t bytes)
      : ranks_(ranks),
        count_(static_cast<std::uint64_t>(bytes) / sizeof(float)),
        world_(ranks),
        send0_(count_, 1.0f),
        recv0_(count_, 0.0f) {
    for (int r = 1; r < ranks; ++r) threads_.emplace_back([this, r] { rank_loop(r); });
  }
  ~AllReduceHarness() {
    stop_.store(true);
    go_.fetch_add(1, std::memory_order_release);
    for (auto& t : threads_) t.join();
  }
  AllReduceHarness(const AllReduceHarness&) = delete;
  AllReduceHarness& operator=(const AllReduceHarness&) = delete;

  // One all-reduce on every rank; seconds from go to all done. Throws on failure.
  double run_once(Algorithm algo) {
    if (failed_.load()) throw std::runtime_error(error_);
    algo_ = algo;  // published to the ranks by the release on go_
    done_.store(0, std::memory_order_relaxed);
    const auto start = std::chrono::steady_clock::now();
    go_.fetch_add(1, std::memory_order_release);
    allreduce(world_.comm(0), send0_, recv0_);
    std::uint32_t spins = 0;
    while (done_.load(std::memory_order_acquire) < ranks_ - 1 && !failed_.load()) spin_pause(spins);
    const auto stop = std::chrono::steady_clock::now();
    if (failed_.load()) throw std::runtime_error(error_);
    return std::chrono::duration<double>(stop - start).count();
  }

 private:
  void allreduce(cclab::coll::Communicator& comm, std::vector<float>& send,
                 std::vector<float>& recv) {
    comm.allreduce(send.data(), recv.data(), count_, cclab::coll::DataType::kF32,
                   cclab::coll::ReduceOp::kSum, cclab::coll::AlgoConfig{algo_});
  }

  void rank_loop(int rank) {
    std::vector<float> send(count_, 1.0f), recv(count_, 0.0f);
    std::uint32_t seen = 0;
    for (;;) {
      std::uint32_t spins = 0;
      while (go_.load(std::memory_order_acquire) == seen) spin_pause(spins);
      seen = go_.load(std::memory_order_acquire);
      if (stop_.load()) return;
      try {
        allreduce(world_.comm(rank), send, recv);
      } catch (const std::exception& e) {
        if (!failed_.exchange(true)) error_ = e.what();
        return;
      }
      done_.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  const int ranks_;
  const std::uint64_t count_;
  cclab::coll::ThreadsWorld world_;
  std::vector<float> send0_, recv0_;  // rank 0's, on the benchmark thread
  Algorithm algo_ = Algorithm::kRing;
  std::atomic<std::uint32_t> go_{0};  // generation: one all-reduce per increment
  std::atomic<int> done_{0};          // ranks 1..n-1 done with the current generation
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::string error_;
  std::vector<std::thread> threads_;
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
  try {
    // One untimed call, so that whatever the first call of an algorithm sets
    // up (scratch space, first touch) is not in a sample.
    harness.run_once(algo);
    for (auto _ : state) state.SetIterationTime(harness.run_once(algo));
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("all-reduce failed: ") + e.what()).c_str());
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
      // auto beside what it chooses among: the selector's cost per call.
      for (auto algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kHalvingDoubling,
                        Algorithm::kHierarchical, Algorithm::kDirect, Algorithm::kAuto}) {
        const std::string name = "BM_AllReduce/" + std::string(cclab::coll::algorithm_name(algo));
        auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_AllReduce, algo);
        b->Args({ranks, bytes})->ArgNames({"ranks", "bytes"})->UseManualTime();
        // Large sizes take long per iteration: a shorter minimum keeps the binary brief.
        if (bytes >= (16 << 20)) b->MinTime(0.2);
      }
  return true;
}();

}  // namespace
