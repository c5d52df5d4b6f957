// `polyaccel mig show | plan | apply | partition`: MIG layouts of NVIDIA GPUs (planned explicitly,
// applied as the smallest change) and AMD compute/memory partition modes. Schema: docs/mig.md.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include <map>
#include "cli/mig.h"
#include "cli/output_format.h"
#include "core/json.h"
#include "core/number.h"
#include "core/strings.h"
#include "share/mig_parted_config.h"
#include "share/mig_profiles.h"

namespace polyaccel::cli {

namespace {

constexpr int kMigSchemaVersion = 1;

Result<MigRequest> parse_request(const std::vector<std::string>& args) {
  MigRequest request;
  for (const auto& a : args) {
    auto eq = a.find('=');
    std::string name = a.substr(0, eq);
    std::string count = eq == std::string::npos ? "" : a.substr(eq + 1);
    auto n = parse_integer<unsigned>(count, name, 1, 999);
    if (name.empty() || !n) {
      return bad_input(a, "expected PROFILE=COUNT with a count of 1..999", "e.g. 1g.18gb=6");
    }
    request.emplace_back(name, *n);
  }
  return request;
}

nlohmann::json planned_json(const std::vector<MigPlannedInstance>& planned) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : planned) {
    out.push_back({{"profile", p.profile}, {"start", p.start}, {"size", p.size}, {"kept", p.kept}});
  }
  return out;
}

std::string pid_list(const std::vector<unsigned>& pids) {
  std::vector<std::string> s;
  for (unsigned p : pids)
    s.push_back(std::to_string(p));
  return join(s, ",");
}

int show(const GlobalOptions& global, std::ostream& out) {
  nlohmann::json doc = {{"schema_version", kMigSchemaVersion}};
  doc["gpus"] = nlohmann::json::array();
  auto host = open_mig_host({});
  if (!host && host.error().code != ErrorCode::not_found) return fail(host.error());
  if (host) {
    for (size_t i = 0; i < host->gpus.size(); ++i) {
      const MigGpu& g = host->gpus[i];
      const MigGeometry* geo = host->inputs[i].geometry;
      nlohmann::json j = {{"index", g.index},
                          {"pci_bus_id", g.pci_bus_id},
                          {"name", g.name},
                          {"model", geo ? geo->model : ""},
                          {"mig_enabled", g.mig_enabled},
                          {"mig_pending", g.mig_pending}};
      j["instances"] = instances_json(g.instances);
      doc["gpus"].push_back(j);
    }
  }
  std::string root = filesystem_root(global.discover);
  doc["amd"] = nlohmann::json::array();
  if (!root.empty()) {
    auto amd = read_amd_partitions(std::filesystem::path(root) / "sys");
    if (!amd) return fail(amd.error());
    for (const auto& a : *amd) {
      doc["amd"].push_back({{"pci_bus_id", a.pci_bus_id},
                            {"compute_partition", a.compute},
                            {"memory_partition", a.memory},
                            {"available_compute", a.available_compute},
                            {"available_memory", a.available_memory}});
    }
  }
  if (global.json) {
    out << json_text(doc) << "\n";
    return kExitOk;
  }
  if (doc["gpus"].empty() && doc["amd"].empty()) {
    out << "No MIG-capable NVIDIA GPU and no partitionable AMD GPU found.\n";
  }
  for (const auto& g : doc["gpus"]) {
    out << "GPU " << g["index"] << "  " << g["pci_bus_id"].get<std::string>() << "  "
        << g["name"].get<std::string>() << "  MIG " << (g["mig_enabled"] ? "on" : "off");
    if (g["mig_pending"] != g["mig_enabled"]) {
      out << " (" << (g["mig_pending"] ? "on" : "off") << " after reset)";
    }
    out << "\n";
    for (const auto& inst : g["instances"]) {
      out << "  " << inst["profile"].get<std::string>() << "  start " << inst["start"] << " size "
          << inst["size"] << "  GPU instance " << inst["gpu_instance_id"];
      if (!inst["uuid"].get<std::string>().empty()) out << "  " << inst["uuid"].get<std::string>();
      if (!inst["pids"].empty()) out << "  busy (pids " << inst["pids"].dump() << ")";
      out << "\n";
    }
  }
  for (const auto& a : doc["amd"]) {
    out << "AMD " << a["pci_bus_id"].get<std::string>() << "  "
        << a["compute_partition"].get<std::string>() << "/"
        << a["memory_partition"].get<std::string>()
        << "  (compute: " << join(a["available_compute"].get<std::vector<std::string>>(), ",")
        << "; memory: " << join(a["available_memory"].get<std::vector<std::string>>(), ",")
        << ")\n";
  }
  return kExitOk;
}

