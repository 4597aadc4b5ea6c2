// The gloo backend: one process per rank, schedules executed over Gloo's TCP
// transport. Ranks meet through a Gloo store (a file store on a shared
// directory or a Redis server), connect a full mesh of TCP pairs, and then
// run every schedule's sends and receives over Gloo, several in flight at
// once: messages up to GlooOptions::eager_bytes into a ring of bound buffers
// the receiver registered (one write each), larger ones as unbound-buffer
// transfers through Gloo's rendezvous.
// Built only when Gloo is found (CCLAB_HAVE_GLOO).
//
// The ibverbs transport is selectable where Gloo has it, but the executor
// needs unbound buffers, which Gloo's ibverbs transport does not implement
// (Debian's 2022 snapshot throws "Unbound buffers not supported yet"); asking
// for it is a BackendUnavailable error that says which of the two is missing.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "cclab/collectives/cluster_env.h"
#include "cclab/collectives/communicator.h"

namespace cclab::coll {

// The default and the largest GlooOptions::eager_bytes. 64 KiB: on 2 ranks
// (direct, --pin, two runs each) a 64 KiB message went faster eagerly (94 us
// per all-reduce against 110-114 through the rendezvous) and a 128 KiB one
// through the rendezvous (120-143 us against 148-166: no copy into the
// ring). Blocks are at most 256 KiB (larger messages go as fragments): a rank
// registers a ring of 32 per peer.
inline constexpr std::size_t kGlooDefaultEagerBytes = 64u << 10;
inline constexpr std::size_t kGlooMaxEagerBytes = 16u << 20;

// The Gloo transport the pairs use.
enum class GlooTransport { kTcp, kIbverbs };

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  Rendezvous rendezvous;
  // Key prefix in the store, so several communicators (and runs) coexist.
  std::string prefix = "cclab";
  // Address this rank's transport binds to (e.g. 127.0.0.1); empty: the hostname.
  std::string host;
  // The host this rank runs on, exchanged at rendezvous to group ranks for
  // `hier` (see Communicator::host_group_size); empty: the hostname.
  std::string host_name;
  // Every wait: rendezvous, each transfer, barrier.
  std::chrono::milliseconds timeout{30000};
  GlooTransport transport = GlooTransport::kTcp;
  // Messages up to this many bytes go eagerly (see gloo_eager.h): copied into
  // the receiver's ring, one way, instead of Gloo's rendezvous; 0: never;
  // at most kGlooMaxEagerBytes. Every rank must use the same value.
  std::size_t eager_bytes = kGlooDefaultEagerBytes;
  // Start Gloo's TCP loop thread (it reads and writes every pair's socket)
  // under SCHED_BATCH, so that waking up it does not preempt the thread that
  // runs on its core. That loop polls level-triggered and only try-locks a
  // pair: preempting a thread of ours that holds the pair's lock (every send
  // and receive takes it), it spins until the scheduler gives the core back,
  // a few ms (about CFS's sleeper credit). Measured (2 ranks pinned, 1 MiB
  // all-reduce): 0-3 of 138 calls took over 2 ms with it, 22-45 without.
  // false: Gloo's default policy.
  bool batch_loop_thread = true;
  // What chose the transport (a flag or variable), named in its errors.
  std::string transport_what = "transport";
};

// Rendezvous and full-mesh connection; blocks until every rank has joined or
// the timeout passes (TimeoutError naming the ranks that never came). Ignores
// SIGPIPE for the process: a write to a dead peer must be an error, not a kill.
// A transport that cannot serve the executor here (no RDMA device, no unbound
// buffers) is BackendUnavailable, before any rendezvous.
std::unique_ptr<Communicator> make_gloo_communicator(const GlooOptions& options);

}  // namespace cclab::coll
