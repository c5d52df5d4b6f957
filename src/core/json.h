// JSON in and out: numbers range-checked on the way in, bytes that are not UTF-8 made safe on the
// way out.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/error.h"

namespace polyaccel {

// The text of `j` for output. nlohmann's plain dump() throws (type_error 316) on a string that is
// not UTF-8, such as a hostname from a capture or a name from the command line; here such bytes
// become U+FFFD. Every JSON we print or write goes through it.
std::string json_text(const nlohmann::json& j, int indent = 2);

// A JSON whole number in [min, max]; a float, a negative or a value that does not fit is refused
// by name (nlohmann's get<unsigned>() would wrap 4294967297 to 1).
Result<std::uint64_t> json_unsigned(const nlohmann::json& v, std::string_view what,
                                    std::uint64_t min = 0,
                                    std::uint64_t max = std::numeric_limits<std::uint64_t>::max());
Result<std::int64_t> json_signed(const nlohmann::json& v, std::string_view what, std::int64_t min,
                                 std::int64_t max);

// The member `key` of `object` with the type asked, or the fallback: when `object` is no object,
// lacks the member or holds it with another type. For what a server or a file says, where a field
// of another type is no field; nlohmann's value() would throw (type_error 302 or 306) on either.
std::string json_string(const nlohmann::json& object, std::string_view key,
                        std::string fallback = {});
bool json_bool(const nlohmann::json& object, std::string_view key, bool fallback);
// An empty object or array when the member is not one; the reference lives as long as `object`.
const nlohmann::json& json_object(const nlohmann::json& object, std::string_view key);
const nlohmann::json& json_array(const nlohmann::json& object, std::string_view key);

template <class T>
Result<T> json_integer(const nlohmann::json& v, std::string_view what,
                       T min = std::numeric_limits<T>::min(),
                       T max = std::numeric_limits<T>::max()) {
  if constexpr (std::is_signed_v<T>) {
    auto r = json_signed(v, what, min, max);
    if (!r) return r.error();
    return static_cast<T>(*r);
  } else {
    auto r = json_unsigned(v, what, min, max);
    if (!r) return r.error();
    return static_cast<T>(*r);
  }
}

}  // namespace polyaccel
