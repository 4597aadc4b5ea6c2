#include "machine_speed.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include "sweep.h"  // median

namespace cclab::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kProbeLimit = std::chrono::milliseconds(100);
constexpr int kRepeats = 9;

void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

double ns_since(Clock::time_point start) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count();
}

// Nanoseconds per step of an xorshift chain: each step needs the last, so
// the time is the core's latency for three shifts and three xors.
double compute_step_ns() {
  constexpr int kSteps = 1 << 20;
  std::uint64_t x = 88172645463325252ull;
  const auto start = Clock::now();
  for (int i = 0; i < kSteps; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    asm volatile("" : "+r"(x));  // keeps the chain from being folded
  }
  return ns_since(start) / kSteps;
}

// Confines the calling thread to `cpu` (>= 0); the CPU it is confined to
// after that, or -1 when it may run on several.
int confine_to(int cpu) {
  cpu_set_t set;
  if (cpu >= 0) {
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);  // on failure it keeps its CPUs
  }
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1) return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) return c;
  return -1;
}

// The first two CPUs of `set`, or -1s when it holds one only.
std::array<int, 2> first_two(const cpu_set_t& set) {
  std::array<int, 2> two{-1, -1};
  if (CPU_COUNT(&set) < 2) return two;
  for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; ++c)
    if (CPU_ISSET(c, &set)) two[k++] = c;
  return two;
}

// Round trips of one counter between this thread and another, each spinning
// until the other has moved it, the two confined to different CPUs (left to
// the scheduler, they shared one in 2 of 3 threads sweeps on a 2-vCPU VM
// while the other rank's thread waited in its barrier: 24 us and 6.4 ms a
// trip). The first trip (the other thread starting) is not timed; stops at
// kProbeLimit (a machine so busy that the other thread does not get to run).
// `on` receives the CPUs the two threads were confined to.
double pingpong_ns(std::array<int, 2>& on) {
  constexpr std::uint32_t kTrips = 2000;
  alignas(64) std::atomic<std::uint32_t> turn{0};
  std::atomic<bool> stop{false};
  cpu_set_t before;  // the CPUs this thread may use, restored at the end
  const bool saved = sched_getaffinity(0, sizeof before, &before) == 0;
  const std::array<int, 2> cpus = saved ? first_two(before) : std::array<int, 2>{-1, -1};
  std::thread other([&] {
    on[1] = confine_to(cpus[1]);
    for (std::uint32_t i = 1; i < 2 * (kTrips + 1); i += 2) {
      while (turn.load(std::memory_order_acquire) != i) {
        if (stop.load(std::memory_order_relaxed)) return;
        cpu_relax();
      }
      turn.store(i + 1, std::memory_order_release);
    }
  });
  on[0] = confine_to(cpus[0]);
  auto start = Clock::now();
  std::uint32_t trips = 0;  // timed ones
  for (std::uint32_t k = 0; k <= kTrips; ++k) {
    const std::uint32_t back = 2 * k + 2;
    turn.store(back - 1, std::memory_order_release);
    std::uint32_t spins = 0;
    while (turn.load(std::memory_order_acquire) != back) {
      if (++spins % 256 == 0 && Clock::now() - start > kProbeLimit) break;
      cpu_relax();
    }
    if (turn.load(std::memory_order_acquire) != back) break;
    if (k == 0)
      start = Clock::now();
    else
      ++trips;
  }
  const double ns = ns_since(start);
  stop.store(true, std::memory_order_relaxed);
  other.join();
  if (saved) sched_setaffinity(0, sizeof before, &before);  // for the probes after it
  return ns / std::max<std::uint32_t>(trips, 1);
}

double copy_gbps(std::vector<char>& from, std::vector<char>& to) {
  const auto start = Clock::now();
  std::memcpy(to.data(), from.data(), from.size());
  const double ns = ns_since(start);
  from[0] = static_cast<char>(to[from.size() - 1] + 1);  // each copy is of new data
  return static_cast<double>(from.size()) / ns;
}

template <class Probe>
double median_of_repeats(Probe probe) {
  std::vector<double> v;
  const auto start = Clock::now();
  for (int k = 0; k < kRepeats && (k == 0 || Clock::now() - start < kProbeLimit); ++k)
    v.push_back(probe());
  return median(std::move(v));
}

// Lets this thread (and the threads it starts) run on every online CPU; the
// CPUs it may use after that (a cgroup's cpuset can still narrow them).
int unpin_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < std::min<long>(online, CPU_SETSIZE); ++c) CPU_SET(c, &set);
  sched_setaffinity(0, sizeof set, &set);  // on failure the probes keep the caller's CPUs
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

MachineSpeed measure_here() {
  MachineSpeed s;
  s.cpus = unpin_this_thread();
  s.compute_ns = median_of_repeats(compute_step_ns);
  s.pingpong_ns = median_of_repeats([&] { return pingpong_ns(s.pingpong_cpus); });
  std::vector<char> from(8 << 20, 1), to(8 << 20, 2);  // touched: no page faults timed
  s.copy_gbps = median_of_repeats([&] { return copy_gbps(from, to); });
  return s;
}

}  // namespace

MachineSpeed measure_machine_speed() {
  MachineSpeed s;
  std::thread([&s] { s = measure_here(); }).join();
  return s;
}

std::string speed_line(const SpeedAround& s) {
  return fmt::format(
      "# machine speed (start / end): compute {:.2f} / {:.2f} ns, ping-pong {:.0f} / {:.0f} ns, "
      "copy {:.1f} / {:.1f} GB/s\n",
      s.start.compute_ns, s.end.compute_ns, s.start.pingpong_ns, s.end.pingpong_ns,
      s.start.copy_gbps, s.end.copy_gbps);
}

nlohmann::json speed_json(const SpeedAround& s) {
  const auto one = [](const MachineSpeed& m) {
    return nlohmann::json{{"compute_ns", m.compute_ns},
                          {"pingpong_ns", m.pingpong_ns},
                          {"copy_gbps", m.copy_gbps},
                          {"cpus", m.cpus},
                          {"pingpong_cpus", m.pingpong_cpus}};
  };
  return {{"version", kMachineSpeedVersion}, {"start", one(s.start)}, {"end", one(s.end)}};
}

}  // namespace cclab::bench
