#include "sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <sys/resource.h>
#include <time.h>

#include "cclab/collectives/error.h"
#include "check.h"
#include "mpi_peer.h"
#include "peers.h"

namespace cclab::bench {
namespace {

using coll::CollectiveKind;
using coll::CollectiveShape;

// What the ranks of one session share (they are threads of this process).
// Each rank writes only its own slots; rank 0 reads them all after a barrier.
// A size's rows each have their own slots, so that interleaved rows are timed
// side by side (`row` below: the row's place among its size's rows).
struct Shared {
  Shared(int ranks, int iters, int rows_per_size)
      : ranks(ranks),
        iters(iters),
        times_us(static_cast<std::size_t>(rows_per_size) * ranks * iters),
        starts_us(times_us.size()),
        ends_us(times_us.size()),
        use(times_us.size()),
        wrong(static_cast<std::size_t>(rows_per_size) * ranks),
        outputs(ranks) {}
  std::size_t slot(int row, int rank, int iteration) const {
    return (static_cast<std::size_t>(row) * ranks + rank) * iters + iteration;
  }
  int ranks, iters;
  std::vector<double> times_us;            // [slot(row, rank, iteration)]
  std::vector<double> starts_us, ends_us;  // as times_us: steady_clock's, for Timing::kSpan
  std::vector<HostUse> use;                // as times_us
  std::vector<std::uint64_t> wrong;        // [row * ranks + rank], for the current size
  std::vector<const std::byte*> outputs;   // per rank, for the identity check
  std::vector<SweepRow> rows;              // appended by rank 0 (add_row)
  RowHook on_row;
  void add_row(SweepRow row) {
    rows.push_back(std::move(row));
    if (on_row) on_row(rows.back());
  }
};

// One row of a size as it is being measured: its identity, and its call (none
// when skipped).
struct Contender {
  SweepRow row;
  std::function<void()> run;
};

// One collective call: its per-rank shape and this rank's pointers.
struct Call {
  CollectiveShape shape;
  coll::AlgoConfig algo;
  std::byte* send = nullptr;  // ours, so writable for in-place refills
  std::byte* recv = nullptr;
};

// The buffers of one rank for the whole sweep, sized for its largest call, in
// the backend's memory (device memory for GPU backends: inputs and outputs
// then travel through host copies). In place, one storage holds input and
// output at NCCL's offsets (the all-gather input and the reduce-scatter
// output are the rank's block).
class RankBuffers {
 public:
  RankBuffers(const BenchConfig& c, int rank, std::unique_ptr<RankMemory> memory)
      : config_(c),
        rank_(rank),
        elem_bytes_(coll::dtype_size(c.dtype)),
        memory_(std::move(memory)),
        bytes_(rank_buffer_bytes(c, memory_->host_visible())),
        send_(memory_->allocate(bytes_.send)),
        recv_(memory_->allocate(bytes_.recv)) {
    host_in_.resize(bytes_.host_in);
    host_out_.resize(bytes_.host_out);
  }

  Call call(const CollectiveShape& shape, const coll::AlgoConfig& algo) const {
    Call call{shape, algo, send_, recv_};
    if (!config_.in_place) return call;
    const std::uint64_t block = shape.count * static_cast<std::uint64_t>(rank_) * elem_bytes_;
    call.send = recv_ + (shape.kind == CollectiveKind::kAllGather ? block : 0);
    call.recv = recv_ + (shape.kind == CollectiveKind::kReduceScatter ? block : 0);
    return call;
  }

  void fill_input(const Expectation& expect, const Call& call) {
    const std::uint64_t n = call.shape.input_count();
    if (memory_->host_visible()) return expect.fill_input(rank_, call.send, n);
    expect.fill_input(rank_, host_in_.data(), n);
    memory_->upload(call.send, host_in_.data(), n * elem_bytes_);
  }

  // Overwrites the output so that a call that writes nothing cannot pass the check.
  void poison_output(const Call& call) {
    memory_->fill(call.recv, 0xA5, call.shape.output_count() * elem_bytes_);
  }

  // The output where the host can read it (a copy for device memory).
  const std::byte* output_on_host(const Call& call) {
    if (memory_->host_visible()) return call.recv;
    memory_->download(host_out_.data(), call.recv, call.shape.output_count() * elem_bytes_);
    return host_out_.data();
  }

