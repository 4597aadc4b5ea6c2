#include "cclab/trainer/cluster.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/error.h"

namespace cclab::train {

TaskInfo task_from_env(const coll::EnvLookup& env, int rank) {
  const auto tf = env("TF_CONFIG");
  if (!tf || tf->empty()) return TaskInfo{"worker", rank};
  // identity_from_env has validated the whole document; only the task is read here.
  coll::parse_tf_config(*tf);
  const auto j = nlohmann::json::parse(*tf);
  TaskInfo t;
  try {
    t.type = j.at("task").at("type").get<std::string>();
    t.id = j.at("task").at("index").get<int>();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("TF_CONFIG: task: {}", e.what()));
  }
  return t;
}

}  // namespace cclab::train
