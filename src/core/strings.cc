#include "core/strings.h"

#include "core/format_control.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace polyaccel {
namespace {

// The length of the valid UTF-8 sequence at text[i], or 0 when there is none (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  std::uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr std::uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// The code point of the valid n-byte UTF-8 sequence at text[i].
std::uint32_t code_point(std::string_view text, size_t i, size_t n) {
  static constexpr unsigned char kLead[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  std::uint32_t cp = static_cast<unsigned char>(text[i]) & kLead[n];
  for (size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  return cp;
}

}  // namespace

bool is_format_control(std::uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) ||      // C1 controls: U+009B is a CSI on many terminals
         cp == 0x061C ||                    // Arabic letter mark
         cp == 0x200E || cp == 0x200F ||    // left-to-right and right-to-left marks
         cp == 0x2028 || cp == 0x2029 ||    // line and paragraph separators
         (cp >= 0x202A && cp <= 0x202E) ||  // bidi embeddings and overrides
         (cp >= 0x2066 && cp <= 0x2069);    // bidi isolates
}

std::optional<std::uint32_t> format_control_in(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8_sequence(text, i);
    if (n > 1 && is_format_control(code_point(text, i, n))) return code_point(text, i, n);
    i += n == 0 ? 1 : n;
  }
  return std::nullopt;
}

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = utf8_sequence(text, i);
    if (n == 1 && c >= 0x20 && c != 0x7F) {
      out += static_cast<char>(c);
    } else if (n > 1 && is_format_control(code_point(text, i, n))) {
      // A C1 control or a bidi override reorders or rewrites what the terminal shows: \u{XXXX}.
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\u{%04X}", static_cast<unsigned>(code_point(text, i, n)));
      out += buf;
    } else if (n > 1) {
      out.append(text.substr(i, n));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
    i += n == 0 ? 1 : n;
  }
  return out;
}

std::string printable_lines(std::string_view text) {
  std::string out;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    out += printable(text.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (end == std::string_view::npos) break;
    out += '\n';
    begin = end + 1;
  }
  return out;
}

std::string quote_input(std::string_view text) {
  constexpr size_t kMaxQuoted = 120;
  if (text.size() <= kMaxQuoted) return "'" + printable(text) + "'";
  return "'" + printable(text.substr(0, kMaxQuoted)) + "...' (" + std::to_string(text.size()) +
         " bytes)";
}

std::string_view utf8_prefix(std::string_view text, size_t max_bytes) {
  size_t i = 0;
  while (i < text.size()) {
    size_t n = std::max<size_t>(utf8_sequence(text, i), 1);  // an invalid byte stands alone
    if (n > max_bytes - i) break;
    i += n;
  }
  return text.substr(0, i);
}

bool valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8_sequence(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace polyaccel
