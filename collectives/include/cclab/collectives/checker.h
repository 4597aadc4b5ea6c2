// A symbolic checker for schedules. It executes every rank's program on
// symbols instead of data: each element holds "element e with the
// contributions of ranks S". It proves, for one (schedule, in-place or not):
//  - every rank ends holding exactly what the collective defines (for
//    all-reduce: every element with exactly one contribution of every rank);
//  - every send meets a receive of the same length (FIFO per rank pair);
//  - the programs cannot deadlock under rendezvous semantics (progress does
//    not depend on the order in which matched transfers complete, so one run
//    decides it);
//  - no step touches a region that an issued, unfinished step of the same rank
//    writes (or writes one it reads), in the maximally concurrent interleaving
//    where every rank issues as far as it can before any transfer completes.
// It reports the first violation in plain words: rank, step, range.
#pragma once

#include <cstdint>
#include <string>

#include "cclab/collectives/schedule.h"

namespace cclab::coll {

struct CheckOptions {
  bool in_place = false;
  // Stop once this many steps have been issued (0: no limit). The checker
  // keeps every issued transfer's contents until it completes, so a schedule
  // of n^2 steps (ring, direct) at many thousands of ranks would otherwise run
  // for hours and out of memory.
  std::uint64_t max_steps = 0;
};

struct CheckResult {
  bool ok = true;
  std::string error;            // empty when ok
  std::uint64_t steps = 0;      // steps executed over all ranks
  std::uint64_t transfers = 0;  // matched send/receive pairs
  std::uint64_t rounds = 0;     // issue-then-complete rounds until done
  bool stopped = false;         // max_steps ran out first: neither proved nor refuted (!ok)
};

CheckResult check_schedule(const Schedule& schedule, const CheckOptions& options = {});

}  // namespace cclab::coll
