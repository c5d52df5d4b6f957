// What reaches the DRA driver's CPU devices from outside: --reserved-cpus (first line), the
// device names of a claim's allocation as the API server gives them (the other lines), and the
// checkpoint with its claims' CPU and memory records (the whole input). On a 2-node, 16-core,
// SMT-2 model built here.
#include <sstream>

#include "dra/cpu_devices.h"
#include "dra/plugin.h"
#include "fuzz_support.h"

namespace {

polyaccel::HostModel two_nodes() {
  polyaccel::HostModel m;
  for (unsigned n = 0; n < 2; ++n) {
    polyaccel::NumaNode node;
    node.os_index = n;
    node.memory_bytes = 64ull << 30;
    node.hugepages.push_back({2u << 20, 512, 512});
    polyaccel::Package p;
    p.os_index = n;
    p.numa_nodes = {n};
    for (unsigned c = 0; c < 8; ++c) {
      polyaccel::Core core;
      core.os_index = c;
      core.package = n;
      core.pus = {n * 8 + c, 16 + n * 8 + c};
      node.cpus |= core.pus;
      m.cores.push_back(core);
    }
    p.cpus = node.cpus;
    node.local_cpus = node.cpus;
    m.pus |= node.cpus;
    m.numa_nodes.push_back(node);
    m.packages.push_back(p);
  }
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace polyaccel;
  static const HostModel model = two_nodes();
  const std::string text = fuzz::as_string(data, size);
  std::istringstream in(text);
  std::string reserved_text;
  std::getline(in, reserved_text);
  dra::CpuDeviceOptions o;
  o.grain = reserved_text.size() % 2 ? dra::CpuGrain::numa : dra::CpuGrain::core;
  o.memory = true;
  if (auto reserved = dra::parse_reserved_cpus(model, reserved_text)) {
    POLYACCEL_FUZZ_CHECK(model.pus.contains(*reserved));
    o.reserved = *reserved;
  }
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line) && names.size() < 64;)
    names.push_back(line);
  if (auto grant = dra::claim_grant(model, o, names)) {
    // Only offered CPUs, only nodes with memory.
    POLYACCEL_FUZZ_CHECK(model.pus.contains(grant->cpus));
    POLYACCEL_FUZZ_CHECK(!grant->cpus.intersects(o.reserved));
    POLYACCEL_FUZZ_CHECK(CpuSet({0, 1}).contains(grant->mems));
  }
  if (auto claims = dra::parse_checkpoint(text, "checkpoint")) {
    // What is written back reads back the same.
    auto again = dra::parse_checkpoint(dra::checkpoint_json(*claims), "again");
    POLYACCEL_FUZZ_CHECK(again && again->size() == claims->size());
    for (const auto& [uid, c] : *claims) {
      POLYACCEL_FUZZ_CHECK(again->at(uid).cpus == c.cpus && again->at(uid).mems == c.mems);
      POLYACCEL_FUZZ_CHECK(again->at(uid).hugepage_bytes == c.hugepage_bytes);
    }
  }
  return 0;
}
