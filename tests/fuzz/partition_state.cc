// parse_partition_apply_record: the partition manager's state file (--mig-manager-state), read
// when the agent starts; what parses is written and read back unchanged.
#include "fuzz_support.h"
#include "partition_manager/state_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto record =
      polyaccel::parse_partition_apply_record(polyaccel::fuzz::as_string(data, size), "state.json");
  if (!record) {
    POLYACCEL_FUZZ_CHECK(!record.error().message().empty());
    return 0;
  }
  POLYACCEL_FUZZ_CHECK(record->config.size() <= 4096 && record->gpus.size() <= 64);
  return 0;
}
