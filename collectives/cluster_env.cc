#include "cclab/collectives/cluster_env.h"

#include <charconv>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/error.h"

namespace cclab::coll {
namespace {

using nlohmann::json;

[[noreturn]] void invalid(std::string_view what, const std::string& message) {
  throw InvalidArgument(fmt::format("{}: {}", what, message));
}

int parse_int(std::string_view text, std::string_view what) {
  int value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end)
    invalid(what, fmt::format("'{}' is not an integer", text));
  return value;
}

// A rank/size pair (plus the local pair) from four variables of one convention.
Identity from_vars(const EnvLookup& env, std::string_view source, const char* rank_var,
                   const char* size_var, const char* local_rank_var, const char* local_size_var) {
  auto rank = env(rank_var), size = env(size_var);
  if (!rank) invalid(rank_var, fmt::format("not set, but {} is", size_var));
  if (!size) invalid(size_var, fmt::format("not set, but {} is", rank_var));
  Identity id;
  id.source = source;
  id.rank = parse_int(*rank, rank_var);
  id.world_size = parse_int(*size, size_var);
  if (id.world_size < 1) invalid(size_var, fmt::format("must be at least 1 (got {})", *size));
  if (id.rank < 0 || id.rank >= id.world_size)
    invalid(rank_var, fmt::format("{} is outside [0, {}) ({}={})", id.rank, id.world_size, size_var,
                                  id.world_size));
  auto local_rank = env(local_rank_var), local_size = env(local_size_var);
  if (!local_rank && !local_size) {  // one host
    id.local_rank = id.rank;
    id.local_world_size = id.world_size;
    return id;
  }
  if (!local_rank) invalid(local_rank_var, fmt::format("not set, but {} is", local_size_var));
  if (!local_size) invalid(local_size_var, fmt::format("not set, but {} is", local_rank_var));
  id.local_rank = parse_int(*local_rank, local_rank_var);
  id.local_world_size = parse_int(*local_size, local_size_var);
  if (id.local_world_size < 1 || id.local_world_size > id.world_size)
    invalid(local_size_var, fmt::format("{} is outside [1, {}] ({}={})", id.local_world_size,
                                        id.world_size, size_var, id.world_size));
  if (id.local_rank < 0 || id.local_rank >= id.local_world_size)
    invalid(local_rank_var,
            fmt::format("{} is outside [0, {})", id.local_rank, id.local_world_size));
  return id;
}

// The addresses of one task type ("chief", "worker"), in index order.
std::vector<std::string> task_addresses(const json& cluster, const char* type) {
  std::vector<std::string> out;
  if (!cluster.contains(type)) return out;
  const auto& list = cluster[type];
  const auto field = fmt::format("cluster.{}", type);
  if (!list.is_array()) invalid("TF_CONFIG", field + ": must be a list of \"host:port\" strings");
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string() || list[i].get<std::string>().find(':') == std::string::npos)
      invalid("TF_CONFIG", fmt::format("{}[{}]: must be a \"host:port\" string (got {})", field, i,
                                       list[i].dump()));
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

std::string host_of(const std::string& address) { return address.substr(0, address.rfind(':')); }

}  // namespace

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Identity parse_tf_config(std::string_view text) {
  const json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) invalid("TF_CONFIG", "not a JSON object");
  if (!doc.contains("cluster") || !doc["cluster"].is_object())
    invalid("TF_CONFIG", "cluster: missing or not an object");
  if (!doc.contains("task") || !doc["task"].is_object())
    invalid("TF_CONFIG", "task: missing or not an object");
  const auto& task = doc["task"];
  if (!task.contains("type") || !task["type"].is_string())
    invalid("TF_CONFIG", "task.type: missing or not a string");
  if (!task.contains("index") || !task["index"].is_number_integer())
    invalid("TF_CONFIG", "task.index: missing or not an integer");
  const auto type = task["type"].get<std::string>();
  const auto index = task["index"].get<long long>();
  const auto chief = task_addresses(doc["cluster"], "chief");
  const auto workers = task_addresses(doc["cluster"], "worker");
  if (chief.size() > 1)
    invalid("TF_CONFIG", fmt::format("cluster.chief: at most one entry (got {})", chief.size()));
  // All-reduce members in rank order: the chief, then the workers.
  std::vector<std::string> members = chief;
  members.insert(members.end(), workers.begin(), workers.end());
  if (members.empty()) invalid("TF_CONFIG", "cluster: no chief and no worker tasks");
  const auto& of_type = type == "chief" ? chief : workers;
  if (type != "chief" && type != "worker")
    invalid("TF_CONFIG", fmt::format("task.type: '{}' takes no part in all-reduce (allowed: "
                                     "chief, worker)",
                                     type));
  if (index < 0 || index >= static_cast<long long>(of_type.size()))
    invalid("TF_CONFIG", fmt::format("task.index: {} is outside cluster.{} (it has {} entries)",
                                     index, type, of_type.size()));
  Identity id;
  id.source = "TF_CONFIG";
  id.rank = static_cast<int>(index) + (type == "worker" ? static_cast<int>(chief.size()) : 0);
  id.world_size = static_cast<int>(members.size());
  id.host = host_of(members[id.rank]);
  id.local_world_size = 0;
  for (int r = 0; r < id.world_size; ++r) {
    if (host_of(members[r]) != id.host) continue;
    if (r < id.rank) ++id.local_rank;
    ++id.local_world_size;
  }
  return id;
}

