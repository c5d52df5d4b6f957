// parse_byte_size: sizes as people write them (--memory, flavor memory, hw:mem_page_size parts).
#include "core/byte_size.h"

#include <algorithm>

#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text = polyaccel::fuzz::as_string(data, size);
  if (auto bytes = polyaccel::parse_byte_size(text)) {
    std::string shown = polyaccel::format_byte_size(*bytes);
    // Whole units print exactly, so they read back to the same number.
    if (shown.find('.') == std::string::npos) {
      std::string compact = shown;
      compact.erase(std::remove(compact.begin(), compact.end(), ' '), compact.end());
      auto again = polyaccel::parse_byte_size(compact);
      POLYACCEL_FUZZ_CHECK(again && *again == *bytes);
    }
  }
  return 0;
}
