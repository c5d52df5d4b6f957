// read_rdma_ports: the state, phys_state, rate, counters/ and hw_counters/ files of every port of
// each device under sys/class/infiniband of a tree built from the input (FuzzTree format); and
// the state, rate and counter parsers on the whole input.
#include <cmath>

#include "core/file_io.h"
#include "discover/rdma_ports.h"
#include "fuzz_support.h"

namespace {

void check(const polyaccel::RdmaPortReading& r) {
  POLYACCEL_FUZZ_CHECK(r.port >= 1 && r.port <= 255);
  POLYACCEL_FUZZ_CHECK(!r.state || *r.state <= 5);
  POLYACCEL_FUZZ_CHECK(!r.phys_state || *r.phys_state <= 7);
  // Finite, never negative, at most 100 Tb/s: "nan Gb/sec" or "1e308 Gb/sec" is no rate.
  POLYACCEL_FUZZ_CHECK(!r.rate_bytes_per_second ||
                       (std::isfinite(*r.rate_bytes_per_second) && *r.rate_bytes_per_second >= 0 &&
                        *r.rate_bytes_per_second <= 100e12 / 8));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = polyaccel::fuzz::as_string(data, size);
  auto state = polyaccel::parse_rdma_port_state(text, 5);
  POLYACCEL_FUZZ_CHECK(!state || *state <= 5);
  auto rate = polyaccel::parse_rdma_port_rate(text);
  POLYACCEL_FUZZ_CHECK(!rate || (std::isfinite(*rate) && *rate >= 0));
  polyaccel::parse_rdma_counter(text);
  polyaccel::fuzz::FuzzTree tree(text);
  const auto root = tree.root();
  for (const auto& device : polyaccel::sorted_entry_names(root / "sys/class/infiniband")) {
    unsigned last = 0;
    for (const auto& r : polyaccel::read_rdma_ports(root.string(), device)) {
      check(r);
      POLYACCEL_FUZZ_CHECK(r.port > last);  // in port order, each once
      last = r.port;
    }
  }
  return 0;
}