int plan(const GlobalOptions& global, const MigOptions& options, std::ostream& out) {
  std::vector<MigGpuInput> inputs;
  MigHost host;
  if (!options.model.empty()) {
    const MigGeometry* g = find_mig_geometry(options.model);
    if (!g) {
      return fail(bad_input("--model " + options.model, "no MIG profile table for this model",
                            "models: " + mig_model_names()));
    }
    if (options.gpus == 0 || options.gpus > 64) {
      return fail(bad_input("--gpus", "must be between 1 and 64"));
    }
    for (unsigned i = 0; i < options.gpus; ++i)
      inputs.push_back({i, g, true, g->pci_ids.empty() ? 0 : g->pci_ids.front(), {}});
  } else {
    auto opened = open_mig_host(options);
    if (!opened) {
      Error e = opened.error();
      if (e.code == ErrorCode::not_found)
        e.remedy = "plan for other GPUs with --model NAME --gpus N";
      return fail(e);
    }
    host = std::move(*opened);
    inputs = host.inputs;
  }
  auto result = plan_for(options, inputs);
  if (!result) return fail(result.error());
  return report_plan(*result, global.json, out);
}

int partition(const GlobalOptions& global, const MigOptions& options, std::ostream& out) {
  std::string root = filesystem_root(global.discover);
  if (root.empty())
    return fail(bad_input("--topology", "AMD partitions need a sysfs root: --fsroot"));
  std::filesystem::path sysfs = std::filesystem::path(root) / "sys";
  if (options.compute.empty() && options.memory.empty()) return show(global, out);
  std::string gpu = options.amd_gpu;
  if (gpu.empty()) {
    auto all = read_amd_partitions(sysfs);
    if (!all) return fail(all.error());
    if (all->size() != 1) {
      return fail(bad_input("--gpu", std::to_string(all->size()) +
                                         " partitionable AMD GPUs: name one by PCI address"));
    }
    gpu = all->front().pci_bus_id;
  }
  auto after = set_amd_partition(sysfs, gpu, options.compute, options.memory);
  if (!after) return fail(after.error());
  if (global.json) {
    out << json_text(nlohmann::json{{"schema_version", kMigSchemaVersion},
                                    {"pci_bus_id", after->pci_bus_id},
                                    {"compute_partition", after->compute},
                                    {"memory_partition", after->memory}})
        << "\n";
  } else {
    out << "AMD " << after->pci_bus_id << " now " << after->compute << "/" << after->memory << "\n";
  }
  return kExitOk;
}

}  // namespace

int report_plan(const MigPlan& plan, bool json, std::ostream& out) {
  if (json) {
    out << json_text(plan_json(plan)) << "\n";
  } else {
    print_plan(plan, out);
  }
  if (plan.fit) return kExitOk;
  if (plan.exceeds_hardware) return fail(bad_input("MIG request", plan.reason));
  return kExitFindings;
}

