#include "core/byte_size.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>

namespace polyaccel {

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  std::uint64_t value = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || p == text.data()) return std::nullopt;
  std::string unit(p, text.data() + text.size());
  while (!unit.empty() && unit.front() == ' ')
    unit.erase(0, 1);
  for (auto& c : unit)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  unsigned shift = 0;
  if (unit.empty() || unit == "b") {
    shift = 0;
  } else if (unit == "k" || unit == "kb" || unit == "kib") {
    shift = 10;
  } else if (unit == "m" || unit == "mb" || unit == "mib") {
    shift = 20;
  } else if (unit == "g" || unit == "gb" || unit == "gib") {
    shift = 30;
  } else if (unit == "t" || unit == "tb" || unit == "tib") {
    shift = 40;
  } else {
    return std::nullopt;
  }
  if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

std::string format_byte_size(std::uint64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  double v = static_cast<double>(bytes);
  while (u + 1 < kUnits.size() && v >= 1024.0) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0 || (bytes % (std::uint64_t{1} << (10 * u))) == 0) {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, kUnits[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  }
  return buf;
}

}  // namespace polyaccel
