// Helpers shared by the simulator's tests.
#pragma once

#include <cmath>

namespace cclab::sim::test {

// |got - want| relative to |want|: closed forms are compared within a tolerance.
inline double rel_err(double got, double want) { return std::abs(got - want) / std::abs(want); }

}  // namespace cclab::sim::test
