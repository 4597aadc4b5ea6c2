// Simulated time and the unit spellings of topology specs and files.
//
// Time is an integer count of picoseconds (never floating point, so event
// order is exact and runs are deterministic); bandwidths are bytes per second
// as double. Spellings: bandwidth "100Gbps" (1e9 bit/s), "450GBps" (1e9 B/s),
// with prefixes K, M, G, T (powers of ten) on bps or Bps; latency "1us",
// "200ns", "2ms", "5ps", "1s" or "0".
#pragma once

#include <cstdint>
#include <string_view>

namespace cclab::sim {

using Time = std::int64_t;  // picoseconds

inline constexpr Time kPicosPerSecond = 1'000'000'000'000;

// Seconds as Time, rounded up so a non-zero duration never becomes zero.
Time seconds_to_time(double seconds);
inline double time_to_seconds(Time t) { return static_cast<double>(t) * 1e-12; }
inline double time_to_us(Time t) { return static_cast<double>(t) * 1e-6; }

// Throw InvalidArgument naming `field` and the text when malformed or not
// strictly positive (bandwidth) / negative (latency).
double parse_bandwidth(std::string_view text, std::string_view field);
Time parse_latency(std::string_view text, std::string_view field);
// A byte count: digits with an optional K, M or G (2^10, 2^20, 2^30).
std::uint64_t parse_bytes(std::string_view text, std::string_view field);
// How one pair's messages in flight go (Topology::pair_fifo): "fifo" (true)
// or "shared" (false).
bool parse_pair_order(std::string_view text, std::string_view field);

}  // namespace cclab::sim
