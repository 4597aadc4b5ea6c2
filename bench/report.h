// Output of `cclab bench`: the nccl-tests style table on a stream and the JSON
// record (configuration, machine, build, date and rows) for results/.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "machine_speed.h"
#include "options.h"
#include "sweep.h"

namespace cclab::bench {

// Header block, one row per (size, algorithm), and the summary lines;
// `speed`, when measured, is one of them.
void print_table(std::ostream& out, const BenchConfig& config, const std::vector<SweepRow>& rows,
                 const std::optional<SpeedAround>& speed = std::nullopt);
// The same in three parts, for a sweep that prints its rows as they come.
void print_table_head(std::ostream& out, const BenchConfig& config);
void print_row(std::ostream& out, const BenchConfig& config, const SweepRow& row);
void print_table_tail(std::ostream& out, const BenchConfig& config,
                      const std::vector<SweepRow>& rows, const std::optional<SpeedAround>& speed);

// The whole record; algbw and busbw are computed from the median time;
// `speed`, when measured, is machine.speed.
nlohmann::json to_json(const BenchConfig& config, const std::vector<SweepRow>& rows,
                       const std::optional<SpeedAround>& speed = std::nullopt);
// Writes `record` pretty-printed; throws IoError naming --json and the path.
void write_json(const std::string& path, const nlohmann::json& record);

// --tune: our fastest algorithm per size (auto rows aside) as a tuning table,
// written to config.tune_path and summarised on `out`; throws IoError naming
// --tune.
void write_tuning_table(std::ostream& out, const BenchConfig& config,
                        const std::vector<SweepRow>& rows);

// cpu_model, cores, hostname, tcp_congestion_control
nlohmann::json machine_info();
// The congestion control new TCP sockets take (net.ipv4.tcp_congestion_control),
// "unknown" when unreadable. It moves the gloo backend's figures: on the AMD
// EPYC VM (bbr, and no fq qdisc on lo, so TCP paces itself) loopback carried
// 2.54 G/s each way with both directions busy, 4.16 with cubic
// (cclab_gbench's BM_LoopbackTcp at 16 MiB, both in one run).
std::string tcp_congestion_control();
nlohmann::json build_info();    // compiler, build_type, git_commit
std::string utc_now_iso8601();  // e.g. 2024-05-01T12:00:00Z

// Sum of #wrong over the rows (0 when the check is off).
std::uint64_t total_wrong(const std::vector<SweepRow>& rows);

}  // namespace cclab::bench
