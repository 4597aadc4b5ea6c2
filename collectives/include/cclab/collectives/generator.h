// A minimal lazy generator (C++20 coroutine): schedules are produced step by
// step, so no consumer ever has to hold every rank's program at once.
#pragma once

#include <coroutine>
#include <exception>
#include <memory>
#include <utility>

namespace cclab::coll {

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
