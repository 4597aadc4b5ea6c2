// A minimal lazy generator (C++20 coroutine): schedules are produced step by
// step, so no consumer ever has to hold every rank's program at once.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <new>
#include <utility>

namespace cclab::coll {

// Where the frames of generators come from. By default the heap; a consumer
// that runs many programs at once (the simulator keeps tens of thousands)
// gives each program its own arena, so that one program's frames lie together
// in one block of memory that can be prefetched as a whole before the program
// is resumed. Frames of one size are recycled within the arena (a program's
// phases end and begin alike); what does not fit in the block comes from the
// heap. The arena's state lives at the start of its block, so a FrameArena is
// one pointer and may move while frames are live.
class FrameArena {
 public:
  struct Block;

  explicit FrameArena(std::size_t bytes = 4096);
  FrameArena(FrameArena&& other) noexcept : block_(std::exchange(other.block_, nullptr)) {}
  FrameArena& operator=(FrameArena&& other) noexcept {
    std::swap(block_, other.block_);
    return *this;
  }
  ~FrameArena();  // every frame it holds must be gone

  Block* block() const { return block_; }
  // The memory in use (the arena's state and the frames, live or recycled),
  // for prefetching.
  const void* data() const { return block_; }
  std::size_t used() const;

  // 16-byte aligned; throws std::bad_alloc.
  static void* allocate(Block* block, std::size_t n);
  static void deallocate(Block* block, void* p, std::size_t n);

 private:
  Block* block_;
};

namespace detail {
// The arena new frames come from on this thread (nullptr: the heap).
inline thread_local FrameArena::Block* current_frame_arena = nullptr;
}  // namespace detail

// While alive, generator frames created on this thread come from `arena`
// (creating a program and resuming it both create frames).
class ScopedFrameArena {
 public:
  explicit ScopedFrameArena(const FrameArena& arena)
      : saved_(std::exchange(detail::current_frame_arena, arena.block())) {}
  ~ScopedFrameArena() { detail::current_frame_arena = saved_; }
  ScopedFrameArena(const ScopedFrameArena&) = delete;
  ScopedFrameArena& operator=(const ScopedFrameArena&) = delete;

 private:
  FrameArena::Block* saved_;
};

template <class T>
class Generator {
 public:
  struct promise_type {
    const T* current = nullptr;
    std::exception_ptr error;

    Generator get_return_object() { return Generator(Handle::from_promise(*this)); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    // The yielded object lives in the coroutine frame until the next resume.
    std::suspend_always yield_value(const T& value) noexcept {
      current = std::addressof(value);
      return {};
    }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }

    // A frame remembers its arena (or none) in a header before it, so it is
    // freed correctly whichever arena is current then.
    static constexpr std::size_t kHeader = 16;
    static void* operator new(std::size_t n) {
      FrameArena::Block* arena = detail::current_frame_arena;
      void* p = arena ? FrameArena::allocate(arena, n + kHeader) : ::operator new(n + kHeader);
      *static_cast<FrameArena::Block**>(p) = arena;
      return static_cast<std::byte*>(p) + kHeader;
    }
    static void operator delete(void* frame, std::size_t n) {
      void* p = static_cast<std::byte*>(frame) - kHeader;
      if (FrameArena::Block* arena = *static_cast<FrameArena::Block**>(p))
        FrameArena::deallocate(arena, p, n + kHeader);
      else
        ::operator delete(p);
    }
  };
  using Handle = std::coroutine_handle<promise_type>;

  Generator() = default;
  explicit Generator(Handle h) : handle_(h) {}
  Generator(Generator&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Generator& operator=(Generator&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  ~Generator() { reset(); }

  // Advances to the next value; false when the sequence has ended.
  bool next() {
    if (!handle_ || handle_.done()) return false;
    handle_.resume();
    if (handle_.promise().error) std::rethrow_exception(std::exchange(handle_.promise().error, {}));
    return !handle_.done();
  }
  // The value produced by the last successful next().
  const T& value() const { return *handle_.promise().current; }

 private:
  void reset() {
    if (handle_) handle_.destroy();
    handle_ = {};
  }
  Handle handle_;
};

}  // namespace cclab::coll
