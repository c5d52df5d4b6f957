// Fleet simulation: a stream of mixed requests (GPU guests with Nova's required PCI NUMA policy,
// pinned CPU-only guests, shared guests) on a fleet of real GPU hosts (4 x Dell XE8640, 4 x
// JURECA-DC, 4 x AWS g4dn.metal), each request on the host with the most free RAM where it fits
// (Nova's default weigher). The same stream is placed once with polyaccel's choice and once with
// Nova's own (first fit in Nova's cell order, cores and devices in host order). Counted: requests
// placed before the first refusal, and in all over the stream. Usage: place_fleet [streams]
// [requests per stream]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "place_support.h"

namespace {

using namespace polyaccel;
using namespace polyaccel::place;

HostView load(const std::string& file) {
  auto m = bench::load_fixture(file);
  // The first core of each node is left to the host (cpu_shared_set), as an operator would.
  return *build_host_view(m, bench::first_core_to_host_policy(m, std::uint64_t{4} << 30));
}

struct Shape {
  const char* name;
  double weight;
  Request request;
};

using bench::make_request;

std::vector<Shape> shapes() {
  const std::pair<std::string, std::string> pinned{"hw:cpu_policy", "dedicated"};
  const std::pair<std::string, std::string> required{"hw:pci_numa_affinity_policy", "required"};
  return {
      {"1 GPU, 8 vCPUs", 0.15,
       make_request(8, 32, {pinned, {"pci_passthrough:alias", "gpu:1"}, required})},
      {"2 GPUs, 16 vCPUs, 2 cells", 0.05,
       make_request(
           16, 64, {pinned, {"hw:numa_nodes", "2"}, {"pci_passthrough:alias", "gpu:2"}, required})},
      {"pinned 4 vCPUs", 0.40, make_request(4, 8, {pinned})},
      {"pinned 12 vCPUs", 0.25, make_request(12, 24, {pinned})},
      {"pinned 24 vCPUs", 0.05, make_request(24, 48, {pinned})},
      {"shared 8 vCPUs", 0.10, make_request(8, 16, {})},
  };
}

struct Outcome {
  unsigned before_first_refusal = 0;
  unsigned gpus_at_first_refusal = 0;
  unsigned gpus_at_end = 0;  // placed over the whole stream
  unsigned vcpus_at_end = 0;
};

enum class HostChoice { spread, pack };

Outcome simulate(const std::vector<HostView>& fleet, const std::vector<const Request*>& stream,
                 Strategy strategy, HostChoice host_choice) {
  std::vector<HostUsage> usage;
  for (const auto& h : fleet)
    usage.push_back(*usage_of(h, {}));
  Outcome out;
  bool refused = false;
  unsigned gpus = 0;
  std::vector<std::uint64_t> free_memory;
  for (const auto& host : fleet) {
    std::uint64_t m = 0;
    for (const auto& c : host.cells)
      m += c.memory_bytes;
    free_memory.push_back(m);
  }
  std::vector<size_t> order(fleet.size());
  for (const Request* r : stream) {
    // spread: Nova's default weigher, the host with the most free RAM first; pack: fleet order.
    std::iota(order.begin(), order.end(), 0);
    if (host_choice == HostChoice::spread)
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return free_memory[a] > free_memory[b]; });
    bool placed = false;
    for (size_t h : order) {
      if (placed) break;
      auto f = fit(fleet[h], usage[h], *r, strategy);
      if (!f.fit) continue;
      add_usage(fleet[h], f.placement, usage[h]);
      free_memory[h] -= r->memory_bytes;
      for (const auto& d : f.placement.devices)
        gpus += d.kind == "accelerator" ? 1 : 0;
      placed = true;
    }
    if (placed) {
      out.vcpus_at_end += r->vcpus;
      if (!refused) ++out.before_first_refusal;
    } else if (!refused) {
      refused = true;
      out.gpus_at_first_refusal = gpus;
    }
  }
  if (!refused) out.gpus_at_first_refusal = gpus;
  out.gpus_at_end = gpus;
  return out;
}

