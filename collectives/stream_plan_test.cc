// The stream planner, proved on the CPU. For every algorithm of every
// collective, ranks and both lowerings:
//  - its plan is equivalent to the schedule: the k-th send from a to b is
//    carried out together with b's k-th receive from a (FIFO per pair, as in
//    schedule.h), on the same regions; every dependency and every fence of the
//    schedule becomes a happens-before edge of the plan, computed from the
//    plan's ops alone (stream order, waits on earlier records, rendezvous);
//  - no wait it emits is implied by earlier ones;
//  - run on host memory with streams interleaved at random (all a GPU may
//    do), it gives the serial reference's results bit for bit;
//  - with any one wait removed, the check above finds the broken edge.
#include "cclab/collectives/stream_plan.h"

#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cclab/collectives/algorithms.h"
#include "cclab/collectives/kernel_layout.h"
#include "cclab/collectives/reduce.h"
#include "plan_interpreter.h"
#include "test_util.h"

namespace cclab::coll {
namespace {

// --- Kernel layout ------------------------------------------------------------

TEST(KernelLayout, SplitCoversEveryElementOnceWithAlignedBody) {
  for (std::size_t es : {1, 2, 4, 8}) {
    for (std::uintptr_t dst_off = 0; dst_off < 32; dst_off += es) {
      for (std::uintptr_t a_off : {dst_off, dst_off + 16, dst_off + es}) {
        for (std::uint64_t count : {0, 1, 3, 7, 8, 100, 1001}) {
          const std::uintptr_t dst = 4096 + dst_off, a = 8192 + a_off, b = 12288 + dst_off;
          const auto s = split_vectors(dst, a, b, count, es);
          EXPECT_EQ(s.head + s.body_elements() + s.tail, count);
          if (s.vectors == 0) continue;
          // The body starts on a 16-byte boundary for all three pointers.
          EXPECT_EQ((dst + s.head * es) % kVectorBytes, 0u);
          EXPECT_EQ((a + s.head * es) % kVectorBytes, 0u);
          EXPECT_EQ((b + s.head * es) % kVectorBytes, 0u);
          EXPECT_EQ(s.per_vector * es, kVectorBytes);
          EXPECT_LT(s.tail, s.per_vector);
          EXPECT_LT(s.head, s.per_vector);
        }
      }
    }
  }
}

TEST(KernelLayout, MisalignedPointersFallBackToScalar) {
  // dst at a 16-byte boundary, a 4 bytes past one: no common vector alignment.
  const auto s = split_vectors(4096, 8196, 0, 1000, 4);
  EXPECT_EQ(s.vectors, 0u);
  EXPECT_EQ(s.head, 1000u);
}

TEST(KernelLayout, LaunchShapeFillsTheDeviceWithoutIdleBlocks) {
  EXPECT_EQ(launch_shape(0, 132).blocks, 0u);
  EXPECT_EQ(launch_shape(1, 132).blocks, 1u);
  // 10 blocks' worth of work: 10 blocks, every one with work.
  EXPECT_EQ(launch_shape(10 * kThreadsPerBlock, 132).blocks, 10u);
  // Far more work than the device holds at once: kBlocksPerSm per SM, grid-stride.
  EXPECT_EQ(launch_shape(std::uint64_t{1} << 30, 132).blocks, 132u * kBlocksPerSm);
  EXPECT_EQ(launch_shape(std::uint64_t{1} << 30, 132).threads, kThreadsPerBlock);
}

// --- The plan against the schedule ---------------------------------------------

struct PlanParam {
  CollectiveKind kind;
  Algorithm algo;
  int ranks;
  TransferLowering lowering;
};

std::vector<PlanParam> plan_grid() {
  std::vector<PlanParam> out;
  for (auto k : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                 CollectiveKind::kAllGather, CollectiveKind::kBroadcast})
    for (auto a : algorithms_for(k))
      for (int n : {1, 2, 3, 4, 5, 7, 8})
        for (auto l : {TransferLowering::kPull, TransferLowering::kSendRecv})
          out.push_back({k, a, n, l});
  return out;
}

std::string plan_name(const testing::TestParamInfo<PlanParam>& p) {
  return fmt::format("{}_{}_{}_{}", collective_name(p.param.kind), algorithm_name(p.param.algo),
                     p.param.ranks,
                     p.param.lowering == TransferLowering::kPull ? "pull" : "sendrecv");
}

std::vector<std::vector<Step>> programs(const Schedule& s) {
  std::vector<std::vector<Step>> out(s.ranks());
  for (int r = 0; r < s.ranks(); ++r)
    for (auto p = s.program(r); p.next();) out[r].push_back(p.value());
  return out;
}

BufferRef ref_of(int rank, const Region& r) {
  return {rank, static_cast<PlanBuffer>(r.buffer), r.offset};
}

// Each matched pair (FIFO per ordered pair, derived from the programs) is
// carried out by ops that move the right regions.
void check_pair(const StreamPlan& plan, int a, const Step& send, StepOps so, int b,
                const Step& recv, StepOps ro, std::vector<std::string>& errors) {
  const auto where = fmt::format("send {} -> recv {} ({})", a, b, describe(recv));
  if (so.first < 0 || ro.first < 0) return errors.push_back(where + ": no op");
  const PlanOp& first = plan.ops[ro.first];
  const bool reduce = recv.kind == StepKind::kRecvReduce;
  bool ok = first.count == recv.dst.count && send.src.count == recv.dst.count;
  if (first.kind == PlanOpKind::kRecv) {  // send/recv lowering
    const PlanOp& s = plan.ops[so.first];
    const PlanOp& last = plan.ops[ro.done];
    ok &= s.kind == PlanOpKind::kSend && s.group == first.group && s.peer == b && first.peer == a &&
          s.a == ref_of(a, send.src);
    ok &= reduce ? last.kind == PlanOpKind::kReduce && last.b == first.dst &&
                       last.a == ref_of(b, recv.src) && last.dst == ref_of(b, recv.dst)
                 : first.dst == ref_of(b, recv.dst);
  } else {  // pull: one op on the receiver reads the sender's region
    ok &= so.first == ro.first && first.stream == b && first.dst == ref_of(b, recv.dst);
    ok &= reduce ? first.kind == PlanOpKind::kReduce && first.a == ref_of(b, recv.src) &&
                       first.b == ref_of(a, send.src)
                 : first.kind == PlanOpKind::kCopy && first.a == ref_of(a, send.src);
  }
  if (!ok) errors.push_back(where + ": the plan moves other regions");
}

void check_matching(const StreamPlan& plan, const std::vector<std::vector<Step>>& prog,
                    std::vector<std::string>& errors) {
  const int n = static_cast<int>(prog.size());
  std::map<std::pair<int, int>, std::vector<std::int64_t>> sends, recvs;  // (from, to) -> ids
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < prog[r].size(); ++i) {
      const Step& s = prog[r][i];
      if (s.kind == StepKind::kSend) sends[{r, s.peer}].push_back(static_cast<std::int64_t>(i));
      if (s.is_recv()) recvs[{s.peer, r}].push_back(static_cast<std::int64_t>(i));
    }
  std::uint64_t pairs = 0;
  for (const auto& [key, ids] : sends) {
    const auto& rids = recvs[key];
    if (ids.size() != rids.size())
      errors.push_back(fmt::format("unmatched sends {}->{}", key.first, key.second));
    for (std::size_t k = 0; k < std::min(ids.size(), rids.size()); ++k, ++pairs)
      check_pair(plan, key.first, prog[key.first][ids[k]], plan.steps[key.first][ids[k]],
                 key.second, prog[key.second][rids[k]], plan.steps[key.second][rids[k]], errors);
  }
  if (pairs != plan.transfers) errors.push_back("transfer count differs from the schedule's");
}

