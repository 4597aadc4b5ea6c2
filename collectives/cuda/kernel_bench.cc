// cclab_kernel_bench: bandwidth of the reduction kernel beside a cudaMemcpy
// device-to-device copy of the same buffers, measured in the same run on the
// same device. Both count bytes read plus bytes written: the reduction
// dst = a + b moves 3 x bytes, the copy 2 x bytes. The ratio is the figure
// to watch (a reduction kernel can at best match the copy engine's rate).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/cuda.h"
#include "cclab/collectives/error.h"
#include "cuda_check.h"
#include "kernels.h"

namespace cclab::coll {
namespace {

struct Options {
  int device = 0;
  std::vector<std::string> sizes = {"1M", "16M", "256M"};
  std::vector<std::string> dtypes = {"f32", "bf16", "f16", "f64", "i32"};
  int reps = 20;
  std::string json_path;
};

std::uint64_t parse_bytes(const std::string& text) {
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    throw InvalidArgument(fmt::format("--sizes: malformed size '{}'", text));
  }
  const std::string suffix = text.substr(used);
  if (suffix == "K") return v << 10;
  if (suffix == "M") return v << 20;
  if (suffix == "G") return v << 30;
  if (!suffix.empty()) throw InvalidArgument(fmt::format("--sizes: malformed size '{}'", text));
  return v;
}

// Median over `reps` timed runs of fn (enqueued on `stream`), in microseconds.
template <class Fn>
double median_us(cudaStream_t stream, int reps, Fn&& fn) {
  cudaEvent_t start, stop;
  CCLAB_CUDA(cudaEventCreate(&start));
  CCLAB_CUDA(cudaEventCreate(&stop));
  fn();  // warm-up
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    CCLAB_CUDA(cudaEventRecord(start, stream));
    fn();
    CCLAB_CUDA(cudaEventRecord(stop, stream));
    CCLAB_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CCLAB_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

nlohmann::json measure(const Options& o, std::uint64_t bytes, DataType t, cudaStream_t stream,
                       int sm_count) {
  DeviceBuffer a(o.device, bytes), b(o.device, bytes), dst(o.device, bytes);
  const std::uint64_t count = bytes / dtype_size(t);
  const double reduce_us = median_us(stream, o.reps, [&] {
    detail::launch_reduce(stream, dst.data(), a.data(), b.data(), count, t, ReduceOp::kSum,
                          sm_count);
  });
  const double copy_us = median_us(stream, o.reps, [&] {
    CCLAB_CUDA(cudaMemcpyAsync(dst.data(), a.data(), count * dtype_size(t),
                               cudaMemcpyDeviceToDevice, stream));
  });
  const double moved = static_cast<double>(count * dtype_size(t));
  const double reduce_gbps = 3 * moved / (reduce_us * 1e3);
  const double copy_gbps = 2 * moved / (copy_us * 1e3);
  return {{"bytes", bytes},         {"dtype", dtype_name(t)},          {"op", "sum"},
          {"reduce_us", reduce_us}, {"reduce_gbps", reduce_gbps},      {"copy_us", copy_us},
          {"copy_gbps", copy_gbps}, {"ratio", reduce_gbps / copy_gbps}};
}

int run(const Options& o) {
  // Bad flags are reported before the device is looked at.
  for (const auto& size : o.sizes) parse_bytes(size);
  for (const auto& name : o.dtypes) parse_dtype(name, "--dtypes");
  if (o.reps < 1) throw InvalidArgument(fmt::format("--reps: must be >= 1, got {}", o.reps));
  if (const auto why = cuda_unavailable_reason(); !why.empty()) throw BackendUnavailable(why);
  CCLAB_CUDA(cudaSetDevice(o.device));
  cudaDeviceProp prop{};
  CCLAB_CUDA(cudaGetDeviceProperties(&prop, o.device));
  cudaStream_t stream;
  CCLAB_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  nlohmann::json rows = nlohmann::json::array();
  std::cout << fmt::format("# {} ({} SMs); GB/s count bytes read + written\n", prop.name,
                           prop.multiProcessorCount)
            << fmt::format("{:>12} {:>6} {:>12} {:>12} {:>12} {:>12} {:>7}\n", "bytes", "type",
                           "reduce(us)", "reduce(GB/s)", "copy(us)", "copy(GB/s)", "ratio");
  for (const auto& size : o.sizes)
    for (const auto& name : o.dtypes) {
      auto row = measure(o, parse_bytes(size), parse_dtype(name, "--dtypes"), stream,
                         prop.multiProcessorCount);
      std::cout << fmt::format("{:>12} {:>6} {:>12.2f} {:>12.1f} {:>12.2f} {:>12.1f} {:>7.3f}\n",
                               row["bytes"].get<std::uint64_t>(), name,
                               row["reduce_us"].get<double>(), row["reduce_gbps"].get<double>(),
                               row["copy_us"].get<double>(), row["copy_gbps"].get<double>(),
                               row["ratio"].get<double>());
      rows.push_back(std::move(row));
    }
  cudaStreamDestroy(stream);
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    if (!out) throw IoError(fmt::format("--json: cannot open '{}' for writing", o.json_path));
    out << nlohmann::json{{"device", prop.name},
                          {"sm_count", prop.multiProcessorCount},
                          {"reps", o.reps},
                          {"rows", rows}}
               .dump(2)
        << '\n';
  }
  return 0;
}

}  // namespace
}  // namespace cclab::coll

int main(int argc, char** argv) {
  cclab::coll::Options o;
  CLI::App app{"Reduction-kernel bandwidth beside cudaMemcpy device-to-device",
               "cclab_kernel_bench"};
  app.add_option("--device", o.device, "CUDA device")->capture_default_str();
  app.add_option("--sizes", o.sizes, "Buffer sizes (K, M, G suffixes)")->delimiter(',');
  app.add_option("--dtypes", o.dtypes, "Element types")->delimiter(',');
  app.add_option("--reps", o.reps, "Timed repetitions (median)")->capture_default_str();
  app.add_option("--json", o.json_path, "Also write the results to this JSON file");
  try {
    app.parse(argc, argv);
    return cclab::coll::run(o);
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? app.exit(e)
                                  : (std::cerr << "cclab_kernel_bench: " << e.what() << '\n', 2);
  } catch (const cclab::InvalidArgument& e) {
    std::cerr << "cclab_kernel_bench: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cclab_kernel_bench: " << e.what() << '\n';
    return 1;
  }
}
