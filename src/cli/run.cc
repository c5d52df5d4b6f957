// `polyaccel run [...] -- CMD ARGS...`: a bound launch (CPU affinity, memory binding, visibility
// and NCCL variables), or with --dry-run what it would do.
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/byte_size.h"
#include "core/json.h"
#include "core/strings.h"
#include "launch/exec.h"
#include "launch/local_rank.h"
#include "launch/plan.h"
#include "launch/reservation.h"
#include "launch/supervise.h"
#include "place/allocation_store.h"

namespace polyaccel::cli {

namespace {

// --local-rank, else the launcher's (launch/local_rank.h: torchrun, Open MPI, MPICH, Slurm).
// --gpus N asks for N GPUs whatever rank this is.
Status rank_from_environment(LaunchRequest& request, const RunCliOptions& cli) {
  if (cli.local_rank) {
    request.local_rank = cli.local_rank;
    request.local_rank_source = "--local-rank";
    return Ok{};
  }
  if (cli.gpu_count) return Ok{};
  auto found = local_rank_from_environment([](const std::string& name) {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  });
  if (!found) return found.error();
  if (*found) {
    request.local_rank = (*found)->rank;
    request.local_world_size = (*found)->world;
    request.local_rank_source = (*found)->source;
  }
  return Ok{};
}

// The GPUs this process was given, as the variables it inherited say (LaunchRequest).
void inherited_visibility(LaunchRequest& request) {
  for (const char* v : {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                        "HIP_VISIBLE_DEVICES", "HABANA_VISIBLE_MODULES"}) {
    if (const char* value = std::getenv(v)) request.inherited_visibility.emplace_back(v, value);
  }
}

Status hugepages_option(LaunchRequest& request, const std::string& text) {
  if (text.empty()) return Ok{};
  if (text == "thp") {
    request.transparent_hugepages = true;
    return Ok{};
  }
  auto size = parse_byte_size(text);
  if (!size || *size < (1u << 20) || (*size & (*size - 1)) != 0) {
    return bad_input("--hugepages " + text, "give a hugepage size (2MiB, 1GiB) or thp");
  }
  request.hugepage_bytes = size;
  return Ok{};
}

void print_plan(const LaunchPlan& plan, bool json, std::ostream& out) {
  if (json) {
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [k, v] : plan.env)
      env[k] = v;
    std::vector<std::string> gpus;
    for (const auto& g : plan.gpus)
      gpus.push_back(g.to_string());
    nlohmann::json doc{{"schema_version", 1},     {"gpus", gpus},
                       {"gpu_ids", plan.gpu_ids}, {"cpus", plan.cpus.to_vector()},
                       {"mems", plan.mems},       {"env", env},
                       {"argv", plan.argv},       {"warnings", plan.warnings}};
    if (plan.local_rank) {
      doc["local_rank"] = {{"rank", *plan.local_rank},
                           {"world", plan.local_world_size ? nlohmann::json(*plan.local_world_size)
                                                           : nlohmann::json()},
                           {"from", plan.local_rank_source}};
    }
    if (plan.device_index) doc["device_index"] = *plan.device_index;
    out << json_text(doc) << "\n";
    return;
  }
  std::vector<std::string> gpus;
  for (size_t i = 0; i < plan.gpus.size(); ++i)
    gpus.push_back(plan.gpu_ids[i] + " (" + plan.gpus[i].to_string() + ")");
  std::vector<std::string> mems;
  for (unsigned m : plan.mems)
    mems.push_back(std::to_string(m));
  if (plan.local_rank) {
    out << "rank  " << *plan.local_rank << " of "
        << (plan.local_world_size ? std::to_string(*plan.local_world_size) : "?") << " ("
        << plan.local_rank_source << ")";
    if (plan.device_index) out << ", device index " << *plan.device_index;
    out << "\n";
  }
  out << "gpus  " << (gpus.empty() ? "-" : join(gpus, ", ")) << "\n";
  out << "cpus  " << plan.cpus.to_list() << "\n";
  out << "mems  " << (mems.empty() ? "-" : join(mems, ",")) << "\n";
  for (const auto& [k, v] : plan.env)
    out << "env   " << k << "=" << v << "\n";
  out << "argv  " << join(plan.argv, " ") << "\n";
}

// --reserve: the placement engine chooses, the store records, a supervisor waits for CMD and
// releases. Returns the exit code.
int run_reserved(const HostModel& model, const RunCliOptions& cli,
                 const std::string& libvirt_domains_dir, LaunchRequest request,
                 const LaunchPlan& preliminary, std::ostream& out) {
  if (!request.gpu_ids.empty()) {
    return fail(bad_input("--gpu/--reserve", "a reservation lets the placement engine choose",
                          "use --gpus N or --local-rank"));
  }
  RunReservationRequest r;
  r.name = cli.reserve;
  r.libvirt_status_dir = libvirt_domains_dir;
  if (request.local_rank) {
    // Every local rank runs the same command line: each reserves under its own name.
    r.name += ".rank" + std::to_string(*request.local_rank);
    const unsigned world = request.local_world_size.value_or(
        std::max<unsigned>(1, static_cast<unsigned>(model.accelerators.size())));
    if (!model.accelerators.empty() && world > model.accelerators.size()) {
      return fail(bad_input("--reserve with " + std::to_string(world) + " local ranks (" +
                                request.local_rank_source + ")",
                            "more ranks than GPUs: ranks sharing a GPU cannot each reserve it"));
    }
  }
  if (!model.accelerators.empty()) {
    r.gpus = request.local_rank ? 1u : static_cast<unsigned>(preliminary.gpus.size());
    r.pus_per_gpu =
        pus_per_gpu(model, request.allowed_cpus.empty() ? model.pus : request.allowed_cpus);
    r.gpu_vendor_id = model.accelerators.front().pci.vendor_id;
    if (r.gpus == 0) return fail(bad_input("--reserve", "no GPU to reserve"));
  } else {
    r.pus = preliminary.cpus.count();
  }
  for (const auto& spec : cli.specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail(bad_input("--spec " + spec, "is not KEY=VALUE"));
    r.extra_specs.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
  }
  auto owner = process_identity(::getpid());
  if (!owner) return fail(Error{ErrorCode::internal, "/proc/self/stat", "cannot be read", ""});
  auto reservation = reserve_for_run(model, cli.state, r, *owner);
  if (!reservation) {
    if (reservation.error().code == ErrorCode::unsupported) {
      std::cerr << "polyaccel: " << reservation.error().message() << "\n";
      return kExitFindings;
    }
    return fail(reservation.error());
  }
  for (const auto& name : reservation->reclaimed)
    std::cerr << "polyaccel: reclaimed " << name << ": its supervisor is gone\n";
  request.gpu_count.reset();
  request.order_for_rank = request.local_rank;
  request.local_rank.reset();
  request.gpu_ids = reservation->gpu_ids;
  request.fixed_cpus = reservation->cpus;
  request.unavailable_gpus.clear();  // the engine decided, reclaimed reservations included
  auto plan = plan_launch(model, request);
  if (!plan) {
    (void)release_run(cli.state, r.name, *owner);
    return fail(plan.error());
  }
  for (const auto& w : plan->warnings)
    std::cerr << "polyaccel: warning: " << w << "\n";
  out.flush();
  auto code = run_supervised(*plan);
  if (auto s = release_run(cli.state, r.name, *owner); !s) {
    std::cerr << "polyaccel: warning: releasing " << r.name << ": " << s.error().message() << "\n";
  }
  if (!code) return fail(code.error());
  return *code;
}

// Interfaces that are up and hold an IPv4 or IPv6 address: what NCCL's socket transport can use.
std::vector<std::string> netdevs_up_with_address() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_name || !i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) continue;
    if (std::find(out.begin(), out.end(), i->ifa_name) == out.end()) out.push_back(i->ifa_name);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

