// Eager transfers of the gloo executor: small messages skip Gloo's
// unbound-buffer rendezvous.
//
// An unbound-buffer transfer moves its data only once the receiver's "ready"
// notice has reached the sender, and Gloo writes a notice of its own before
// the data: three socket writes (and as many wake-ups of the peer's loop
// thread) per message. For small messages those are the whole cost. So each
// ordered pair of ranks has a ring of kEagerSlots Gloo *bound* buffers, which
// the receiver registers once: the sender copies a message behind a header
// into its ring entry and writes it in one go (Gloo's SEND_BUFFER), the
// receiver's loop thread reads it straight into the matching entry. Measured
// before this design (2 ranks exchanging 2 KiB on 127.0.0.1, a lockstep
// loop): 33 us per exchange over bound buffers against 91 us over unbound
// ones with receives posted ahead.
//
// Bound buffers have no flow control, so the receiver grants it: the sender
// may write message i only when the receiver has released message
// i - kEagerSlots (copied it out), which the receiver says with a one-byte
// write to the pair's signal buffer for every kEagerSignalEvery messages it
// releases. A signal is counted, never read, so signals need no flow control
// of their own and cannot deadlock against the data. A sender without credit
// copies the message aside (the send step is done) and writes it when a
// signal comes. The receiver matches the header to the receive step that
// expects it, or copies the message out until that step is issued.
//
// A peer that has sent its last messages may close before they are taken:
// Gloo then fails every wait on the pair, even for a message that has
// arrived. So a block ends with its index again, and a message whose header
// and trailer both carry the expected index is taken from the ring anyway.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cclab/collectives/gloo.h"

namespace gloo::transport {
class Buffer;
}

