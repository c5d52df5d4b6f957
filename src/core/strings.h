// Small string helpers shared by every module.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace polyaccel {

// Bytes we did not choose, made safe to print on one line: valid UTF-8 stays, control characters
// become \n, \t, \r or \xNN, and a byte that is not part of valid UTF-8 becomes \xNN. Error
// messages and human output go through it; JSON output goes through json_text (host_model_json.h).
std::string printable(std::string_view text);
// printable() of each line, the newlines kept: human output of several lines.
std::string printable_lines(std::string_view text);
// printable(text) in single quotes, cut to its first 120 bytes: an input quoted in an error.
std::string quote_input(std::string_view text);
// Whether `text` is valid UTF-8 (what JSON strings must be).
bool valid_utf8(std::string_view text);
// The longest start of `text` of at most `max_bytes` that does not end inside a UTF-8 character:
// a message cut to an API field's limit stays valid UTF-8 when it was.
std::string_view utf8_prefix(std::string_view text, size_t max_bytes);

inline std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += separator;
    out += p;
  }
  return out;
}

// Text for an XML attribute or element (libvirt domains, NCCL topology files).
// The parts of `text` between each `separator` ("a,,b": "a", "", "b"); none for an empty text.
inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  if (text.empty()) return parts;
  size_t from = 0;
  while (true) {
    size_t at = text.find(separator, from);
    parts.emplace_back(text.substr(from, at == std::string_view::npos ? text.npos : at - from));
    if (at == std::string_view::npos) return parts;
    from = at + 1;
  }
}

inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A small non-negative decimal count as people type it ("8"); nullopt for anything else (signs,
// blanks, hex, more than six digits).
inline std::optional<unsigned> parse_count(std::string_view text) {
  if (text.empty() || text.size() > 6) return std::nullopt;
  unsigned n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  return n;
}

}  // namespace polyaccel