struct Scenario {
  const char* name;
  HostChoice host_choice;
  // Requests of the CPU-only shapes that come first, before the mixed stream (0: none).
  unsigned cpu_first;
};

}  // namespace

int main(int argc, char** argv) {
  const unsigned streams = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 20;
  const unsigned length = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 1000;
  std::vector<HostView> fleet;
  for (const char* file : {"2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml",
                           "2socket-nps4-8numa-4xA100-4xmlx5-pcieswitch_jureca-dc-gpu.xml",
                           "2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml"}) {
    HostView v = load(file);
    for (int i = 0; i < 4; ++i)
      fleet.push_back(v);
  }
  unsigned gpus = 0;
  for (const auto& h : fleet) {
    for (const auto& d : h.devices)
      gpus += d.accelerator ? 1 : 0;
  }
  auto mix = shapes();
  std::printf(
      "fleet: %zu hosts (4 x XE8640, 4 x JURECA-DC, 4 x g4dn.metal), %u GPUs; %u streams "
      "of %u requests\nrequest mix:",
      fleet.size(), gpus, streams, length);
  for (const auto& s : mix)
    std::printf(" %s %.0f%%;", s.name, s.weight * 100);
  std::printf("\n\n%-44s | %-29s | %-29s\n%-44s | %7s %6s %6s %6s | %7s %6s %6s %6s\n", "",
              "polyaccel", "Nova first-fit", "scenario (means over the streams)", "first", "GPUs@1",
              "GPUs", "vCPUs", "first", "GPUs@1", "GPUs", "vCPUs");
  const std::vector<Scenario> scenarios = {
      {"mixed stream, hosts by most free RAM", HostChoice::spread, 0},
      {"mixed stream, hosts filled in turn", HostChoice::pack, 0},
      {"200 CPU-only guests first, hosts by free RAM", HostChoice::spread, 200},
      {"200 CPU-only guests first, hosts in turn", HostChoice::pack, 200},
  };
  std::vector<double> cpu_weights;
  for (const auto& s : mix)
    cpu_weights.push_back(s.request.devices.empty() ? s.weight : 0.0);
  std::vector<double> weights;
  for (const auto& s : mix)
    weights.push_back(s.weight);
  for (const auto& sc : scenarios) {
    double first[2] = {0, 0}, used[2] = {0, 0}, gpus_end[2] = {0, 0}, vcpus_end[2] = {0, 0};
    for (unsigned seed = 1; seed <= streams; ++seed) {
      std::mt19937 rng(seed);
      std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
      std::discrete_distribution<size_t> pick_cpu(cpu_weights.begin(), cpu_weights.end());
      std::vector<const Request*> stream;
      for (unsigned i = 0; i < length; ++i)
        stream.push_back(&mix[i < sc.cpu_first ? pick_cpu(rng) : pick(rng)].request);
      int k = 0;
      for (Strategy strategy : {Strategy::polyaccel, Strategy::first_fit}) {
        Outcome o = simulate(fleet, stream, strategy, sc.host_choice);
        first[k] += o.before_first_refusal;
        used[k] += o.gpus_at_first_refusal;
        gpus_end[k] += o.gpus_at_end;
        vcpus_end[k] += o.vcpus_at_end;
        ++k;
      }
    }
    std::printf("%-44s | %7.1f %6.1f %6.1f %6.0f | %7.1f %6.1f %6.1f %6.0f\n", sc.name,
                first[0] / streams, used[0] / streams, gpus_end[0] / streams,
                vcpus_end[0] / streams, first[1] / streams, used[1] / streams,
                gpus_end[1] / streams, vcpus_end[1] / streams);
  }
  std::printf(
      "\nfirst: requests placed before the first refusal; GPUs@1: GPUs in use then; "
      "GPUs, vCPUs: placed over the whole stream\n");
  return 0;
}