// Every dep, every step before a fence, and every earlier local step (it
// completes when issued) happens before the step.
void check_order(const StreamPlan& plan, const test::HappensBefore& hb,
                 const std::vector<std::vector<Step>>& prog, std::vector<std::string>& errors) {
  for (std::size_t r = 0; r < prog.size(); ++r) {
    const auto& ops = plan.steps[r];
    std::vector<std::int64_t> before_fence;  // done ops of steps before the last fence
    std::vector<std::int64_t> so_far;
    std::int64_t last_local = -1;  // earlier local ones precede it on the stream
    for (std::size_t j = 0; j < prog[r].size(); ++j) {
      const Step& s = prog[r][j];
      if (s.kind == StepKind::kFence) {
        before_fence = so_far;
        continue;
      }
      if (ops[j].first < 0) continue;
      auto need = before_fence;
      if (last_local >= 0) need.push_back(last_local);
      for (int k = 0; k < s.num_deps; ++k)
        if (ops[s.deps[k]].done >= 0) need.push_back(ops[s.deps[k]].done);
      for (auto d : need)
        if (!hb.before(d, ops[j].first))
          errors.push_back(fmt::format("rank {} step {} ({}) may run before op {} ({})", r, j,
                                       describe(s), d, describe(plan.ops[d])));
      so_far.push_back(ops[j].done);
      if (s.kind == StepKind::kCopy || s.kind == StepKind::kReduce) last_local = ops[j].done;
    }
  }
}