Result<MigHost> open_mig_host(const MigOptions& options) {
  auto control = open_nvml_mig_control();
  if (!control) return control.error();
  MigHost host;
  host.control = std::move(*control);
  auto gpus = host.control->gpus();
  if (!gpus) return gpus.error();
  for (auto& g : *gpus) {
    bool wanted = options.gpu_indices.empty() ||
                  std::find(options.gpu_indices.begin(), options.gpu_indices.end(), g.index) !=
                      options.gpu_indices.end();
    if (wanted) host.gpus.push_back(std::move(g));
  }
  for (unsigned i : options.gpu_indices) {
    bool found = std::any_of(host.gpus.begin(), host.gpus.end(),
                             [&](const MigGpu& g) { return g.index == i; });
    if (!found) return bad_input("--gpu-index " + std::to_string(i), "no MIG-capable GPU has it");
  }
  for (auto& g : host.gpus) {
    const MigGeometry* geo = mig_geometry_for(g);
    for (auto& inst : g.instances) {
      const MigProfile* p = geo ? geo->profile_by_id(inst.profile_id) : nullptr;
      if (p) inst.profile = p->name;  // the table's name, else the library's
    }
    host.inputs.push_back({g.index, geo, g.mig_enabled, g.pci_id, g.instances});
  }
  return host;
}

Result<MigPlan> plan_for(const MigOptions& options, const std::vector<MigGpuInput>& all) {
  std::vector<MigGpuInput> inputs;
  for (const auto& in : all) {
    if (!in.geometry) {
      return Error{ErrorCode::unsupported, "GPU " + std::to_string(in.index),
                   "no MIG profile table for this model and the library lists no profiles",
                   "enable MIG mode first so that NVML lists them"};
    }
    inputs.push_back(in);
  }
  if (inputs.empty()) return bad_input("GPUs", "no MIG-capable GPU found");
  bool from_file = !options.file.empty() || !options.config.empty();
  if (from_file && !options.request.empty()) {
    return bad_input("PROFILE=COUNT", "give either -f FILE -c CONFIG or profiles, not both");
  }
  if (from_file) {
    if (options.file.empty() || options.config.empty()) {
      return bad_input(options.file.empty() ? "-f" : "-c", "-f FILE and -c CONFIG go together");
    }
    auto config = read_mig_parted_config(options.file);
    if (!config) return config.error();
    std::vector<MigPartedGpu> selection;
    for (const auto& in : inputs)
      selection.push_back({in.index, in.pci_id});
    auto targets = select_mig_parted_config(*config, options.config, selection);
    if (!targets) return targets.error();
    std::vector<MigGpuInput> chosen;
    std::vector<MigGpuTarget> wanted;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!(*targets)[i]) continue;
      chosen.push_back(inputs[i]);
      wanted.push_back(*(*targets)[i]);
    }
    if (chosen.empty()) {
      return bad_input(options.config, "applies to none of the GPUs (devices/device-filter)");
    }
    auto planned = plan_mig_per_gpu(chosen, wanted, options.force);
    if (!planned && planned.error().code == ErrorCode::bad_input) {
      Error e = planned.error();  // an unknown profile, a count too large: say which file
      e.input = options.file + ": " + (e.input.empty() ? options.config : e.input);
      return e;
    }
    return planned;
  }
  auto request = parse_request(options.request);
  if (!request) return request.error();
  if (request->empty()) {
    return bad_input("mig plan", "nothing requested",
                     "give PROFILE=COUNT ... or -f FILE -c CONFIG");
  }
  // Without -i or --exact, the request is the layout of the GPUs it needs and no others: the
  // fitting subset of GPUs with the fewest changes (then the fewest GPUs) is planned, and the
  // GPUs outside it are not touched. --exact (or -i) plans the whole set, as mig-parted does.
  bool on_host = std::any_of(inputs.begin(), inputs.end(), [](const MigGpuInput& in) {
    return !in.current.empty() || in.mig_enabled;
  });
  if (options.exact || !options.gpu_indices.empty() || !on_host || inputs.size() < 2 ||
      inputs.size() > 8) {
    return plan_mig_spread(inputs, *request, options.force);
  }
  std::optional<MigPlan> best;
  size_t best_gpus = 0;
  for (unsigned mask = 1; mask < (1u << inputs.size()); ++mask) {
    std::vector<MigGpuInput> subset;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (mask & (1u << i)) subset.push_back(inputs[i]);
    }
    auto p = plan_mig_spread(subset, *request, options.force);
    if (!p || !p->fit) continue;
    if (!best || p->changes() < best->changes() ||
        (p->changes() == best->changes() && subset.size() < best_gpus)) {
      best = std::move(*p);
      best_gpus = subset.size();
    }
  }
  if (best) return *best;
  return plan_mig_spread(inputs, *request, options.force);
}

