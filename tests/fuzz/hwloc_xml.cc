// discover_host on an hwloc XML export (--topology FILE): our pre-check, then libhwloc's loader,
// then the HostModel built from what it loaded. The vendor libraries are not asked.
#include <stdlib.h>

#include "discover/discover.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // libhwloc's own warnings for a broken file are many lines each; the run's log keeps ours.
  static const bool quiet = ::setenv("HWLOC_HIDE_ERRORS", "2", 0) == 0;
  (void)quiet;
  std::string text = polyaccel::fuzz::as_string(data, size);
  polyaccel::DiscoverOptions options;
  options.topology_xml = polyaccel::fuzz::scratch_file(text, "topology.xml").string();
  options.backends = polyaccel::BackendMode::off;
  options.pci_ids_path = "/nonexistent";  // names from pci.ids are not what is fuzzed
  auto model = polyaccel::discover_host(options);
  if (!model) {
    POLYACCEL_FUZZ_CHECK(model.error().message().find("topology.xml") != std::string::npos);
  }
  return 0;
}