// A rank's collective is done when its stream is: every one of its steps
// (sends read on other streams too) happens before the stream's last op.
void check_end(const StreamPlan& plan, const test::HappensBefore& hb,
               std::vector<std::string>& errors) {
  std::vector<std::int64_t> last(plan.streams, -1);
  for (std::size_t i = 0; i < plan.ops.size(); ++i)
    last[plan.ops[i].stream] = static_cast<std::int64_t>(i);
  for (int r = 0; r < plan.streams; ++r)
    for (const auto& s : plan.steps[r])
      if (s.done >= 0 && s.done != last[r] && !hb.before(s.done, last[r]))
        errors.push_back(fmt::format("rank {}'s stream may end before op {} ({})", r, s.done,
                                     describe(plan.ops[s.done])));
}

std::vector<std::string> verify(const Schedule& schedule, const StreamPlan& plan) {
  std::vector<std::string> errors;
  const auto prog = programs(schedule);
  const test::HappensBefore hb(plan);
  if (!hb.error.empty()) errors.push_back(hb.error);
  check_matching(plan, prog, errors);
  check_order(plan, hb, prog, errors);
  check_end(plan, hb, errors);
  return errors;
}

std::unique_ptr<Schedule> schedule_for(const PlanParam& p, std::uint64_t count) {
  return make_schedule({p.kind, p.ranks, count, p.ranks / 2}, {p.algo, 2});
}

class Plan : public testing::TestWithParam<PlanParam> {};

TEST_P(Plan, IsEquivalentToTheSchedule) {
  for (std::uint64_t count :
       {std::uint64_t{1}, std::uint64_t(GetParam().ranks + 1), std::uint64_t{64}}) {
    const auto schedule = schedule_for(GetParam(), count);
    const auto plan = plan_streams(*schedule, GetParam().lowering);
    for (const auto& e : verify(*schedule, plan)) ADD_FAILURE() << schedule->name() << ": " << e;
  }
}

// A kept wait tells its stream something it did not know: the stream's clock
// just before the wait does not already cover the op the event follows.
TEST_P(Plan, EmitsNoRedundantWait) {
  const auto schedule = schedule_for(GetParam(), 64);
  const auto plan = plan_streams(*schedule, GetParam().lowering);
  const test::HappensBefore hb(plan);
  std::vector<std::int64_t> record_of(plan.events, -1), last_on(plan.streams, -1);
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const PlanOp& op = plan.ops[i];
    if (op.kind == PlanOpKind::kRecord) record_of[op.event] = static_cast<std::int64_t>(i);
    if (op.kind == PlanOpKind::kWait) {
      const std::int64_t rec = record_of[op.event];
      ASSERT_GE(rec, 1);
      const std::int64_t prev = last_on[op.stream];
      const int s = plan.ops[rec].stream;
      // The op the event follows is the record's predecessor on its stream (position - 1).
      EXPECT_TRUE(prev < 0 || hb.clock(prev)[s] < hb.position(rec) - 1) << describe(op);
    }
    last_on[op.stream] = static_cast<std::int64_t>(i);
  }
}

// Runs the plan on host memory with a random stream interleaving; returns the
// number of wrong output elements over all ranks.
std::uint64_t run_on_host(const Schedule& schedule, const StreamPlan& plan, DataType t, ReduceOp op,
                          bool in_place, unsigned seed, std::string& error) {
  const auto& shape = schedule.shape();
  const std::size_t es = dtype_size(t);
  auto buffers = test::make_buffers(schedule, plan, t, in_place);
  for (int r = 0; r < shape.ranks; ++r)
    test::fill_input(test::host_address(buffers, schedule, {r, PlanBuffer::kInput, 0}, es),
                     shape.input_count(), t, op, r);
  std::mt19937 rng(seed);
  error = test::interpret(plan, schedule, buffers, t, op, rng);
  std::uint64_t wrong = 0;
  std::vector<std::byte> want(es);
  for (int r = 0; r < shape.ranks; ++r) {
    std::byte* out = test::host_address(buffers, schedule, {r, PlanBuffer::kOutput, 0}, es);
    if (op == ReduceOp::kAvg) finalize_avg(out, shape.output_count(), t, shape.ranks);
    for (std::uint64_t i = 0; i < shape.output_count(); ++i) {
      test::expected_output(want.data(), shape, r, i, t, op);
      wrong += std::memcmp(out + i * es, want.data(), es) != 0;
    }
  }
  return wrong;
}

