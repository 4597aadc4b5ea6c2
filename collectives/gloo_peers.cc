// Gloo's all-reduce implementations as peers (see cclab/collectives/gloo_peers.h).
// Each is a template over the element type; this file instantiates the
// types and reductions both Gloo and cclab have (f32, f64, f16 as
// gloo::float16, i32, i64 with sum, prod, min, max) and names the flag for
// anything else. Gloo's f16 arithmetic is its header's inline software
// conversion (gloo/types.h): Debian's Gloo is built without GLOO_USE_AVX, the
// switch for its F16C sum. The stream reference (TransportStream) lives here
// too: it runs on the same contexts.
#include "cclab/collectives/gloo_peers.h"

#include <array>
#include <cstddef>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/math.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "cclab/collectives/error.h"
#include "gloo_comm.h"

namespace cclab::coll {
namespace {

enum class Kind { kRing, kRingChunked, kHalvingDoubling, kBcube, kFnRing, kFnBcube };

struct PeerName {
  std::string_view name;
  Kind kind;
};

constexpr std::array kPeers = {
    PeerName{"gloo-ring", Kind::kRing},          PeerName{"gloo-ring-chunked", Kind::kRingChunked},
    PeerName{"gloo-hd", Kind::kHalvingDoubling}, PeerName{"gloo-bcube", Kind::kBcube},
    PeerName{"gloo-fn-ring", Kind::kFnRing},     PeerName{"gloo-fn-bcube", Kind::kFnBcube},
};

const PeerName* find_peer(std::string_view name) {
  for (const auto& p : kPeers)
    if (p.name == name) return &p;
  return nullptr;
}

// A classic gloo::Algorithm (constructed once, run() many times).
class ClassicPeer final : public PeerAllreduce {
 public:
  explicit ClassicPeer(std::unique_ptr<gloo::Algorithm> algo) : algo_(std::move(algo)) {}
  void run() override { algo_->run(); }

 private:
  std::unique_ptr<gloo::Algorithm> algo_;
};

// gloo::allreduce with options (and so its unbound buffers) made once.
class FunctionPeer final : public PeerAllreduce {
 public:
  explicit FunctionPeer(gloo::AllreduceOptions opts) : opts_(std::move(opts)) {}
  void run() override { gloo::allreduce(opts_); }

 private:
  gloo::AllreduceOptions opts_;
};

template <typename T>
const gloo::ReductionFunction<T>* classic_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd:
      return gloo::ReductionFunction<T>::product;
    case ReduceOp::kMin:
      return gloo::ReductionFunction<T>::min;
    case ReduceOp::kMax:
      return gloo::ReductionFunction<T>::max;
    default:
      return gloo::ReductionFunction<T>::sum;
  }
}

template <typename T>
gloo::AllreduceOptions::Func function_fn(ReduceOp op) {
  using Fn = void (*)(void*, const void*, const void*, std::size_t);
  switch (op) {
    case ReduceOp::kProd:
      return static_cast<Fn>(&gloo::product<T>);
    case ReduceOp::kMin:
      return static_cast<Fn>(&gloo::min<T>);
    case ReduceOp::kMax:
      return static_cast<Fn>(&gloo::max<T>);
    default:
      return static_cast<Fn>(&gloo::sum<T>);
  }
}

template <typename T>
std::unique_ptr<PeerAllreduce> make_typed(const std::shared_ptr<gloo::Context>& ctx, Kind kind,
                                          const T* in, T* data, std::uint64_t count, ReduceOp op) {
  const std::vector<T*> ptrs = {data};
  const int n = static_cast<int>(count);  // the classic classes count in int
  switch (kind) {
    case Kind::kRing:
      return std::make_unique<ClassicPeer>(
          std::make_unique<gloo::AllreduceRing<T>>(ctx, ptrs, n, classic_fn<T>(op)));
    case Kind::kRingChunked:
      return std::make_unique<ClassicPeer>(
          std::make_unique<gloo::AllreduceRingChunked<T>>(ctx, ptrs, n, classic_fn<T>(op)));
    case Kind::kHalvingDoubling:
      return std::make_unique<ClassicPeer>(
          std::make_unique<gloo::AllreduceHalvingDoubling<T>>(ctx, ptrs, n, classic_fn<T>(op)));
    case Kind::kBcube:
      return std::make_unique<ClassicPeer>(
          std::make_unique<gloo::AllreduceBcube<T>>(ctx, ptrs, n, classic_fn<T>(op)));
    case Kind::kFnRing:
    case Kind::kFnBcube:
      break;
  }
  gloo::AllreduceOptions opts(ctx);
  // In place gloo::allreduce takes the output alone: given an input, even the
  // output itself, it copies each of its segments from there first.
  if (in != data) opts.setInput(const_cast<T*>(in), count);
  opts.setOutput(data, count);
  opts.setReduceFunction(function_fn<T>(op));
  opts.setAlgorithm(kind == Kind::kFnRing ? gloo::AllreduceOptions::Algorithm::RING
                                          : gloo::AllreduceOptions::Algorithm::BCUBE);
  return std::make_unique<FunctionPeer>(std::move(opts));
}

