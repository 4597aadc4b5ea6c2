#include "blocks.h"

#include "cclab/collectives/error.h"

namespace cclab::coll::detail {

Step Emitter::make(StepKind kind, int peer, Region src, Region dst, Deps deps) {
  Step s;
  s.kind = kind;
  s.peer = peer >= 0 ? frame_.ranks(peer) : peer;
  s.src = kind != StepKind::kRecv && kind != StepKind::kFence ? frame_.buffers.apply(src) : src;
  s.dst = kind != StepKind::kSend && kind != StepKind::kFence ? frame_.buffers.apply(dst) : dst;
  s.phase = phase_;
  for (auto d : deps.id)
    if (d >= 0) s.deps[s.num_deps++] = d;
  ++next_;
  return s;
}

Step Emitter::send(int peer, Region src, Deps deps, bool into_reduce) {
  Step s = make(StepKind::kSend, peer, src, {}, deps);
  s.into_reduce = into_reduce;
  return s;
}
Step Emitter::recv(int peer, Region dst, Deps deps) {
  return make(StepKind::kRecv, peer, {}, dst, deps);
}
Step Emitter::recv_reduce(int peer, Region src, Region dst, Deps deps) {
  return make(StepKind::kRecvReduce, peer, src, dst, deps);
}
Step Emitter::copy(Region src, Region dst, Deps deps) {
  return make(StepKind::kCopy, -1, src, dst, deps);
}
Step Emitter::reduce(Region src, Region dst, Deps deps) {
  return make(StepKind::kReduce, -1, src, dst, deps);
}
Step Emitter::fence() { return make(StepKind::kFence, -1, {}, {}, {}); }

Region BufferMap::apply(const Region& r) const {
  const VectorRef& v = r.buffer == BufferId::kInput    ? input
                       : r.buffer == BufferId::kOutput ? output
                                                       : scratch;
  return v.at(r.offset, r.count);
}

}  // namespace cclab::coll::detail