 private:
  const BenchConfig& config_;
  int rank_;
  std::size_t elem_bytes_;
  std::unique_ptr<RankMemory> memory_;
  RankBufferBytes bytes_;
  std::byte* send_;                            // out of place only
  std::byte* recv_;                            // the output, or in place the whole storage
  std::vector<std::byte> host_in_, host_out_;  // staging for device memory
};

void run_collective(coll::Communicator& comm, const BenchConfig& c, const Call& call) {
  const auto n = call.shape.count;
  switch (call.shape.kind) {
    case CollectiveKind::kAllReduce:
      return comm.allreduce(call.send, call.recv, n, c.dtype, c.op, call.algo);
    case CollectiveKind::kReduceScatter:
      return comm.reduce_scatter(call.send, call.recv, n, c.dtype, c.op, call.algo);
    case CollectiveKind::kAllGather:
      return comm.all_gather(call.send, call.recv, n, c.dtype, call.algo);
    case CollectiveKind::kBroadcast:
      return comm.broadcast(call.send, call.recv, n, c.dtype, c.root, call.algo);
  }
}

// The sweep as one rank runs it.
class RankRunner {
 public:
  RankRunner(const BenchConfig& c, Shared& shared, coll::Communicator& comm, bool shared_memory,
             std::unique_ptr<RankMemory> memory, const QuietHook& quiet)
      : config_(c),
        quiet_(quiet),
        shared_(shared),
        comm_(comm),
        rank_(comm.rank()),
        shared_memory_(shared_memory),
        expect_(c.ranks, c.dtype, c.op),
        sizes_(sweep_sizes(c)),
        buffers_(c, rank_, std::move(memory)) {}

  void run() {
    // Out of place the inputs are written once; calls never modify them.
    if (!config_.in_place)
      buffers_.fill_input(expect_, buffers_.call(shape_for(config_, sizes_.back().count), {}));
    quiet_point(true);
    run_sizes();
    quiet_point(false);
  }

 private:
  void quiet_point(bool at_start) {
    comm_.barrier();
    if (rank_ == 0 && quiet_) quiet_(at_start);
    comm_.barrier();
  }

  void run_sizes() {
    for (const auto& size : sizes_) {
      if (config_.interleave) {
        run_interleaved(size);
        continue;
      }
      int row = 0;
      for (const auto& algo : config_.ours()) {
        Contender c = prepare(size, algo, row);
        measure(c, row++);
      }
      for (const auto& peer : config_.peers) {
        Contender c = prepare_peer(size, peer, row);
        measure(c, row++);
      }
    }
  }

  // --interleave: every row of the size is checked and warmed up first, then
  // timed iteration i runs each row once, in interleaved_order, so that a slow
  // phase of the machine falls on all of them alike. Every rank computes the
  // same order.
  void run_interleaved(const SizePoint& size) {
    std::vector<Contender> rows;
    const auto next = [&] { return static_cast<int>(rows.size()); };
    for (const auto& algo : config_.ours()) rows.push_back(prepare(size, algo, next()));
    for (const auto& peer : config_.peers) rows.push_back(prepare_peer(size, peer, next()));
    for (auto& c : rows)
      for (int i = 0; c.run && i < config_.warmup; ++i) c.run();
    for (int i = 0; i < config_.iters; ++i)
      for (const int r : interleaved_order(next(), i))
        if (rows[r].run) timed_call(r, i, rows[r].run);
    for (int r = 0; r < next(); ++r) finish(rows[r], r);
  }

  // Warm-up and timed calls of one row, then its figures.
  void measure(Contender& c, int row) {
    for (int i = 0; c.run && i < config_.warmup; ++i) c.run();
    for (int i = 0; c.run && i < config_.iters; ++i) timed_call(row, i, c.run);
    finish(c, row);
  }

  void finish(Contender& c, int row) {
    if (!c.run) {  // skipped
      if (rank_ == 0) shared_.add_row(c.row);
      return;
    }
    finish_row(std::move(c.row), row);
  }