// Byte i of what `sender` sends in the stream reference.
std::byte stream_byte(int sender, std::uint64_t i) {
  return static_cast<std::byte>((i * 7 + static_cast<std::uint64_t>(sender) * 131) & 0xff);
}

class GlooStream final : public TransportStream {
 public:
  GlooStream(std::shared_ptr<gloo::Context> ctx, std::uint64_t bytes)
      : ctx_(std::move(ctx)), out_(bytes), in_(bytes) {
    for (std::uint64_t i = 0; i < bytes; ++i) out_[i] = stream_byte(ctx_->rank, i);
    send_ = ctx_->createUnboundBuffer(out_.data(), bytes);
    recv_ = ctx_->createUnboundBuffer(in_.data(), bytes);
  }
  void run() override {
    const int n = ctx_->size, me = ctx_->rank;
    recv_->recv((me + n - 1) % n, kSlot);
    send_->send((me + 1) % n, kSlot);
    recv_->waitRecv();  // both within the context's timeout
    send_->waitSend();
  }
  std::uint64_t wrong() const override {
    const int from = (ctx_->rank + ctx_->size - 1) % ctx_->size;
    std::uint64_t bad = 0;
    for (std::uint64_t i = 0; i < in_.size(); ++i) bad += in_[i] != stream_byte(from, i);
    return bad;
  }

 private:
  static constexpr std::uint64_t kSlot = 1;  // the stream has its context to itself
  std::shared_ptr<gloo::Context> ctx_;
  std::vector<std::byte> out_, in_;
  std::unique_ptr<gloo::transport::UnboundBuffer> send_, recv_;
};

}  // namespace

std::unique_ptr<TransportStream> make_gloo_stream(Communicator& comm, std::uint64_t bytes) {
  if (comm.size() < 2) throw InvalidArgument("--algo stream: needs 2 or more ranks");
  if (bytes == 0) throw InvalidArgument("--algo stream: needs a message of 1 byte or more");
  return std::make_unique<GlooStream>(detail::gloo_context(comm), bytes);
}

bool gloo_peer_in_place_only(std::string_view name) {
  const auto* peer = find_peer(name);
  return peer != nullptr && peer->kind != Kind::kFnRing && peer->kind != Kind::kFnBcube;
}

std::string gloo_peer_unsupported(std::string_view name, int ranks, DataType t, ReduceOp op) {
  const auto* peer = find_peer(name);
  if (peer == nullptr) return fmt::format("unknown Gloo peer '{}'", name);
  if (!gloo_peer_runs(t))
    return fmt::format("--dtype {}: Gloo peers run {}", dtype_name(t), kGlooPeerTypes);
  if (op == ReduceOp::kAvg)
    return fmt::format("--op {}: Gloo peers run sum, prod, min, max", op_name(op));
  // Gloo's bcube groups ranks in pairs at every level; an odd count has no partner.
  if (peer->kind == Kind::kBcube && ranks % 2 != 0)
    return fmt::format("gloo::AllreduceBcube needs an even rank count (got {})", ranks);
  return "";
}

std::unique_ptr<PeerAllreduce> make_gloo_peer(Communicator& comm, std::string_view name,
                                              const void* in, void* out, std::uint64_t count,
                                              DataType t, ReduceOp op) {
  if (auto why = gloo_peer_unsupported(name, comm.size(), t, op); !why.empty())
    throw InvalidArgument(fmt::format("--algo {}: {}", name, why));
  if (count > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    throw InvalidArgument(
        fmt::format("--algo {}: {} elements exceed Gloo's int count", name, count));
  const auto ctx = detail::gloo_context(comm);
  const Kind kind = find_peer(name)->kind;
  CCLAB_CHECK(in == out || !gloo_peer_in_place_only(name),
              "Gloo's classic all-reduce classes run in place only");
  const auto typed = [&]<typename T>(T*) {
    return make_typed(ctx, kind, static_cast<const T*>(in), static_cast<T*>(out), count, op);
  };
  switch (t) {
    case DataType::kF64:
      return typed(static_cast<double*>(nullptr));
    case DataType::kF16:
      return typed(static_cast<gloo::float16*>(nullptr));
    case DataType::kI32:
      return typed(static_cast<std::int32_t*>(nullptr));
    case DataType::kI64:
      return typed(static_cast<std::int64_t*>(nullptr));
    default:
      return typed(static_cast<float*>(nullptr));
  }
}

}  // namespace cclab::coll