namespace cclab::coll::detail {

// Ring entries per ordered pair, and how many released messages one signal
// stands for. A sender reads signals only once out of credit (a wait, and a
// worker's wake-up): with 8 entries that happened every 4 messages, and 2
// ranks (direct, --pin, three alternating runs) took 55-63 us per 4 KiB
// all-reduce against 27-47 us with 32 entries (64: no better).
inline constexpr int kEagerSlots = 32;
inline constexpr int kEagerSignalEvery = kEagerSlots / 2;

// A message larger than this goes as fragments of this size, each an eager
// message of its own: the receiver reduces one while the next arrives. Blocks
// are the smaller of this and the eager limit, and shrink further when the
// receive rings of all peers would exceed kEagerRingBudget.
inline constexpr std::size_t kEagerFragmentBytes = 256u << 10;
inline constexpr std::size_t kEagerRingBudget = 64u << 20;
inline constexpr std::size_t kEagerMinFragmentBytes = 4u << 10;

// At the start of every eager message (a fragment of the k-th message).
struct EagerHeader {
  std::uint64_t index =
      0;  // of this block on its (sender, receiver) pair; repeated after the payload
  std::uint64_t seq = 0;     // the collective
  std::uint32_t k = 0;       // its k-th message from this sender to this receiver
  std::uint32_t bytes = 0;   // the whole message
  std::uint32_t offset = 0;  // of this fragment's payload in the message
  std::uint32_t length = 0;  // of this fragment's payload, which follows
};

// Bytes of a block with `payload` bytes: header, payload, trailer.
inline std::size_t eager_block_bytes(std::size_t payload) {
  return sizeof(EagerHeader) + payload + sizeof(std::uint64_t);
}

// Distance between ring entries in their ring's memory: a block, rounded up
// to a cache line, so that every payload is as aligned as the first.
inline std::size_t eager_ring_stride(std::size_t payload) {
  return (eager_block_bytes(payload) + 63) / 64 * 64;
}

// Memory for eager blocks: a mapping of its own (a ring's entries side by
// side, a cache line apart), made resident from both sides when made: user
// space writes it, then the kernel does.
//
// On the AMD EPYC VM (a PVM guest) the first access to a page costs about
// 5 us from each side (see touch_by_kernel), and with every ring entry a
// heap block of its own (touched the same way) `direct`'s first pass over
// its 32 entries was still slow in most runs: 2 ranks, 32 KiB, beside
// `gloo-ring`, `-n 20 -w 5`, 12 of 18 runs at 143-300 us (the others 39-57);
// with this layout, run in the same hour, 18 of 18 at 46-83 us, each below
// its run's `gloo-ring`. Why the heap blocks went cold again and a mapping
// does not is not known. Transparent huge pages (MADV_HUGEPAGE on the rings)
// fixed the first pass too, but made the process's large transfers slower in
// most runs there, Gloo's as much as ours (128 MiB, 2 ranks: 55-107 ms a
// call without, 62-632 ms with, up to 751 in an earlier run), so the rings
// do not ask for them.
class EagerMemory {
 public:
  EagerMemory() = default;
  explicit EagerMemory(std::size_t bytes);
  EagerMemory(EagerMemory&& other) noexcept;
  EagerMemory& operator=(EagerMemory&& other) noexcept;
  EagerMemory(const EagerMemory&) = delete;
  EagerMemory& operator=(const EagerMemory&) = delete;
  ~EagerMemory();
  std::byte* data() const { return base_; }
  std::size_t size() const { return bytes_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
};

// One ring entry (or the signal buffer): memory and the Gloo buffer over it.
// A ring entry's memory is in its ring's; a signal buffer's is its own.
struct EagerSlot {
  EagerMemory own;
  std::byte* mem = nullptr;
  std::unique_ptr<gloo::transport::Buffer> buf;
};

// A message that arrived before its step: copied out of the ring.
struct EagerStashed {
  EagerHeader header;
  std::vector<std::byte> payload;
};

// A collective's message: (collective seq, message number k).
using EagerKey = std::pair<std::uint64_t, std::uint32_t>;

// A receive step waiting for (the rest of) its message.
struct EagerExpect {
  std::int64_t step = 0;
  std::size_t to_arrive = 0;  // payload bytes that have not arrived
  int delivering = 0;         // fragments being copied out now
};

// What arrives from one peer: its ring (registered receive buffers; message
// i lands in entry i % kEagerSlots), messages that came before their step,
// the steps waiting for theirs (someone must wait on the ring while there are
// any), and the steps whose fragments have all arrived but are still being
// copied out (no reason to wait).
struct EagerInbox {
  EagerMemory memory;  // of the ring (destroyed after its buffers)
  std::vector<EagerSlot> ring;
  EagerSlot signal;                      // send buffer to the peer's signal buffer
  std::uint64_t next = 0;                // index of the next message to arrive
  std::uint64_t released = 0;            // messages before it are copied out
  std::array<bool, kEagerSlots> done{};  // copied out, of those from `released` on
  std::uint64_t signals = 0;             // written to the peer
  std::multimap<EagerKey, EagerStashed> arrived;
  std::map<EagerKey, EagerExpect> expected;
  std::map<EagerKey, EagerExpect> finishing;
  bool waiting = false;  // a wait is on ring[next % kEagerSlots]
};

// What is sent to one peer: its ring of send buffers (made on the first
// send), the peer's signals, and blocks waiting for credit, in order.
struct EagerOutbox {
  EagerMemory memory;  // of the ring (destroyed after its buffers)
  std::vector<EagerSlot> ring;
  std::array<bool, kEagerSlots> unwaited{};  // a send from this entry not yet waited for
  EagerSlot signal;                          // registered: the peer's signals
  std::uint64_t next = 0;                    // index of the next block
  std::uint64_t credit = kEagerSlots;        // blocks with a smaller index may be written
  std::deque<std::vector<std::byte>> queued;
  bool waiting = false;  // a wait is on `signal`
};

// Gloo bound-buffer slot (per pair) of ring entry i of the messages from
// `from` to `to`, and of the signals from `from` to `to`. The two directions
// differ: Gloo unregisters a buffer by its slot when any buffer of that slot
// on the pair is destroyed. Far above the slots Gloo's own algorithms take.
inline constexpr int kEagerSlotBase = 1 << 30;
inline int eager_ring_slot(int from, int to, int i) {
  return kEagerSlotBase + (from < to ? 0 : kEagerSlots) + i;
}
inline int eager_signal_slot(int from, int to) {
  return kEagerSlotBase + 2 * kEagerSlots + (from < to ? 0 : 1);
}
// Of the one-time primer that sizes the pair's socket buffer (gloo_comm_eager.cc).
inline int eager_primer_slot(int from, int to) {
  return kEagerSlotBase + 2 * kEagerSlots + 2 + (from < to ? 0 : 1);
}

}  // namespace cclab::coll::detail