  // Our algorithm `algo` at `size`, checked (when asked) and ready to time.
  Contender prepare(const SizePoint& size, const coll::AlgoConfig& algo, int row) {
    SweepRow out = new_row(size, algo.algo, "");
    out.chunks = algo.chunks;
    out.inner = algo.inner;
    // Every rank knows the groups alike (gloo: the hosts), so all skip or all throw.
    out.skipped = hier_row_skip_reason(config_, algo, comm_.with_host_groups(algo).group_size);
    if (!out.skipped.empty() && !config_.inner_all)
      throw InvalidArgument(fmt::format("--inner: {}", out.skipped));
    if (!out.skipped.empty()) return {std::move(out), {}};
    const Call call = buffers_.call(shape_for(config_, size.count), algo);
    coll::Communicator& comm = our_comm(algo_label(out));
    if (config_.check) check(comm, call, row);
    if (config_.in_place) buffers_.fill_input(expect_, call);
    if (algo.algo == coll::Algorithm::kAuto)
      out.chosen = coll::select_algorithm(call.shape, coll::dtype_size(config_.dtype), call.algo);
    return {std::move(out), [this, &comm, call] { run_collective(comm, config_, call); }};
  }

  // A peer uses our buffers as we do, except that one which runs in place
  // only does so on the output buffer (see peer_runs_in_place). It is built
  // for this size only (Gloo's classic algorithms allocate and connect when
  // constructed).
  Contender prepare_peer(const SizePoint& size, const std::string& peer, int row) {
    Contender c{new_row(size, coll::Algorithm::kRing, peer), {}};
    c.row.skipped = peer_skip_reason(peer, config_, size.bytes);
    if (!c.row.skipped.empty()) return c;  // every rank decides alike, so nobody runs it
    if (peer == kStreamPeer) return prepare_stream(std::move(c), size, row);
    Call call = buffers_.call(shape_for(config_, size.count), {});
    const bool in_place = peer_runs_in_place(peer, config_);
    if (in_place) call.send = call.recv;
    // MPI's peer brings its own communicator (MPI_COMM_WORLD).
    auto& comm = peer == kMpiPeer ? comm_ : peer_comm(peer);
    c.run = make_peer(comm, peer, call.send, call.recv, call.shape.count, config_);
    if (config_.check) {
      // In place the inputs are written now, into the buffer the peer
      // overwrites; out of place they are there (written once), and the
      // output is poisoned so that a peer that writes nothing cannot pass.
      if (in_place)
        buffers_.fill_input(expect_, call);
      else
        buffers_.poison_output(call);
      c.run();
      wrong(row) = expect_.count_wrong(call.shape, rank_, buffers_.output_on_host(call));
    }
    return c;
  }

  // The stream row (peers.h): checked by what arrived, on connections of its
  // own in either layout, so that no row is timed on its traffic.
  Contender prepare_stream(Contender c, const SizePoint& size, int row) {
    StreamCall stream = make_stream(row_comm(std::string(kStreamPeer)), size.bytes);
    c.run = std::move(stream.run);
    if (config_.check) {
      c.run();
      wrong(row) = stream.wrong();
    }
    return c;
  }

  // The connections a row runs on (gloo). By default ours share a split of
  // the world and the peers share another, so that neither is timed on the
  // connections that carry the sweep's own barriers and result exchanges
  // (the world's): on the AMD EPYC VM under bbr, `hd` alone beside four Gloo
  // peers at 4 ranks, 2 MiB, read 0.90 of the best peer's speed on the
  // world's connections and 0.98 on a split (medians of six alternating
  // runs, 2026-12-04). The peers need connections apart from ours anyway:
  // Gloo's classic algorithms fix SO_SNDBUF to their message size, which
  // turns off the kernel's buffer autotuning for the socket (a later, larger
  // message of ours on it stalled 100-250 ms per call, seen at 256 KiB after
  // 32 KiB). --connections row gives every row a split of its own, made at
  // its first size and kept for the others: the kernel carries TCP state
  // from one call to the next (bbr's bandwidth estimate, hence its pacing
  // rate; the buffers' autotuning), so rows that share connections are timed
  // partly on each other's traffic.
  // Only gloo's rows get connections of their own: the other backends have
  // none to separate (threads, cuda) or cannot split (nccl, whose peers run
  // on the world as NCCL's own communicator would).
  coll::Communicator& our_comm(const std::string& label) {
    if (config_.backend != "gloo") return comm_;
    return row_comm(config_.row_connections ? label : "ours");
  }

  coll::Communicator& peer_comm(const std::string& peer) {
    if (config_.backend != "gloo") return comm_;
    return row_comm(config_.row_connections ? peer : "peers");
  }