TEST_P(Plan, HostRunMatchesSerialReference) {
  const auto p = GetParam();
  const bool reduces =
      p.kind == CollectiveKind::kAllReduce || p.kind == CollectiveKind::kReduceScatter;
  std::vector<std::pair<DataType, ReduceOp>> cases = {{DataType::kF32, ReduceOp::kSum}};
  if (reduces)
    cases.insert(cases.end(), {{DataType::kBF16, ReduceOp::kAvg},
                               {DataType::kI32, ReduceOp::kMax},
                               {DataType::kF64, ReduceOp::kProd}});
  const std::uint64_t n = p.ranks;
  for (std::uint64_t count :
       {std::uint64_t{0}, std::uint64_t{1}, n - 1, n + 1, std::uint64_t{257}}) {
    const auto schedule = schedule_for(p, count);
    const auto plan = plan_streams(*schedule, p.lowering);
    for (auto [t, op] : cases)
      for (bool in_place : {false, true})
        for (unsigned seed : {1u, 2u, 3u}) {
          std::string error;
          EXPECT_EQ(run_on_host(*schedule, plan, t, op, in_place, seed, error), 0u)
              << schedule->name() << " count " << count << " " << dtype_name(t) << " "
              << op_name(op) << (in_place ? " in place" : "") << " seed " << seed;
          EXPECT_EQ(error, "");
        }
  }
}

INSTANTIATE_TEST_SUITE_P(Streams, Plan, testing::ValuesIn(plan_grid()), plan_name);

// The grid's chunks (2) give hier's pipelines one wave; 9 chunks give three,
// whose chunks are under way together at different hops (hierarchical.cc):
// all-reduce's, reduce-scatter's and all-gather's (these with their rings
// side by side inside the groups), each with the ring and with hd between its
// 4 groups.
TEST(PlanPipelinedHier, IsEquivalentAndMatchesSerialReference) {
  for (auto kind :
       {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather})
    for (auto lowering : {TransferLowering::kPull, TransferLowering::kSendRecv})
      for (std::uint64_t count : {std::uint64_t{5}, std::uint64_t{257}})
        for (auto inner : {Algorithm::kRing, Algorithm::kHalvingDoubling}) {
          const auto schedule =
              make_schedule({kind, 8, count}, {Algorithm::kHierarchical, 9, 2, inner});
          const auto plan = plan_streams(*schedule, lowering);
          for (const auto& e : verify(*schedule, plan))
            ADD_FAILURE() << schedule->name() << ": " << e;
          for (bool in_place : {false, true}) {
            std::string error;
            EXPECT_EQ(
                run_on_host(*schedule, plan, DataType::kF32, ReduceOp::kSum, in_place, 1, error),
                0u)
                << collective_name(kind) << " " << schedule->name() << " count " << count
                << (in_place ? " in place" : "");
            EXPECT_EQ(error, "");
          }
        }
}

// The check has teeth: removing any one wait from a real plan breaks an edge
// it reports, and removing all of them lets some interleaving compute wrong
// results.
TEST(PlanCheck, FindsEveryRemovedWait) {
  for (auto lowering : {TransferLowering::kPull, TransferLowering::kSendRecv}) {
    const auto schedule = make_schedule({CollectiveKind::kAllReduce, 4, 64}, {Algorithm::kRing, 2});
    const auto plan = plan_streams(*schedule, lowering);
    int waits = 0;
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      if (plan.ops[i].kind != PlanOpKind::kWait) continue;
      ++waits;
      auto broken = plan;
      broken.ops[i].kind = PlanOpKind::kRecord;  // keep indices: a harmless op instead
      broken.ops[i].event = plan.events;         // of a fresh event nobody waits on
      ++broken.events;
      EXPECT_FALSE(verify(*schedule, broken).empty()) << "without " << describe(plan.ops[i]);
    }
    // Send/recv pairs are ordered by their streams alone on a ring: no waits.
    EXPECT_EQ(waits > 0, lowering == TransferLowering::kPull);
  }
}

TEST(PlanCheck, RunWithoutWaitsGoesWrong) {
  const auto schedule = make_schedule({CollectiveKind::kAllReduce, 4, 64}, {Algorithm::kRing, 2});
  auto plan = plan_streams(*schedule, TransferLowering::kPull);
  std::erase_if(plan.ops, [](const PlanOp& op) { return op.kind == PlanOpKind::kWait; });
  std::uint64_t wrong = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::string error;
    wrong += run_on_host(*schedule, plan, DataType::kF32, ReduceOp::kSum, false, seed, error);
  }
  EXPECT_GT(wrong, 0u);
}

TEST(PlanCheck, RingNeedsFewerWaitsThanDependencies) {
  // Vector clocks drop waits implied by earlier ones; on a ring most are.
  const auto schedule = make_schedule({CollectiveKind::kAllReduce, 8, 1024}, {Algorithm::kRing, 4});
  const auto plan = plan_streams(*schedule, TransferLowering::kPull);
  EXPECT_GT(plan.waits_dropped, 0u);
  EXPECT_EQ(plan.transfers, 8u * 7 * 2 * 4);  // 2(n-1) steps x n ranks x 4 chunks
}

}  // namespace
}  // namespace cclab::coll
