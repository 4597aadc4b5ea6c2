#include "cclab/collectives/generator.h"

#include <algorithm>
#include <cstdint>

namespace cclab::coll {

// The block's first bytes: its state, then the frames.
struct FrameArena::Block {
  struct Free {
    void* at;
    std::size_t size;
  };
  static constexpr int kMaxFree = 8;  // more freed frames than this are not recycled
  std::size_t size = 0;               // of the whole block
  std::size_t top = 0;                // bytes handed out, from the block's start
  int num_free = 0;
  Free free[kMaxFree];

  std::byte* base() { return reinterpret_cast<std::byte*>(this); }
  bool holds(const void* p) {
    const auto at = reinterpret_cast<std::uintptr_t>(p),
               start = reinterpret_cast<std::uintptr_t>(this);
    return at >= start && at < start + size;
  }
};

namespace {
constexpr std::align_val_t kAlign{64};
std::size_t round16(std::size_t n) { return (n + 15) / 16 * 16; }
}  // namespace

FrameArena::FrameArena(std::size_t bytes) {
  bytes = std::max(bytes, round16(sizeof(Block)));
  block_ = new (::operator new(bytes, kAlign)) Block;
  block_->size = bytes;
  block_->top = round16(sizeof(Block));
}

FrameArena::~FrameArena() {
  if (block_ == nullptr) return;
  block_->~Block();
  ::operator delete(block_, kAlign);
}

std::size_t FrameArena::used() const { return block_ ? block_->top : 0; }

void* FrameArena::allocate(Block* b, std::size_t n) {
  n = round16(n);
  for (int i = 0; i < b->num_free; ++i)
    if (b->free[i].size == n) {
      void* p = b->free[i].at;
      b->free[i] = b->free[--b->num_free];
      return p;
    }
  if (b->top + n > b->size) return ::operator new(n);
  b->top += n;
  return b->base() + b->top - n;
}

void FrameArena::deallocate(Block* b, void* p, std::size_t n) {
  if (!b->holds(p)) return ::operator delete(p);
  if (b->num_free < Block::kMaxFree) b->free[b->num_free++] = {p, round16(n)};
}

}  // namespace cclab::coll