  coll::Communicator& row_comm(const std::string& key) {
    auto& comm = row_comms_[key];
    if (!comm) comm = comm_.split(0, rank_);
    return *comm;
  }

  SweepRow new_row(const SizePoint& size, coll::Algorithm algo, const std::string& peer) const {
    SweepRow row;
    row.bytes = size.bytes;
    row.count = size.count;
    row.algo = algo;
    row.peer = peer;
    return row;
  }

  std::uint64_t& wrong(int row, int rank) {
    return shared_.wrong[static_cast<std::size_t>(row) * config_.ranks + rank];
  }
  std::uint64_t& wrong(int row) { return wrong(row, rank_); }

  void finish_row(SweepRow row, int index) {
    if (!shared_memory_) return exchange_row(std::move(row), index);
    comm_.barrier();  // every rank's times and wrong count are written
    if (rank_ == 0) shared_.add_row(make_row(std::move(row), index));
    comm_.barrier();  // rank 0 has read them before anyone overwrites them
  }

  // Ranks in separate processes: the row's figures travel by collectives. A
  // call's time is the maximum over ranks (see Timing), its host use the sum,
  // iteration by iteration.
  void exchange_row(SweepRow row, int index) {
    const std::size_t at = shared_.slot(index, rank_, 0);
    const std::size_t n = config_.iters;
    const bool span = config_.timing == Timing::kSpan;
    // kRank: the ranks' own times; kSpan: their starts, then their ends.
    const double* first = span ? &shared_.starts_us[at] : &shared_.times_us[at];
    std::vector<double> times(first, first + n);
    if (span) times.insert(times.end(), &shared_.ends_us[at], &shared_.ends_us[at] + n);
    comm_.allreduce(times.data(), times.data(), times.size(), coll::DataType::kF64,
                    coll::ReduceOp::kMax);
    if (span) times = spans(times.data(), times.data() + n);
    HostUse* use = &shared_.use[shared_.slot(index, rank_, 0)];
    std::vector<double> sums;
    for (int i = 0; i < config_.iters; ++i) sums.insert(sums.end(), {use[i].cpu_us, use[i].csw});
    comm_.allreduce(sums.data(), sums.data(), sums.size(), coll::DataType::kF64,
                    coll::ReduceOp::kSum);
    for (int i = 0; i < config_.iters; ++i) use[i] = {sums[2 * i], sums[2 * i + 1]};
    summarize_use(use, row);
    std::int64_t wrong_here = static_cast<std::int64_t>(wrong(index));
    if (config_.check)
      comm_.allreduce(&wrong_here, &wrong_here, 1, coll::DataType::kI64, coll::ReduceOp::kSum);
    if (rank_ != 0) return;
    summarize(std::move(times), config_, row);
    if (config_.check) row.wrong = static_cast<std::uint64_t>(wrong_here);
    shared_.add_row(std::move(row));
  }

  // Timed iteration i of the size's row `row`: --batch calls back to back
  // after a barrier; their mean time and host use (read outside the timed span).
  void timed_call(int row, int i, const std::function<void()>& run) {
    comm_.barrier();
    const HostUse before = HostUse::now(!shared_memory_);
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < config_.batch; ++k) run();
    const auto stop = std::chrono::steady_clock::now();
    const HostUse used = HostUse::now(!shared_memory_) - before;
    const std::size_t at = shared_.slot(row, rank_, i);
    const auto us = [](auto d) { return std::chrono::duration<double, std::micro>(d).count(); };
    shared_.times_us[at] = us(stop - start) / config_.batch;
    shared_.starts_us[at] = us(start.time_since_epoch());
    shared_.ends_us[at] = us(stop.time_since_epoch());
    shared_.use[at] = {used.cpu_us / config_.batch, used.csw / config_.batch};
  }

  // Medians of the per-call host use `use[0..iters)` into `row`.
  void summarize_use(const HostUse* use, SweepRow& row) const {
    std::vector<double> cpu, csw;
    for (int i = 0; i < config_.iters; ++i) {
      cpu.push_back(use[i].cpu_us);
      csw.push_back(use[i].csw);
    }
    row.cpu_us_median = median(std::move(cpu));
    row.csw_median = median(std::move(csw));
  }

