// accepts_utf8_names: the agent's reading of a scraper's Accept header (src/exporter/
// accept_header.h). Only the first 8 KiB count; a yes needs "allow-utf-8" and a text/plain or
// openmetrics-text range in the input; another well-formed range before or after changes
// nothing but can only add a yes.
#include <algorithm>
#include <cctype>

#include "exporter/accept_header.h"
#include "fuzz_support.h"

using polyaccel::exporter::accepts_utf8_names;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string input = polyaccel::fuzz::as_string(data, size);
  bool yes = accepts_utf8_names(input);
  POLYACCEL_FUZZ_CHECK(yes == accepts_utf8_names(std::string_view(input).substr(0, 8192)));
  if (yes) {
    std::string lower = input;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    POLYACCEL_FUZZ_CHECK(input.find("allow-utf-8") != std::string::npos);
    POLYACCEL_FUZZ_CHECK(lower.find("text/plain") != std::string::npos ||
                         lower.find("application/openmetrics-text") != std::string::npos);
  }
  if (input.size() < 8000) {
    POLYACCEL_FUZZ_CHECK(accepts_utf8_names("application/json," + input) == yes);
    POLYACCEL_FUZZ_CHECK(
        accepts_utf8_names(input + ",text/plain;version=1.0.0;escaping=allow-utf-8"));
    if (!yes) POLYACCEL_FUZZ_CHECK(!accepts_utf8_names(input + ",text/plain;version=0.0.4"));
  }
  return 0;
}
