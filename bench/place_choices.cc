// Every choice the fit makes on streams of mixed requests over every fixture topology, printed one
// line per request (the placement as JSON, or the reason for a refusal), for both strategies.
// Not a benchmark: a change to the search that must keep its choices is checked by diffing this
// program's output before and after (bench/README.md). Usage: place_choices [requests per host]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "place_support.h"

namespace {

using namespace polyaccel;
using namespace polyaccel::place;
using Specs = std::vector<std::pair<std::string, std::string>>;

// The host as given, and with the first core of each node left to the host (cpu_shared_set) and
// 1 GiB of each node reserved (place_fleet reserves 4 GiB).
std::vector<std::pair<std::string, HostView>> views_of(const std::string& file) {
  auto m = bench::load_fixture(file);
  std::vector<std::pair<std::string, HostView>> out;
  out.emplace_back(file + " legacy", *build_host_view(m, {}));
  auto v = build_host_view(m, bench::first_core_to_host_policy(m, std::uint64_t{1} << 30));
  if (v) out.emplace_back(file + " dedicated", std::move(*v));
  return out;
}

std::vector<Specs> shapes(size_t cells) {
  const std::pair<std::string, std::string> pinned{"hw:cpu_policy", "dedicated"};
  std::vector<Specs> s = {
      {pinned},
      {},
      {{"hw:numa_nodes", "1"}},
      {pinned, {"hw:cpu_thread_policy", "require"}},
      {pinned, {"hw:cpu_thread_policy", "isolate"}},
      {pinned, {"hw:emulator_threads_policy", "isolate"}},
      {pinned, {"hw:mem_page_size", "large"}},
      {pinned, {"pci_passthrough:alias", "gpu:1"}, {"hw:pci_numa_affinity_policy", "required"}},
      {pinned, {"pci_passthrough:alias", "gpu:1"}, {"hw:pci_numa_affinity_policy", "socket"}},
      {pinned, {"pci_passthrough:alias", "gpu:2"}, {"hw:pci_numa_affinity_policy", "preferred"}},
      {pinned,
       {"pci_passthrough:alias", "gpu:1"},
       {"polyaccel:rdma_nics", "1"},
       {"polyaccel:nic_affinity", "node"}},
      {pinned, {"polyaccel:rdma_nics", "1"}},
  };
  for (size_t n = 2; n <= std::min<size_t>(cells, 4); n *= 2) {
    const std::string k = std::to_string(n);
    s.push_back({pinned, {"hw:numa_nodes", k}});
    s.push_back({{"hw:numa_nodes", k}});
    s.push_back({pinned, {"hw:numa_nodes", k}, {"hw:emulator_threads_policy", "isolate"}});
    s.push_back({pinned,
                 {"hw:numa_nodes", k},
                 {"pci_passthrough:alias", "gpu:2"},
                 {"hw:pci_numa_affinity_policy", "required"}});
    s.push_back({pinned,
                 {"hw:numa_nodes", k},
                 {"pci_passthrough:alias", "gpu:1"},
                 {"polyaccel:rdma_nics", "1"},
                 {"polyaccel:nic_affinity", "pix"}});
  }
  if (cells >= 3) s.push_back({pinned, {"hw:numa_nodes", "3"}});
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned length = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 150;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(
           std::filesystem::path(POLYACCEL_SHARED_DIR) / "fixtures/topologies")) {
    if (e.path().extension() == ".xml") files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    for (const auto& [name, view] : views_of(file)) {
      const auto mix = shapes(view.cells.size());
      for (Strategy strategy : {Strategy::polyaccel, Strategy::first_fit}) {
        std::mt19937 rng(11);
        std::vector<Placement> placed;
        HostUsage usage = *usage_of(view, {});
        for (unsigned i = 0; i < length; ++i) {
          // Now and then a guest leaves, so that the hosts are used in patterns a fill alone
          // does not make.
          if (!placed.empty() && rng() % 4 == 0) {
            placed.erase(placed.begin() + static_cast<long>(rng() % placed.size()));
            usage = *usage_of(view, placed);
          }
          const Specs& specs = mix[rng() % mix.size()];
          const unsigned vcpus = 4u * (1u + rng() % 4u);
          const unsigned gib = 2u * (1u + rng() % 8u);
          Request r;
          try {
            r = bench::make_request(vcpus, gib, specs);
          } catch (const std::exception& e) {
            std::printf("%s %d %u: bad request: %s\n", name.c_str(), static_cast<int>(strategy), i,
                        e.what());
            continue;
          }
          auto f = fit(view, usage, r, strategy);
          if (!f.fit) {
            std::printf("%s %d %u: no fit: %s\n", name.c_str(), static_cast<int>(strategy), i,
                        f.reason.c_str());
            continue;
          }
          std::printf("%s %d %u: %s\n", name.c_str(), static_cast<int>(strategy), i,
                      to_json(f.placement).dump().c_str());
          f.placement.name = "g" + std::to_string(i);
          add_usage(view, f.placement, usage);
          placed.push_back(std::move(f.placement));
        }
      }
    }
  }
  return 0;
}
