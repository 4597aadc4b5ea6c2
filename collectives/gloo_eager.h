// Eager transfers of the gloo executor: small messages skip Gloo's
// unbound-buffer rendezvous.
//
// An unbound-buffer transfer moves its data only once the receiver's "ready"
// notice has reached the sender, so a message whose receive is posted when the
// collective starts costs a notice one way and the data the other. For small
// messages that round trip is the whole cost. So each receiver keeps
// kEagerPosted receives posted ahead, per peer it hears from, into blocks it
// owns (slot: the pair's eager message number), and each sender copies a small
// message behind a header {collective, message number} into a block of its own
// and sends it at once: the data travels one way, and the send step is done as
// soon as it is copied. The receiver matches the header to the receive step
// that expects it (or keeps the block until that step is issued), copies or
// reduces the payload out, and posts the block again; posting is the credit
// (Gloo's ready notice), so a sender that runs ahead of the posted blocks only
// falls back to the rendezvous, never blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cclab/collectives/gloo.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace cclab::coll::detail {

// Receives each receiver keeps posted per peer, at least.
inline constexpr int kEagerPosted = 8;
// A sender reclaims its blocks once this many sends to a peer are
// outstanding, down to kEagerReclaimTo.
inline constexpr std::size_t kEagerReclaimAt = 16;
inline constexpr std::size_t kEagerReclaimTo = 4;

// A message larger than this goes as fragments of this size (the payload of
// a block), each an eager message of its own: the receiver reduces one while
// the next arrives, and its blocks stay small. The default eager limit, so a
// message up to it is one Gloo message: at 256 KiB on 2 ranks (direct, one
// message each way) 128 KiB fragments cost 1.38-1.46x the CPU of Gloo's
// classic ring, 256 KiB ones 1.19-1.31x (three alternating runs each).
inline constexpr std::size_t kEagerFragmentBytes = kGlooDefaultEagerBytes;

// At the start of every eager message (a fragment of the k-th message).
struct EagerHeader {
  std::uint64_t seq = 0;     // the collective
  std::uint32_t k = 0;       // its k-th message from this sender to this receiver
  std::uint32_t bytes = 0;   // the whole message
  std::uint32_t offset = 0;  // of this fragment's payload in the message
  std::uint32_t length = 0;  // of this fragment's payload, which follows
};

// Memory for one eager message and the Gloo buffer over it.
struct EagerBlock {
  std::unique_ptr<std::byte[]> mem;
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  std::uint64_t seq = 0;  // sender: the collective it was sent for

  EagerHeader header() const;
  const std::byte* payload() const { return mem.get() + sizeof(EagerHeader); }
};

// A collective's message: (collective seq, message number k).
using EagerKey = std::pair<std::uint64_t, std::uint32_t>;

// Blocks of one size, reused.
class EagerBlocks {
 public:
  EagerBlocks(gloo::Context& context, std::size_t payload_bytes)
      : context_(context), size_(sizeof(EagerHeader) + payload_bytes) {}
  EagerBlock take();
  void give(EagerBlock b) { spare_.push_back(std::move(b)); }
  std::size_t size() const { return size_; }
  std::size_t payload() const { return size_ - sizeof(EagerHeader); }

 private:
  gloo::Context& context_;
  std::size_t size_;
  std::vector<EagerBlock> spare_;
};

// A receive step waiting for (the rest of) its message.
struct EagerExpect {
  std::int64_t step = 0;
  std::size_t to_arrive = 0;  // payload bytes that have not arrived
  int delivering = 0;         // fragments being copied out now
};

// What arrives from one peer: posted receives in message order (the front is
// the next to arrive), fragments that came before their step, the steps
// waiting for theirs (someone must wait on the inbox while there are any),
// and the steps whose fragments have all arrived but are still being copied
// out (no reason to wait).
struct EagerInbox {
  std::deque<EagerBlock> posted;
  std::uint32_t next_index = 0;  // eager message number of the next receive to post
  std::multimap<EagerKey, EagerBlock> arrived;
  std::map<EagerKey, EagerExpect> expected;
  std::map<EagerKey, EagerExpect> finishing;
  bool waiting = false;  // a wait is on posted.front()
  std::string error;     // why a receive could not be posted (the pair is closed)
};

// What is being sent to one peer: sends not yet complete, in order (Gloo
// completes a pair's sends in the order they were posted).
struct EagerOutbox {
  std::deque<EagerBlock> inflight;
  std::uint32_t next_index = 0;
  bool waiting = false;  // a wait is on inflight.front()
};

// Slot of the `index`-th eager message from `from` to `to`; apart from the
// rendezvous slots (bit 63) and from Gloo's own algorithms' small slots.
inline std::uint64_t eager_slot(int from, int to, std::uint32_t index) {
  return (1ull << 62) | (from < to ? 1ull << 31 : 0) | (index & 0x7fffffffu);
}

}  // namespace cclab::coll::detail
