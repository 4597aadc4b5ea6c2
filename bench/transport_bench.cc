// Loopback TCP alone, no collective around it: the bare stream under the
// gloo backend between ranks on one machine, where every byte costs a copy
// into the kernel and one out of it. A reference, not a bound: our 2-rank
// all-reduce at 16 MiB took 0.96-1.09 of its time (AMD EPYC VM, measured
// alternately), so the executor drives the sockets about as well as this.
//
// One connection carries `bytes` in one direction, or in both at once, as a
// 2-rank all-reduce moves them (each rank sends and receives 2(n-1)/n = 1
// times the message). Every direction has a writer thread (1 MiB writes from
// a buffer that stays in cache) and a reader thread, persistent across
// iterations. bytes_per_second counts one direction's bytes, so a 2-rank
// all-reduce's busbw compares with it directly (Google Benchmark's G/s is
// 2^30 B/s; busbw's GB/s is 1e9). The CPU column counts the benchmark's own
// thread only, one of the two or four; the process_cpu_us counter counts
// them all, kernel time included (on loopback the sender's thread also runs
// the receiving side's TCP processing), per iteration: both ways, the CPU a
// 2-rank all-reduce of `bytes` spends on its transfers alone (its `cpu`
// column sums both ranks), with no reduction and from cache-warm buffers.
//
// The congestion control is set per socket (TCP_CONGESTION), so the kernel's
// default and the others run side by side in one run: on the AMD EPYC VM the
// default, bbr, paces itself with timers (no fq qdisc on lo) and carried
// 0.6x of what cubic did both ways at 16 MiB.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

namespace {

constexpr std::size_t kWriteBytes = 1 << 20;

// A connected pair of loopback TCP sockets, both ends with congestion control
// `cc` (empty: the kernel's default). Sets `error` when it cannot.
struct Connection {
  int a = -1, b = -1;
  std::string error;

  explicit Connection(const std::string& cc) {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    a = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0 || a < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      error = std::string("loopback listener: ") + std::strerror(errno);
    } else if (!cc.empty() &&
               (setsockopt(listener, IPPROTO_TCP, TCP_CONGESTION, cc.data(), cc.size()) != 0 ||
                setsockopt(a, IPPROTO_TCP, TCP_CONGESTION, cc.data(), cc.size()) != 0)) {
      error = "congestion control '" + cc + "': " + std::strerror(errno) +
              " (see net.ipv4.tcp_available_congestion_control)";
    } else if (connect(a, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
               (b = accept(listener, nullptr, nullptr)) < 0) {
      error = std::string("loopback connection: ") + std::strerror(errno);
    }
    if (listener >= 0) close(listener);
  }
  ~Connection() {
    if (a >= 0) close(a);
    if (b >= 0) close(b);
  }
};

bool write_all(int fd, const std::byte* src, std::size_t bytes) {
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(kWriteBytes, bytes - done);
    for (std::size_t at = 0; at < n;) {
      const ssize_t k = write(fd, src + at, n - at);
      if (k <= 0) return false;
      at += static_cast<std::size_t>(k);
    }
    done += n;
  }
  return true;
}

bool read_all(int fd, std::byte* dst, std::size_t bytes) {
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t k = read(fd, dst, std::min(kWriteBytes, bytes - done));
    if (k <= 0) return false;
    done += static_cast<std::size_t>(k);
  }
  return true;
}

// CPU time of every thread of this process, user and kernel, in microseconds.
double process_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

// range(0): bytes per direction per iteration; both: the two directions at once.
void BM_LoopbackTcp(benchmark::State& state, bool both, std::string cc) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0));
  Connection conn(cc);
  if (!conn.error.empty()) {
    state.SkipWithError(conn.error.c_str());
    return;
  }
  // Roles: write a->b, read at b, and for both also write b->a, read at a.
  // The benchmark's thread takes the last role; the others are threads that
  // meet it at a barrier before and after every iteration.
  const int roles = both ? 4 : 2;
  std::vector<std::vector<std::byte>> memory(roles, std::vector<std::byte>(kWriteBytes));
  std::barrier sync(roles);
  bool stop = false;  // written before a barrier phase, read after it
  std::atomic<bool> failed{false};
  const auto role = [&](int r) {
    std::byte* mem = memory[static_cast<std::size_t>(r)].data();
    switch (r) {
      case 0:
        return write_all(conn.a, mem, bytes);
      case 1:
        return read_all(conn.b, mem, bytes);
      case 2:
        return write_all(conn.b, mem, bytes);
      default:
        return read_all(conn.a, mem, bytes);
    }
  };
  std::vector<std::thread> helpers;
  for (int r = 0; r + 1 < roles; ++r)
    helpers.emplace_back([&, r] {
      for (;;) {
        sync.arrive_and_wait();
        if (stop) return;
        if (!role(r)) failed = true;
        sync.arrive_and_wait();
      }
    });
  const double cpu_start = process_cpu_us();
  for (auto _ : state) {
    sync.arrive_and_wait();
    if (!role(roles - 1)) failed = true;
    sync.arrive_and_wait();
  }
  state.counters["process_cpu_us"] =
      benchmark::Counter(process_cpu_us() - cpu_start, benchmark::Counter::kAvgIterations);
  stop = true;
  sync.arrive_and_wait();
  for (auto& t : helpers) t.join();
  if (failed) state.SkipWithError("a loopback read or write failed");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.SetLabel(cc.empty() ? cclab::bench::tcp_congestion_control() + " (default)" : cc);
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1 << 20)->Arg(16 << 20)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_LoopbackTcp, both_ways_default, true, std::string())->Apply(Sizes);
BENCHMARK_CAPTURE(BM_LoopbackTcp, both_ways_cubic, true, std::string("cubic"))->Apply(Sizes);
BENCHMARK_CAPTURE(BM_LoopbackTcp, both_ways_bbr, true, std::string("bbr"))->Apply(Sizes);
BENCHMARK_CAPTURE(BM_LoopbackTcp, one_way_default, false, std::string())->Apply(Sizes);

}  // namespace
