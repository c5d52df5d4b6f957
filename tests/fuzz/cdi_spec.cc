// parse_cdi_spec: one CDI spec (JSON or YAML) of /etc/cdi or /var/run/cdi, as the audit's runtime
// family reads it. Reading never fails: a spec is either read (version, kind and at least one
// device) or carries a problem; nothing is thrown.
#include "discover/container_runtime.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto spec =
      polyaccel::parse_cdi_spec("/etc/cdi/fuzz.yaml", polyaccel::fuzz::as_string(data, size));
  POLYACCEL_FUZZ_CHECK(spec.path == "/etc/cdi/fuzz.yaml");
  if (spec.problem.empty()) {
    POLYACCEL_FUZZ_CHECK(!spec.cdi_version.empty() && !spec.kind.empty());
    POLYACCEL_FUZZ_CHECK(!spec.device_names.empty());
  }
  return 0;
}
