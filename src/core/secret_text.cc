#include "core/secret_text.h"

#include <algorithm>
#include <cctype>

namespace polyaccel {
namespace {

bool base64_char(unsigned char c) {
  return std::isalnum(c) || c == '+' || c == '/' || c == '=' || c == '-' || c == '_';
}

// header.payload.signature of base64url, the header a JSON object ("eyJ").
bool jwt(std::string_view v) {
  if (!v.starts_with("eyJ") || std::count(v.begin(), v.end(), '.') != 2) return false;
  return std::all_of(v.begin(), v.end(),
                     [](unsigned char c) { return base64_char(c) || c == '.'; });
}

// Kubernetes' bootstrap tokens: [a-z0-9]{6}.[a-z0-9]{16}.
bool bootstrap_token(std::string_view v) {
  if (v.size() != 23 || v[6] != '.') return false;
  for (size_t i = 0; i < v.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(v[i]);
    if (i != 6 && !(std::islower(c) || std::isdigit(c))) return false;
  }
  return true;
}

}  // namespace

bool looks_like_secret(std::string_view v) {
  if (v.find("-----BEGIN") != std::string_view::npos ||
      v.find("PRIVATE KEY") != std::string_view::npos)
    return true;
  // A path has '/', '.', '-' or '_' between short words; 40 or more letters and digits in a run,
  // upper and lower case and digits all in it, is key material or a token (a UUID or a hex
  // digest, lower case only, is not taken for one).
  size_t run = 0, longest = 0;
  bool upper = false, lower = false, digit = false;
  for (unsigned char c : v) {
    if (std::isalnum(c) || c == '+' || c == '=') {
      ++run;
      upper = upper || std::isupper(c);
      lower = lower || std::islower(c);
      digit = digit || std::isdigit(c);
    } else {
      run = 0;
    }
    longest = std::max(longest, run);
  }
  return jwt(v) || bootstrap_token(v) || (longest >= 40 && upper && lower && digit);
}

std::string shown_or_withheld(std::string_view value) {
  if (!looks_like_secret(value)) return std::string(value);
  return "(a value that looks like a key or a token, " + std::to_string(value.size()) +
         " bytes: not shown)";
}

}  // namespace polyaccel
