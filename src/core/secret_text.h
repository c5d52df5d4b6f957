// Values that look like a key or a token (issue 40, 4): a PEM block, a JWT, a bootstrap token, a
// long base64 run. Pasted into a field that takes a path or a name, they are still secrets: an
// error names the field and says what the value looks like, never the value.
#pragma once

#include <string>
#include <string_view>

namespace polyaccel {

bool looks_like_secret(std::string_view value);
// `value` for an error message: "(a value that looks like a key or a token, N bytes: not
// shown)" when it looks like one, else the value itself (printable() it before printing).
std::string shown_or_withheld(std::string_view value);

}  // namespace polyaccel
