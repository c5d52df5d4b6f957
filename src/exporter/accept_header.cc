#include "exporter/accept_header.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace polyaccel::exporter {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// A q value of RFC 9110: "0", "0.", "0.000" are zero; anything else that parses is not; a
// malformed one makes the range malformed (nullopt → not asking).
int q_is_positive(std::string_view q) {
  q = trim(q);
  if (q.empty() || q.size() > 5) return -1;
  if (q[0] == '1') {
    for (std::size_t i = 1; i < q.size(); ++i)
      if (!(i == 1 ? q[i] == '.' : q[i] == '0')) return -1;
    return 1;
  }
  if (q[0] != '0') return -1;
  bool positive = false;
  for (std::size_t i = 1; i < q.size(); ++i) {
    if (i == 1) {
      if (q[i] != '.') return -1;
      continue;
    }
    if (q[i] < '0' || q[i] > '9') return -1;
    positive = positive || q[i] != '0';
  }
  return positive ? 1 : 0;
}

// One media range: "type/subtype *( ; name=value )".
bool range_asks_utf8(std::string_view range) {
  std::size_t semi = range.find(';');
  std::string_view type = trim(range.substr(0, semi));
  if (!iequals(type, "text/plain") && !iequals(type, "application/openmetrics-text")) return false;
  bool utf8 = false;
  while (semi != std::string_view::npos) {
    range.remove_prefix(semi + 1);
    semi = range.find(';');
    std::string_view param = range.substr(0, semi);
    std::size_t eq = param.find('=');
    if (eq == std::string_view::npos) return false;
    std::string_view name = trim(param.substr(0, eq));
    std::string_view value = trim(param.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    if (iequals(name, "escaping")) {
      utf8 = value == "allow-utf-8";
    } else if (iequals(name, "q")) {
      int q = q_is_positive(value);
      if (q <= 0) return false;
    }
  }
  return utf8;
}

}  // namespace

bool accepts_utf8_names(std::string_view accept) {
  accept = accept.substr(0, 8192);
  while (!accept.empty()) {
    std::size_t comma = accept.find(',');
    if (range_asks_utf8(accept.substr(0, comma))) return true;
    if (comma == std::string_view::npos) break;
    accept.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace polyaccel::exporter
