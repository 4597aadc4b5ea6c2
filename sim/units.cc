// Parsing of bandwidth and latency spellings (see units.h). A number followed
// by a unit; the number may have a fraction ("12.5Gbps") but no exponent.
#include "cclab/sim/units.h"

#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "cclab/collectives/error.h"

namespace cclab::sim {
namespace {

struct Unit {
  std::string_view suffix;
  double scale;
};

// Longest suffixes first, so "Gbps" is not read as "bps" after a 'G'.
constexpr Unit kBandwidthUnits[] = {
    {"Tbps", 1e12 / 8}, {"Gbps", 1e9 / 8}, {"Mbps", 1e6 / 8}, {"Kbps", 1e3 / 8}, {"TBps", 1e12},
    {"GBps", 1e9},      {"MBps", 1e6},     {"KBps", 1e3},     {"bps", 1.0 / 8},  {"Bps", 1.0},
};
constexpr Unit kLatencyUnits[] = {
    {"ps", 1e-12}, {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0},
};

// Splits "12.5Gbps" into 12.5 and the unit's scale; nullopt-like false on failure.
template <std::size_t N>
bool parse_quantity(std::string_view text, const Unit (&units)[N], double& value) {
  for (const Unit& u : units) {
    if (text.size() <= u.suffix.size() || !text.ends_with(u.suffix)) continue;
    const std::string number(text.substr(0, text.size() - u.suffix.size()));
    if (number.find_first_not_of("0123456789.-") != std::string::npos) return false;
    double v = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
    if (ec != std::errc() || end != number.data() + number.size()) return false;
    value = v * u.scale;
    return true;
  }
  return false;
}

}  // namespace

Time seconds_to_time(double seconds) {
  return static_cast<Time>(std::ceil(seconds * static_cast<double>(kPicosPerSecond) - 1e-6));
}

double parse_bandwidth(std::string_view text, std::string_view field) {
  double v = 0;
  if (!parse_quantity(text, kBandwidthUnits, v))
    throw InvalidArgument(fmt::format(
        "{}: malformed bandwidth '{}' (expected a number and a unit: bps, Kbps, Mbps, Gbps, "
        "Tbps for bits/s or Bps, KBps, MBps, GBps, TBps for bytes/s, e.g. 100Gbps)",
        field, text));
  if (!(v > 0) || !std::isfinite(v))
    throw InvalidArgument(fmt::format("{}: bandwidth must be positive (got '{}')", field, text));
  return v;
}

Time parse_latency(std::string_view text, std::string_view field) {
  if (text == "0") return 0;
  double v = 0;
  if (!parse_quantity(text, kLatencyUnits, v))
    throw InvalidArgument(fmt::format(
        "{}: malformed latency '{}' (expected a number and a unit: ps, ns, us, ms or s, e.g. "
        "1us)",
        field, text));
  if (v < 0 || !std::isfinite(v))
    throw InvalidArgument(fmt::format("{}: latency must not be negative (got '{}')", field, text));
  return static_cast<Time>(std::llround(v * static_cast<double>(kPicosPerSecond)));
}

std::uint64_t parse_bytes(std::string_view text, std::string_view field) {
  std::uint64_t scale = 1;
  std::string_view digits = text;
  if (!digits.empty()) {
    const char unit = digits.back();
    scale = unit == 'K' ? 1ull << 10 : unit == 'M' ? 1ull << 20 : unit == 'G' ? 1ull << 30 : 1;
    if (scale > 1) digits.remove_suffix(1);
  }
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      v > (~0ull) / scale)
    throw InvalidArgument(fmt::format(
        "{}: '{}' is not a byte count (digits with an optional K, M or G)", field, text));
  return v * scale;
}

bool parse_pair_order(std::string_view text, std::string_view field) {
  if (text != "fifo" && text != "shared")
    throw InvalidArgument(fmt::format("{}: expected fifo or shared (got '{}')", field, text));
  return text == "fifo";
}

}  // namespace cclab::sim