std::optional<Identity> identity_from_env(const EnvLookup& env) {
  if (auto tf = env("TF_CONFIG"); tf && !tf->empty()) return parse_tf_config(*tf);
  if (env("RANK") || env("WORLD_SIZE"))
    return from_vars(env, "RANK/WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                     "LOCAL_WORLD_SIZE");
  if (env("OMPI_COMM_WORLD_RANK") || env("OMPI_COMM_WORLD_SIZE"))
    return from_vars(env, "OMPI_COMM_WORLD_*", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
  return std::nullopt;
}

std::string Rendezvous::spec() const {
  return kind == Kind::kFile ? "file:" + path : fmt::format("redis://{}:{}", host, port);
}

Rendezvous parse_rendezvous(std::string_view spec, std::string_view what) {
  constexpr std::string_view kFile = "file:", kRedis = "redis://";
  Rendezvous r;
  if (spec.substr(0, kFile.size()) == kFile) {
    r.path = spec.substr(kFile.size());
    if (r.path.empty()) invalid(what, "file: needs a directory, e.g. file:/tmp/cclab-rdzv");
    return r;
  }
  if (spec.substr(0, kRedis.size()) != kRedis)
    invalid(what,
            fmt::format("'{}' is not a rendezvous (allowed: file:DIR, redis://host:port)", spec));
  const auto hostport = spec.substr(kRedis.size());
  const auto colon = hostport.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    invalid(what, fmt::format("'{}': expected redis://host:port", spec));
  r.kind = Rendezvous::Kind::kRedis;
  r.host = hostport.substr(0, colon);
  r.port = parse_int(hostport.substr(colon + 1), fmt::format("{}: port", what));
  if (r.port < 1 || r.port > 65535)
    invalid(what, fmt::format("port {} is outside [1, 65535]", r.port));
  return r;
}

std::optional<Rendezvous> rendezvous_from(std::string_view flag, const EnvLookup& env) {
  if (!flag.empty()) return parse_rendezvous(flag, "--rendezvous");
  if (auto v = env("CCLAB_RENDEZVOUS"); v && !v->empty())
    return parse_rendezvous(*v, "CCLAB_RENDEZVOUS");
  auto addr = env("MASTER_ADDR"), port = env("MASTER_PORT");
  if (!addr && !port) return std::nullopt;
  if (!addr) invalid("MASTER_ADDR", "not set, but MASTER_PORT is");
  if (!port) invalid("MASTER_PORT", "not set, but MASTER_ADDR is");
  return parse_rendezvous(fmt::format("redis://{}:{}", *addr, *port), "MASTER_ADDR/MASTER_PORT");
}

}  // namespace cclab::coll
