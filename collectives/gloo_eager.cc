#include "gloo_eager.h"

#include <cstring>

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

namespace cclab::coll::detail {

EagerHeader EagerBlock::header() const {
  EagerHeader h;
  std::memcpy(&h, mem.get(), sizeof h);
  return h;
}

EagerBlock EagerBlocks::take() {
  if (!spare_.empty()) {
    EagerBlock b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }
  EagerBlock b;
  b.mem = std::make_unique<std::byte[]>(size_);
  b.buf = context_.createUnboundBuffer(b.mem.get(), size_);
  return b;
}

}  // namespace cclab::coll::detail
