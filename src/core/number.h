// Numbers from hostile text (command lines, flavor specs, config and state files): one parser
// for every integer, decimal and duration we read. A value that does not fit its range is refused
// by name, never wrapped or clamped; the error quotes the text escaped (core/strings.h printable).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/error.h"

namespace polyaccel {

// A decimal whole number in [min, max]: digits only (no sign, blanks, exponent or hex), as
// people and config files write counts. `what` names the input ("hw:numa_nodes", "--vcpus").
Result<std::uint64_t> parse_unsigned(std::string_view text, std::string_view what,
                                     std::uint64_t min = 0,
                                     std::uint64_t max = std::numeric_limits<std::uint64_t>::max());
// The same with an optional leading '-'.
Result<std::int64_t> parse_signed(std::string_view text, std::string_view what, std::int64_t min,
                                  std::int64_t max);
// Hex digits with an optional 0x ("10de", "0x10de"), at most `max`.
Result<std::uint64_t> parse_hex(std::string_view text, std::string_view what, std::uint64_t max);

// parse_unsigned into a narrower type: the range defaults to the type's.
template <class T>
Result<T> parse_integer(std::string_view text, std::string_view what,
                        T min = std::numeric_limits<T>::min(),
                        T max = std::numeric_limits<T>::max()) {
  static_assert(std::is_integral_v<T>);
  if constexpr (std::is_signed_v<T>) {
    auto v = parse_signed(text, what, min, max);
    if (!v) return v.error();
    return static_cast<T>(*v);
  } else {
    auto v = parse_unsigned(text, what, min, max);
    if (!v) return v.error();
    return static_cast<T>(*v);
  }
}

// A finite decimal number in [min, max] ("1.5", "16", "2e3"); nan, inf and overflow refused.
Result<double> parse_finite(std::string_view text, std::string_view what, double min, double max);

// A duration: a number with a unit ms, s, m, h or d; a bare number is seconds ("10", "2.5s",
// "500ms", "1m"). Refused outside [min, max] and when not finite.
Result<std::chrono::milliseconds> parse_duration(std::string_view text, std::string_view what,
                                                 std::chrono::milliseconds min,
                                                 std::chrono::milliseconds max);

}  // namespace polyaccel
