#include "plan_interpreter.h"

#include <algorithm>
#include <cstring>
#include <deque>

#include <fmt/format.h>

#include "cclab/collectives/reduce.h"

namespace cclab::coll::test {

HappensBefore::HappensBefore(const StreamPlan& plan) {
  const int n = plan.streams;
  std::vector<std::vector<std::uint32_t>> stream_clock(n, std::vector<std::uint32_t>(n, 0));
  std::vector<std::vector<std::uint32_t>> event_clock(plan.events);
  std::vector<bool> recorded(plan.events, false);
  std::vector<std::int64_t> group_first;  // per group: its first op, or -1
  pos_.resize(plan.ops.size());
  stream_.resize(plan.ops.size());
  clocks_.resize(plan.ops.size());
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const PlanOp& op = plan.ops[i];
    auto& c = stream_clock[op.stream];
    stream_[i] = op.stream;
    pos_[i] = ++c[op.stream];
    if (op.kind == PlanOpKind::kWait) {
      if (!recorded.at(op.event) && error.empty())
        error =
            fmt::format("op {} ({}) waits for an event not recorded before it", i, describe(op));
      else if (recorded[op.event])
        for (int s = 0; s < n; ++s) c[s] = std::max(c[s], event_clock[op.event][s]);
    }
    if (op.kind == PlanOpKind::kRecord) {
      recorded.at(op.event) = true;
      event_clock[op.event] = c;
    }
    if (op.group >= 0) {
      if (group_first.size() <= static_cast<std::size_t>(op.group))
        group_first.resize(op.group + 1, -1);
      if (auto first = group_first[op.group]; first < 0) {
        group_first[op.group] = static_cast<std::int64_t>(i);
      } else {  // a rendezvous: each side completes after both started
        auto& other = stream_clock[plan.ops[first].stream];
        for (int s = 0; s < n; ++s) c[s] = other[s] = std::max(c[s], other[s]);
        clocks_[first] = other;
      }
    }
    clocks_[i] = c;
  }
}

bool HappensBefore::before(std::int64_t i, std::int64_t j) const {
  return i != j && clocks_[j][stream_[i]] >= pos_[i];
}

HostBuffers make_buffers(const Schedule& schedule, const StreamPlan& plan, DataType t,
                         bool in_place) {
  const std::size_t es = dtype_size(t);
  const auto& shape = schedule.shape();
  HostBuffers b;
  b.in_place = in_place;
  for (int r = 0; r < schedule.ranks(); ++r) {
    const auto storage = in_place ? schedule.in_place_offsets(r).storage_count : 0;
    b.input.emplace_back(in_place ? 0 : shape.input_count() * es);
    b.output.emplace_back((in_place ? storage : shape.output_count()) * es, std::byte{0xA5});
    b.scratch.emplace_back(schedule.scratch_count() * es);
    b.staging.emplace_back(plan.staging_count[r] * es);
  }
  return b;
}

std::byte* host_address(HostBuffers& b, const Schedule& s, const BufferRef& r, std::size_t esize) {
  std::uint64_t offset = r.offset;
  std::vector<std::byte>* v = nullptr;
  switch (r.buffer) {
    case PlanBuffer::kInput:
      v = b.in_place ? &b.output[r.rank] : &b.input[r.rank];
      if (b.in_place) offset += s.in_place_offsets(r.rank).input;
      break;
    case PlanBuffer::kOutput:
      v = &b.output[r.rank];
      if (b.in_place) offset += s.in_place_offsets(r.rank).output;
      break;
    case PlanBuffer::kScratch:
      v = &b.scratch[r.rank];
      break;
    case PlanBuffer::kStaging:
      v = &b.staging[r.rank];
      break;
  }
  return v->data() + offset * esize;
}

namespace {

// One run of a plan: streams as queues of op indices.
class Interpreter {
 public:
  Interpreter(const StreamPlan& plan, const Schedule& schedule, HostBuffers& buffers, DataType t,
              ReduceOp op)
      : plan_(plan),
        schedule_(schedule),
        buffers_(buffers),
        type_(t),
        op_(step_op(op)),
        esize_(dtype_size(t)),
        queues_(plan.streams),
        recorded_(plan.events, false) {
    for (std::size_t i = 0; i < plan.ops.size(); ++i)
      queues_[plan.ops[i].stream].push_back(static_cast<std::int64_t>(i));
  }

  std::string run(std::mt19937& rng) {
    std::vector<int> ready;
    for (;;) {
      ready.clear();
      bool left = false;
      for (int s = 0; s < plan_.streams; ++s) {
        left |= !queues_[s].empty();
        if (runnable(s)) ready.push_back(s);
      }
      if (!left) return "";
      if (ready.empty()) return stall();
      step(ready[std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng)]);
    }
  }

 private:
  const PlanOp& head(int s) const { return plan_.ops[queues_[s].front()]; }

  // The other side of a send/recv group, if it heads its stream too.
  int partner(int s) const {
    const PlanOp& op = head(s);
    return !queues_[op.peer].empty() && head(op.peer).group == op.group ? op.peer : -1;
  }

  bool runnable(int s) const {
    if (queues_[s].empty()) return false;
    const PlanOp& op = head(s);
    if (op.kind == PlanOpKind::kWait) return recorded_[op.event];
    if (op.group >= 0) return partner(s) >= 0;
    return true;
  }

  std::byte* at(const BufferRef& r) { return host_address(buffers_, schedule_, r, esize_); }

  void step(int s) {
    const PlanOp& op = head(s);
    switch (op.kind) {
      case PlanOpKind::kCopy:
        std::memmove(at(op.dst), at(op.a), op.count * esize_);
        break;
      case PlanOpKind::kReduce:
        reduce(at(op.dst), at(op.a), at(op.b), op.count, type_, op_);
        break;
      case PlanOpKind::kRecord:
        recorded_[op.event] = true;
        break;
      case PlanOpKind::kWait:
        break;
      case PlanOpKind::kSend:
      case PlanOpKind::kRecv: {
        const int p = partner(s);
        const PlanOp& send = op.kind == PlanOpKind::kSend ? op : head(p);
        const PlanOp& recv = op.kind == PlanOpKind::kSend ? head(p) : op;
        std::memmove(at(recv.dst), at(send.a), recv.count * esize_);
        queues_[p].pop_front();
        break;
      }
    }
    queues_[s].pop_front();
  }

  std::string stall() const {
    std::string why = "the plan stalls:";
    for (int s = 0; s < plan_.streams; ++s)
      if (!queues_[s].empty()) why += fmt::format(" [{}]", describe(head(s)));
    return why;
  }

  const StreamPlan& plan_;
  const Schedule& schedule_;
  HostBuffers& buffers_;
  DataType type_;
  ReduceOp op_;
  std::size_t esize_;
  std::vector<std::deque<std::int64_t>> queues_;
  std::vector<bool> recorded_;
};

}  // namespace

std::string interpret(const StreamPlan& plan, const Schedule& schedule, HostBuffers& buffers,
                      DataType t, ReduceOp op, std::mt19937& rng) {
  return Interpreter(plan, schedule, buffers, t, op).run(rng);
}

}  // namespace cclab::coll::test
