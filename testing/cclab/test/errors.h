// Checks of the errors that bad input must raise, shared by every suite:
// the message names the field, flag or value and what is allowed.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include <gtest/gtest.h>

#include "cclab/collectives/error.h"

namespace cclab::test {

// The message of the cclab::Error that fn() throws, or "(no error)".
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Expects fn() to throw an E whose message contains every one of `parts`.
template <class E, class Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string_view> parts) {
  try {
    fn();
    std::string want;
    for (auto p : parts) want += " '" + std::string(p) + "'";
    ADD_FAILURE() << "no exception; expected one naming" << want;
  } catch (const E& e) {
    for (auto p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// The same for InvalidArgument, the error of bad input.
template <class Fn>
void expect_invalid(Fn&& fn, std::initializer_list<std::string_view> parts) {
  expect_error<InvalidArgument>(std::forward<Fn>(fn), parts);
}
template <class Fn>
void expect_invalid(Fn&& fn, std::string_view needle) {
  expect_error<InvalidArgument>(std::forward<Fn>(fn), {needle});
}

}  // namespace cclab::test