int run_run(const GlobalOptions& options, const RunCliOptions& cli, std::ostream& out) {
  const bool live = options.discover.topology_xml.empty() && options.discover.fsroot.empty();
  if (!live && !cli.dry_run) {
    return fail(bad_input(options.discover.topology_xml.empty() ? "--fsroot" : "--topology",
                          "a captured machine cannot run anything", "add --dry-run"));
  }
  if (!cli.specs.empty() && cli.reserve.empty()) {
    return fail(bad_input("--spec", "is for the placement engine: add --reserve NAME"));
  }
  if (!cli.reserve.empty()) {
    if (auto ok = place::check_placement_name(cli.reserve, "--reserve"); !ok)
      return fail(ok.error());
  }
  if (cli.gpu_count && *cli.gpu_count == 0)
    return fail(bad_input("--gpus 0", "must be 1 or more", "leave --gpus out to run without GPUs"));
  LaunchRequest request;
  request.argv = cli.argv;
  request.gpu_ids = cli.gpu_ids;
  if (cli.gpu_count) request.gpu_count = cli.gpu_count;
  if (auto s = rank_from_environment(request, cli); !s) return fail(s.error());
  inherited_visibility(request);
  if (auto s = hugepages_option(request, cli.hugepages); !s) return fail(s.error());
  if (const char* t = std::getenv("GLIBC_TUNABLES")) request.existing_glibc_tunables = t;
  auto model = discover_host(options.discover);
  if (!model) return fail(model.error());
  if (live) {
    request.allowed_cpus = current_affinity();
    request.allowed_mems = current_memory_nodes();
    request.usable_netdevs = netdevs_up_with_address();
  }
  // GPUs that placements (VMs, other reserved runs) hold are not ours to take.
  // An absent state file holds nothing; one that cannot be read (not a regular file, not ours,
  // a link loop) is refused like any bad input, as `place` does, rather than run on GPUs that
  // it may say are taken.
  // libvirt's running guests (Nova's) count too: their passed-through GPUs are taken.
  const std::string libvirt_domains_dir = libvirt_status_dir(options, cli.libvirt_domains);
  auto state = place::AllocationStore(cli.state, libvirt_domains_dir).load();
  if (!state) return fail(state.error());
  std::vector<place::Placement> placements = state->all();
  for (const auto& p : placements) {
    for (const auto& d : p.devices) {
      auto a = PciAddress::parse(d.pci_bus_id);
      // A domain's <hostdev> has no kind: any address it holds is out (a NIC matches no GPU).
      if (a && (d.kind == "accelerator" || !p.owner.empty()))
        request.unavailable_gpus.push_back(*a);
    }
  }
  // --gpus N: the placement engine chooses, as it would for --reserve, recording nothing.
  if (request.gpu_count && cli.reserve.empty() && !model->accelerators.empty() &&
      *request.gpu_count <= model->accelerators.size()) {
    RunReservationRequest r;
    r.gpus = *request.gpu_count;
    r.pus_per_gpu =
        pus_per_gpu(*model, request.allowed_cpus.empty() ? model->pus : request.allowed_cpus);
    r.gpu_vendor_id = model->accelerators.front().pci.vendor_id;
    auto ids = engine_gpu_choice(*model, placements, r);
    if (ids && !ids->empty()) {
      request.gpu_ids = *ids;
      request.gpu_count.reset();
    } else {
      std::cerr << "polyaccel: warning: the placement engine finds no " << r.gpus
                << " GPUs with free local CPUs"
                << (ids ? std::string() : " (" + ids.error().message() + ")")
                << "; choosing by topology alone\n";
    }
  }
  auto plan = plan_launch(*model, request);
  if (!plan) return fail(plan.error());
  for (const auto& w : plan->warnings)
    std::cerr << "polyaccel: warning: " << w << "\n";
  if (cli.dry_run) {
    if (!cli.reserve.empty()) {
      std::cerr << "polyaccel: warning: --dry-run reserves nothing; the engine may choose other "
                   "GPUs and CPUs when it does\n";
    }
    print_plan(*plan, options.json, out);
    return kExitOk;
  }
  if (!cli.reserve.empty())
    return run_reserved(*model, cli, libvirt_domains_dir, request, *plan, out);
  out.flush();
  return fail(exec_bound(*plan));
}

}  // namespace polyaccel::cli
