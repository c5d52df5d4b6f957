#include "core/number.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/strings.h"

namespace polyaccel {
namespace {

Error not_a(std::string_view text, std::string_view what, const std::string& kind) {
  return bad_input(std::string(what), quote_input(text) + " is not " + kind);
}

Error out_of_range(std::string_view text, std::string_view what, const std::string& range) {
  return bad_input(std::string(what), quote_input(text) + " is out of range (" + range + ")");
}

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

std::string range_text(std::uint64_t min, std::uint64_t max) {
  return min == max ? std::to_string(min) : std::to_string(min) + ".." + std::to_string(max);
}

}  // namespace

Result<std::uint64_t> parse_unsigned(std::string_view text, std::string_view what,
                                     std::uint64_t min, std::uint64_t max) {
  if (!all_digits(text)) return not_a(text, what, "a whole number");
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && (v < min || v > max)))
    return out_of_range(text, what, range_text(min, max));
  if (ec != std::errc() || p != text.data() + text.size())
    return not_a(text, what, "a whole number");
  return v;
}

Result<std::int64_t> parse_signed(std::string_view text, std::string_view what, std::int64_t min,
                                  std::int64_t max) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '-') digits.remove_prefix(1);
  if (!all_digits(digits)) return not_a(text, what, "a whole number");
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  std::string range = std::to_string(min) + ".." + std::to_string(max);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && (v < min || v > max)))
    return out_of_range(text, what, range);
  if (ec != std::errc() || p != text.data() + text.size())
    return not_a(text, what, "a whole number");
  return v;
}

Result<std::uint64_t> parse_hex(std::string_view text, std::string_view what, std::uint64_t max) {
  std::string_view digits = text;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
    digits.remove_prefix(2);
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
  if (digits.empty() || (ec != std::errc() && ec != std::errc::result_out_of_range) ||
      p != digits.data() + digits.size())
    return not_a(text, what, "a hexadecimal number");
  if (ec == std::errc::result_out_of_range || v > max)
    return out_of_range(
        text, what, "at most 0x" + [&] {
          char buf[24];
          auto r = std::to_chars(buf, buf + sizeof buf, max, 16);
          return std::string(buf, r.ptr);
        }());
  return v;
}

Result<double> parse_finite(std::string_view text, std::string_view what, double min, double max) {
  // strtod wants a terminated string and accepts "nan", "inf", hex floats and leading blanks:
  // only a plain decimal (with an optional exponent) gets that far.
  std::string s(text);
  bool plain = !s.empty() && s.size() < 64;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'))
      plain = false;
  if (!plain) return not_a(text, what, "a number");
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return not_a(text, what, "a number");
  if (!std::isfinite(v) || v < min || v > max) {
    char range[64];
    std::snprintf(range, sizeof range, "%g..%g", min, max);
    return out_of_range(text, what, range);
  }
  return v;
}

Result<std::chrono::milliseconds> parse_duration(std::string_view text, std::string_view what,
                                                 std::chrono::milliseconds min,
                                                 std::chrono::milliseconds max) {
  size_t unit_at = text.size();
  while (unit_at > 0 && std::isalpha(static_cast<unsigned char>(text[unit_at - 1])))
    --unit_at;
  std::string_view number = text.substr(0, unit_at);
  std::string_view unit = text.substr(unit_at);
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60e3;
  } else if (unit == "h") {
    scale = 3600e3;
  } else if (unit == "d") {
    scale = 86400e3;
  } else {
    return bad_input(std::string(what), quote_input(text) + " is not a duration",
                     "write seconds (10, 2.5s), milliseconds (500ms), minutes (1m) or hours (1h)");
  }
  // The bounds in the unit written, so that the error shows what the user can type.
  auto v = parse_finite(number, what, 0, 1e15);
  if (!v)
    return bad_input(std::string(what), quote_input(text) + " is not a duration",
                     "write seconds (10, 2.5s), milliseconds (500ms), minutes (1m) or hours (1h)");
  double ms = *v * scale;
  if (ms < static_cast<double>(min.count()) || ms > static_cast<double>(max.count())) {
    return bad_input(std::string(what), quote_input(text) + " is out of range (" +
                                            std::to_string(min.count()) + " ms.." +
                                            std::to_string(max.count() / 1000) + " s)");
  }
  return std::chrono::milliseconds(static_cast<long long>(std::llround(ms)));
}

}  // namespace polyaccel