nlohmann::json instance_json(const MigPlacedInstance& i) {
  return {{"profile", i.profile},
          {"start", i.start},
          {"size", i.size},
          {"gpu_instance_id", i.gpu_instance_id},
          {"compute_instance_id", i.compute_instance_id},
          {"uuid", i.uuid},
          {"pids", i.pids}};
}

nlohmann::json instances_json(const std::vector<MigPlacedInstance>& instances) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& i : instances)
    out.push_back(instance_json(i));
  return out;
}

nlohmann::json plan_json(const MigPlan& plan) {
  nlohmann::json doc = {{"schema_version", kMigSchemaVersion},
                        {"fit", plan.fit},
                        {"reason", plan.reason},
                        {"exceeds_hardware", plan.exceeds_hardware},
                        {"changes", plan.changes()}};
  doc["gpus"] = nlohmann::json::array();
  for (const auto& g : plan.gpus) {
    nlohmann::json j = {{"index", g.index},
                        {"model", g.model},
                        {"mig_enabled", g.mig_enabled},
                        {"mode_change", g.mode_change}};
    j["instances"] = planned_json(g.instances);
    j["create"] = planned_json(g.create);
    j["destroy"] = instances_json(g.destroy);
    doc["gpus"].push_back(j);
  }
  return doc;
}

void print_plan(const MigPlan& plan, std::ostream& out) {
  if (!plan.fit) {
    out << "No fit: " << plan.reason << "\n";
    return;
  }
  for (const auto& g : plan.gpus) {
    out << "GPU " << g.index << "  " << g.model << "  MIG " << (g.mig_enabled ? "on" : "off");
    if (g.mode_change) out << " (mode change)";
    out << "\n";
    if (g.instances.empty()) out << "  (no instances)\n";
    for (const auto& i : g.instances) {
      out << "  " << i.profile << "  start " << i.start << " size " << i.size
          << (i.kept ? "  kept" : "  new") << "\n";
    }
    for (const auto& d : g.destroy) {
      out << "  destroy " << d.profile << " at " << d.start << " (GPU instance "
          << d.gpu_instance_id << ")";
      if (!d.pids.empty()) out << " busy, pids " << pid_list(d.pids);
      out << "\n";
    }
  }
  out << plan.changes() << " change" << (plan.changes() == 1 ? "" : "s") << "\n";
}

