// Typed reads of the fields of the JSON files cclab reads back (tuning
// tables, bench records). A field of the wrong type is an error naming the
// file and the field, never a conversion: 4.5 is no integer, -1 no count,
// "8" no number.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cclab/collectives/error.h"

namespace cclab::coll {

// For json::parse(text, refuse_duplicate_keys(what)): a key given twice in
// one object, which nlohmann would settle by keeping the last, is an
// InvalidArgument "<what>: key 'bw' given twice in one object".
inline nlohmann::json::parser_callback_t refuse_duplicate_keys(std::string what) {
  auto open = std::make_shared<std::vector<std::set<std::string>>>();
  return [open, what = std::move(what)](int, nlohmann::json::parse_event_t event,
                                        nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) open->emplace_back();
    if (event == Event::object_end) open->pop_back();
    if (event == Event::key && !open->back().insert(parsed.get<std::string>()).second)
      throw InvalidArgument(
          fmt::format("{}: key '{}' given twice in one object", what, parsed.get<std::string>()));
    return true;
  };
}

// What a field of type T must hold, as an error message says it.
template <typename T>
const char* json_expected() {
  if constexpr (std::is_same_v<T, bool>)
    return "true or false";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>)
    return "an integer >= 0";
  else if constexpr (std::is_integral_v<T>)
    return "an integer";
  else
    return "a number";
}

// Whether `v` holds a T as it is, without conversion, and in T's range.
template <typename T>
bool json_holds(const nlohmann::json& v) {
  using Limits = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, bool>)
    return v.is_boolean();
  else if constexpr (std::is_same_v<T, std::string>)
    return v.is_string();
  else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return false;
    if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= std::uint64_t(Limits::max());
    const std::int64_t x = v.get<std::int64_t>();
    return x >= std::int64_t(Limits::min()) && (x < 0 || std::uint64_t(x) <= Limits::max());
  } else
    return v.is_number();
}

// obj[key] as T. `what` names the file ("tuning table 't.json'"), `field`
// the field's path ("bands[1].chunks"). Throws InvalidArgument
// "<what>: <field>: missing field" or "<what>: <field>: expected an
// integer, got 4.5".
template <typename T>
T json_field(const nlohmann::json& obj, const char* key, const std::string& what,
             const std::string& field) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw InvalidArgument(fmt::format("{}: {}: missing field", what, field));
  if (!json_holds<T>(*it))
    throw InvalidArgument(
        fmt::format("{}: {}: expected {}, got {}", what, field, json_expected<T>(), it->dump()));
  return it->get<T>();
}

}  // namespace cclab::coll
