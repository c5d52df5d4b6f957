// parse_claim and parse_checkpoint: a ResourceClaim as the API server answers it (allocation
// results with shareIDs) and the DRA plugin's checkpoint file. Neither throws; every shareID they
// take is a UID's characters only, since it goes into CDI device names. merge_device_statuses
// (claim_status.h) on the same text as a claim's status.devices: never throws, keeps every
// entry that is not ours and adds ours.
#include "dra/claim_status.h"
#include "dra/plugin.h"
#include "fuzz_support.h"

namespace {

bool uid_characters(const std::string& s) {
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return s.size() <= 64;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = polyaccel::fuzz::as_string(data, size);
  auto claim = polyaccel::dra::parse_claim(nlohmann::json::parse(text, nullptr, false));
  if (claim) {
    for (const auto& d : claim->devices)
      POLYACCEL_FUZZ_CHECK(uid_characters(d.share_id));
  }
  const nlohmann::json devices = nlohmann::json::parse(text, nullptr, false);
  const nlohmann::json ours = {{"driver", "polyaccel.io"}, {"pool", "node-1"}, {"device", "nic-0"}};
  auto merged = polyaccel::dra::merge_device_statuses(devices, "polyaccel.io", {ours});
  POLYACCEL_FUZZ_CHECK(merged.is_array() && !merged.empty() && merged.back() == ours);
  if (devices.is_array()) POLYACCEL_FUZZ_CHECK(merged.size() <= devices.size() + 1);
  auto checkpoint = polyaccel::dra::parse_checkpoint(text, "checkpoint.json");
  if (checkpoint) {
    for (const auto& [uid, c] : *checkpoint)
      for (const auto& d : c.devices)
        POLYACCEL_FUZZ_CHECK(uid_characters(d.share_id));
  } else {
    POLYACCEL_FUZZ_CHECK(checkpoint.error().message().find("checkpoint.json") != std::string::npos);
  }
  return 0;
}
