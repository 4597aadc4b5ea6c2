// Built against an installed cclab: proves that the exported target, its
// headers and its link dependencies work from outside the build tree.
#include <iostream>
#include <string>

#include "cclab/collectives/types.h"

int main() {
  const std::string name{cclab::coll::dtype_name(cclab::coll::DataType::kF32)};
  std::cout << name << '\n';
  return name == "f32" ? 0 : 1;
}