  // One call on known inputs, then every rank compares its own output with
  // the reference and, where outputs must agree, with rank 0's bit for bit.
  void check(coll::Communicator& comm, const Call& call, int row) {
    buffers_.poison_output(call);
    if (config_.in_place) buffers_.fill_input(expect_, call);
    run_collective(comm, config_, call);
    const std::byte* out = buffers_.output_on_host(call);
    if (!shared_memory_) {
      // Every rank's output is compared bitwise with the reference, which
      // implies the ranks agree bit for bit; there is no rank 0 copy to read.
      wrong(row) = expect_.count_wrong(call.shape, rank_, out);
      return;
    }
    shared_.outputs[rank_] = out;
    comm_.barrier();  // all outputs are final
    std::uint64_t bad = expect_.count_wrong(call.shape, rank_, out);
    if (rank_ != 0 && call.shape.kind != CollectiveKind::kReduceScatter)
      bad += count_mismatches(out, shared_.outputs[0], call.shape.output_count(),
                              coll::dtype_size(config_.dtype));
    wrong(row) = bad;
    comm_.barrier();  // nobody writes an output before all comparisons are done
  }

  // Per iteration, the latest start and end over ranks (in) -> the spans per call.
  std::vector<double> spans(const double* last_start, const double* last_end) const {
    std::vector<double> times(config_.iters);
    for (int i = 0; i < config_.iters; ++i)
      times[i] = (last_end[i] - last_start[i]) / config_.batch;
    return times;
  }

  SweepRow make_row(SweepRow row, int index) {
    const std::size_t n = config_.iters;
    std::vector<double> times(n, 0.0), last_start(n, 0.0), last_end(n, 0.0);
    for (int r = 0; r < config_.ranks; ++r)
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t at = shared_.slot(index, r, static_cast<int>(i));
        times[i] = std::max(times[i], shared_.times_us[at]);
        last_start[i] = std::max(last_start[i], shared_.starts_us[at]);
        last_end[i] = std::max(last_end[i], shared_.ends_us[at]);
      }
    if (config_.timing == Timing::kSpan) times = spans(last_start.data(), last_end.data());
    summarize(std::move(times), config_, row);
    std::vector<HostUse> use(config_.iters);  // summed over ranks, as across processes
    for (int r = 0; r < config_.ranks; ++r)
      for (int i = 0; i < config_.iters; ++i) {
        const HostUse& u = shared_.use[shared_.slot(index, r, i)];
        use[i] = {use[i].cpu_us + u.cpu_us, use[i].csw + u.csw};
      }
    summarize_use(use.data(), row);
    if (config_.check) {
      row.wrong = 0;
      for (int r = 0; r < config_.ranks; ++r) *row.wrong += wrong(index, r);
    }
    return row;
  }

  const BenchConfig& config_;
  const QuietHook& quiet_;
  Shared& shared_;
  coll::Communicator& comm_;
  std::map<std::string, std::unique_ptr<coll::Communicator>> row_comms_;  // made on first use
  int rank_;
  bool shared_memory_;  // false: this process holds one rank, Shared is its own
  Expectation expect_;
  std::vector<SizePoint> sizes_;
  RankBuffers buffers_;
};

}  // namespace

RankBufferBytes rank_buffer_bytes(const BenchConfig& config, bool host_visible) {
  const coll::CollectiveShape largest = shape_for(config, sweep_sizes(config).back().count);
  const std::uint64_t elem = coll::dtype_size(config.dtype);
  const std::uint64_t in = largest.input_count() * elem, out = largest.output_count() * elem;
  RankBufferBytes b;
  b.send = config.in_place ? 0 : in;
  b.recv = std::max(in, out);
  if (!host_visible) b.host_in = in, b.host_out = out;
  return b;
}

void require_sweep_memory(const BenchConfig& config, int ranks_here, bool one_process,
                          bool host_visible) {
  const double buffers = double(rank_buffer_bytes(config, host_visible).host(host_visible));
  const auto sizes = sweep_sizes(config);
  require_memory("-e/--maxbytes",
                 fmt::format("{} of {} bytes {} on the {} rank(s) this machine holds",
                             coll::collective_name(config.coll), sizes.back().bytes,
                             config.in_place ? "in place" : "out of place", ranks_here),
                 buffers * ranks_here);
  // Shared's slots (three clocks and a HostUse per rank, row and iteration)
  // and every row's kept times; each process of a process backend has its own.
  const std::size_t rows = config.ours().size() + config.peers.size();
  const double slot = 3 * sizeof(double) + sizeof(HostUse);
  const double timings = double(rows) * config.iters *
                         (config.ranks * slot + double(sizes.size()) * sizeof(double)) *
                         (one_process ? 1 : ranks_here);
  require_memory("-n/--iters",
                 fmt::format("{} timed iterations of {} row(s) a size on {} rank(s)", config.iters,
                             rows, config.ranks),
                 timings);
}

