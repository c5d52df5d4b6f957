// parse_state: the allocation state file (--state, /var/lib/polyaccel/allocations.json). What we
// accept we write back, and what we write we read again unchanged.
#include "fuzz_support.h"
#include "place/allocation_store.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto state = polyaccel::place::parse_state("state.json", polyaccel::fuzz::as_string(data, size));
  if (!state) {
    POLYACCEL_FUZZ_CHECK(state.error().message().find("state.json") != std::string::npos);
    return 0;
  }
  std::string written = polyaccel::place::serialize_state(*state);
  auto again = polyaccel::place::parse_state("state.json", written);
  POLYACCEL_FUZZ_CHECK(again.ok());
  POLYACCEL_FUZZ_CHECK(polyaccel::place::serialize_state(*again) == written);
  return 0;
}
