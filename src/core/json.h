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