namespace {

// nvidia-smi mig -lgip and -lgipp in one table per GPU model: each profile's id, slices, memory,
// how many fit, and where an instance may start.
int profiles(const GlobalOptions& global, const MigOptions& options, std::ostream& out) {
  std::vector<std::pair<std::string, const MigGeometry*>> gpus;  // (which GPU, its geometry)
  if (!options.model.empty()) {
    const MigGeometry* g = find_mig_geometry(options.model);
    if (!g) {
      return fail(bad_input("--model " + options.model, "no MIG profile table for this model",
                            "models: " + mig_model_names()));
    }
    gpus.emplace_back(g->model, g);
  } else {
    auto host = open_mig_host({});
    if (!host) return fail(host.error());
    for (size_t i = 0; i < host->gpus.size(); ++i) {
      if (host->inputs[i].geometry)
        gpus.emplace_back("GPU " + std::to_string(host->gpus[i].index), host->inputs[i].geometry);
    }
  }
  nlohmann::json doc = {{"schema_version", kMigSchemaVersion}, {"gpus", nlohmann::json::array()}};
  for (const auto& [which, g] : gpus) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& p : g->profiles) {
      list.push_back({{"name", p.name},
                      {"profile_id", p.profile_id},
                      {"compute_slices", p.compute_slices},
                      {"memory_slices", p.memory_slices},
                      {"memory_gb", p.memory_gb},
                      {"max_instances", p.max_instances},
                      {"starts", p.starts}});
    }
    doc["gpus"].push_back({{"gpu", which}, {"model", g->model}, {"profiles", list}});
  }
  if (global.json) {
    out << doc.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& [which, g] : gpus) {
    out << which << (which == g->model ? "" : " (" + g->model + ")") << ": " << g->compute_slices
        << " compute slices, " << g->memory_slices << " memory slices, at most " << g->max_instances
        << " instances\n";
    Table t;
    t.add_row({"profile", "ID", "slices", "memory", "instances", "placements (start:size)"});
    for (const auto& p : g->profiles) {
      std::vector<std::string> starts;
      for (unsigned st : p.starts)
        starts.push_back(std::to_string(st) + ":" + std::to_string(p.memory_slices));
      t.add_row({p.name, std::to_string(p.profile_id),
                 std::to_string(p.compute_slices) + "/" + std::to_string(p.memory_slices),
                 std::to_string(p.memory_gb) + " GB", std::to_string(p.max_instances),
                 join(starts, ",")});
    }
    t.print(out, global.style);
  }
  return kExitOk;
}

// mig-parted assert: whether applying the request would change nothing.
int assert_layout(const GlobalOptions& global, const MigOptions& options, std::ostream& out) {
  auto host = open_mig_host(options);
  if (!host) return fail(host.error());
  auto plan = plan_for(options, host->inputs);
  if (!plan) return fail(plan.error());
  if (!plan->fit) {
    return fail(bad_input("mig assert", "the requested layout does not fit these GPUs",
                          "see `polyaccel mig plan` with the same request"));
  }
  bool matches = plan->changes() == 0;
  for (const auto& g : plan->gpus)
    matches = matches && !g.mode_change;
  if (global.json) {
    out << nlohmann::json{{"schema_version", kMigSchemaVersion},
                          {"matches", matches},
                          {"changes", plan->changes()}}
               .dump(2)
        << "\n";
  } else {
    out << (matches ? "MIG layout matches"
                    : "MIG layout differs: " + std::to_string(plan->changes()) + " change" +
                          (plan->changes() == 1 ? "" : "s") + " to apply")
        << "\n";
  }
  return matches ? kExitOk : kExitFindings;
}

// mig-parted export: one config, "current", with an entry per GPU.
int export_layout(const GlobalOptions& global, std::ostream& out) {
  auto host = open_mig_host({});
  if (!host) return fail(host.error());
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& g : host->gpus) {
    std::map<std::string, unsigned> counts;
    for (const auto& i : g.instances)
      ++counts[i.profile];
    nlohmann::json devices = nlohmann::json::object();
    for (const auto& [profile, n] : counts)
      devices[profile] = n;
    nlohmann::json e = {{"devices", nlohmann::json::array({g.index})},
                        {"mig-enabled", g.mig_enabled}};
    if (g.mig_enabled) e["mig-devices"] = devices;
    entries.push_back(e);
  }
  nlohmann::json config = {{"version", "v1"}, {"mig-configs", {{"current", entries}}}};
  if (global.json) {
    out << config.dump(2) << "\n";
    return kExitOk;
  }
  auto yaml = json_to_yaml(config.dump());
  if (!yaml) return fail(yaml.error());
  out << *yaml;
  return kExitOk;
}

}  // namespace