std::string algo_label(const SweepRow& row) {
  return row.peer.empty() ? coll::candidate_label(row.algo, row.chunks, row.inner) : row.peer;
}

std::vector<int> interleaved_order(int rows, int iteration) {
  // Sequence k of the design: 0, 1, n-1, 2, n-2, ... shifted by k (mod n);
  // for odd n, sequences n..2n-1 are those reversed.
  const int n = rows;
  if (n <= 0) return {};
  const int k = iteration % (n % 2 == 0 ? n : 2 * n);
  std::vector<int> order(n);
  for (int j = 0; j < n; ++j) {
    const int base = j % 2 == 1 ? (j + 1) / 2 : (n - j / 2) % n;
    order[j] = (base + k) % n;
  }
  if (k >= n) std::reverse(order.begin(), order.end());
  return order;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

namespace {

// P(Binomial(n, 1/2) = i), through logarithms: 2^-n underflows past n = 1074.
double binomial_half_pmf(std::size_t n, std::size_t i) {
  return std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) -
                  static_cast<double>(n) * std::log(2.0));
}

}  // namespace

PairedRatio paired_ratio(const std::vector<double>& num, const std::vector<double>& den) {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < std::min(num.size(), den.size()); ++i)
    if (den[i] > 0) ratios.push_back(num[i] / den[i]);
  PairedRatio out;
  if (ratios.empty()) return out;
  out.median = median(ratios);
  std::sort(ratios.begin(), ratios.end());
  const std::size_t n = ratios.size();
  // Rank k (1-based) from each end: grow it while P(X <= k - 1) stays <= 2.5%.
  std::size_t k = 0;
  double below = 0, upto = binomial_half_pmf(n, 0);  // P(X <= k - 1), P(X <= k)
  while (k < n / 2 && upto <= 0.025) {
    ++k;
    below = upto;
    upto += binomial_half_pmf(n, k);
  }
  if (k == 0) return out;
  out.has_interval = true;
  out.low = ratios[k - 1];
  out.high = ratios[n - k];
  out.coverage = 1 - 2 * below;
  return out;
}

HostUse HostUse::now(bool whole_process) {
  timespec cpu{};
  clock_gettime(whole_process ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID, &cpu);
  rusage ru{};
  getrusage(whole_process ? RUSAGE_SELF : RUSAGE_THREAD, &ru);
  return {static_cast<double>(cpu.tv_sec) * 1e6 + static_cast<double>(cpu.tv_nsec) / 1e3,
          static_cast<double>(ru.ru_nvcsw + ru.ru_nivcsw)};
}

void summarize(std::vector<double> times_us, const BenchConfig& config, SweepRow& row) {
  row.times_us = times_us;
  std::sort(times_us.begin(), times_us.end());
  const std::size_t n = times_us.size();
  row.iters = static_cast<int>(n);
  row.time_us_min = times_us.front();
  row.time_us_max = times_us.back();
  row.time_us_median = median(times_us);
  // bytes / (us * 1e-6 s) / 1e9 = bytes / (us * 1e3)
  row.algbw_gbps = row.time_us_median > 0 ? row.bytes / (row.time_us_median * 1e3) : 0.0;
  row.busbw_gbps = row.algbw_gbps * bus_factor(config.coll, config.ranks);
}

std::vector<SweepRow> run_sweep(const BenchConfig& config, Backend& backend, const QuietHook& quiet,
                                const RowHook& on_row) {
  Shared shared(config.ranks, config.iters,
                static_cast<int>(config.ours().size() + config.peers.size()));
  shared.on_row = on_row;
  const bool shared_memory = backend.shares_memory();
  backend.run([&](coll::Communicator& comm) {
    RankRunner(config, shared, comm, shared_memory, backend.memory(comm.rank()), quiet).run();
  });
  return std::move(shared.rows);
}

}  // namespace cclab::bench
