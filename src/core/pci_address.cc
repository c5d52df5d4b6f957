#include "core/pci_address.h"

#include <charconv>
#include <cstdio>

namespace polyaccel {

namespace {
template <class T>
bool parse_hex(std::string_view s, size_t max_digits, T& out) {
  if (s.empty() || s.size() > max_digits) return false;
  unsigned long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || p != s.data() + s.size()) return false;
  out = static_cast<T>(v);
  return true;
}
}  // namespace

std::optional<PciAddress> PciAddress::parse(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  PciAddress a;
  size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  if (!parse_hex(text.substr(dot + 1), 1, a.function) || a.function > 7) return std::nullopt;
  std::string_view head = text.substr(0, dot);
  size_t c2 = head.rfind(':');
  if (c2 == std::string_view::npos) return std::nullopt;
  if (!parse_hex(head.substr(c2 + 1), 2, a.device) || a.device > 31) return std::nullopt;
  head = head.substr(0, c2);
  size_t c1 = head.rfind(':');
  std::string_view bus = c1 == std::string_view::npos ? head : head.substr(c1 + 1);
  if (!parse_hex(bus, 2, a.bus)) return std::nullopt;
  if (c1 != std::string_view::npos && !parse_hex(head.substr(0, c1), 8, a.domain)) {
    return std::nullopt;
  }
  return a;
}

std::string PciAddress::to_string() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, device, function);
  return buf;
}

}  // namespace polyaccel