CLI::App* add_mig_command(CLI::App& app, MigOptions& o,
                          const std::function<void(CLI::App*)>& add_globals) {
  auto* mig = app.add_subcommand("mig", "MIG layouts (NVIDIA) and partition modes (AMD)");
  mig->require_subcommand(1);
  auto* show_cmd = mig->add_subcommand("show", "MIG mode and instances of each GPU");
  auto* plan_cmd = mig->add_subcommand("plan", "place MIG instances (explicit start, size)");
  auto* apply_cmd = mig->add_subcommand("apply", "plan, then change only what must change");
  auto* part_cmd = mig->add_subcommand("partition", "AMD compute/memory partition modes (sysfs)");
  auto* profiles_cmd = mig->add_subcommand(
      "profiles",
      "the GPU instance profiles and placements a GPU offers (nvidia-smi mig -lgip/-lgipp)");
  profiles_cmd->add_option("--model", o.model, "a GPU model instead of this host's GPUs");
  auto* assert_cmd = mig->add_subcommand(
      "assert", "exit 0 when the GPUs are in the requested layout, 1 when not (mig-parted assert)");
  auto* export_cmd = mig->add_subcommand(
      "export", "the current layout as a mig-parted config (mig-parted export)");
  for (auto* c : {show_cmd, plan_cmd, apply_cmd, part_cmd, profiles_cmd, assert_cmd, export_cmd}) {
    add_globals(c);
    c->callback([&o, c] { o.action = c->get_name(); });
  }
  for (auto* c : {plan_cmd, apply_cmd, assert_cmd}) {
    c->add_option("-f,--file", o.file, "a mig-parted config file")->type_name("FILE");
    c->add_option("-c,--config", o.config, "the config of the file to use")->type_name("NAME");
    c->add_option_function<std::string>(
         "-i,--gpu-index",
         [&o](const std::string& list) {
           o.gpu_indices.clear();
           std::stringstream in(list);
           for (std::string item; std::getline(in, item, ',');) {
             auto index = parse_integer<unsigned>(item, "--gpu-index", 0, 999);
             if (!index)
               throw CLI::ValidationError("--gpu-index", printable(list) + ": expected N[,N...]");
             o.gpu_indices.push_back(*index);
           }
         },
         "only these GPUs of this host")
        ->type_name("N,...");
    c->add_flag("--force", o.force, "destroy busy instances (processes on them) if needed");
    c->add_flag("--exact", o.exact,
                "the request is the whole layout of the GPUs (default: only the GPUs it needs)");
    c->add_option("request", o.request, "PROFILE=COUNT ... over the GPUs")->type_name("PROFILE=N");
  }
  plan_cmd->add_option("--model", o.model, "plan for GPUs of this model instead of this host");
  plan_cmd->add_option("--gpus", o.gpus, "with --model: how many GPUs (default 1)");
  part_cmd->add_option("--gpu", o.amd_gpu, "the GPU's PCI address")->type_name("BDF");
  part_cmd->add_option("--compute", o.compute, "SPX, DPX, TPX, QPX or CPX");
  part_cmd->add_option("--memory", o.memory, "NPS1, NPS2, NPS4 or NPS8");
  return mig;
}

int run_mig(const GlobalOptions& global, const MigOptions& options, std::ostream& out) {
  if (options.action == "show") return show(global, out);
  if (options.action == "plan") return plan(global, options, out);
  if (options.action == "apply") return run_mig_apply(global, options, out);
  if (options.action == "partition") return partition(global, options, out);
  if (options.action == "profiles") return profiles(global, options, out);
  if (options.action == "assert") return assert_layout(global, options, out);
  if (options.action == "export") return export_layout(global, out);
  return kExitError;
}

}  // namespace polyaccel::cli
