#include "discover/container_runtime.h"

#include <yaml-cpp/yaml.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

#include "core/file_io.h"

namespace polyaccel {

namespace {

namespace fs = std::filesystem;

// The kernel keeps 15 characters of a process name (TASK_COMM_LEN 16 with the NUL).
constexpr std::size_t kCommLength = 15;

fs::path under(const std::string& root, const std::string& absolute) {
  std::string rel = absolute;
  while (!rel.empty() && rel.front() == '/')
    rel.erase(rel.begin());
  return fs::path(root) / rel;
}

bool exists(const std::string& root, const std::string& absolute) {
  std::error_code ec;
  return fs::exists(under(root, absolute), ec);
}

std::vector<std::string> string_array(const toml::node_view<const toml::node>& node) {
  std::vector<std::string> out;
  if (const auto* array = node.as_array()) {
    for (const auto& item : *array) {
      if (auto s = item.value<std::string>()) out.push_back(*s);
    }
  }
  return out;
}

// The names of the runtime handlers under a `runtimes` table.
void add_runtimes(const toml::node_view<const toml::node>& node, std::vector<std::string>& out) {
  if (const auto* table = node.as_table()) {
    for (const auto& [name, value] : *table) {
      if (std::find(out.begin(), out.end(), std::string(name.str())) == out.end())
        out.emplace_back(name.str());
    }
  }
}

std::optional<toml::table> parse_toml(const std::string& root, const std::string& absolute,
                                      std::string& problem) {
  auto text = read_text_file(under(root, absolute));
  if (!text) return std::nullopt;
  try {
    return toml::parse(*text, absolute);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    problem = absolute + ":" + std::to_string(where.line) + ": " + std::string(e.description());
    return std::nullopt;
  }
}

// containerd's `imports`: exact paths or a glob in the last component ("conf.d/*.toml").
std::vector<std::string> expand_imports(const std::string& root, const toml::table& config) {
  std::vector<std::string> out;
  for (const auto& pattern : string_array(config["imports"])) {
    auto star = pattern.find('*');
    if (star == std::string::npos) {
      out.push_back(pattern);
      continue;
    }
    auto slash = pattern.rfind('/', star);
    if (slash == std::string::npos) continue;
    std::string dir = pattern.substr(0, slash);
    std::string prefix = pattern.substr(slash + 1, star - slash - 1);
    std::string suffix = pattern.substr(star + 1);
    for (const auto& name : sorted_entry_names(under(root, dir))) {
      if (name.size() >= prefix.size() + suffix.size() && name.starts_with(prefix) &&
          name.ends_with(suffix))
        out.push_back(dir + "/" + name);
    }
  }
  return out;
}

// The CRI plugin's table: "io.containerd.grpc.v1.cri" in containerd 1.x (config version 2),
// "io.containerd.cri.v1.runtime" in 2.x (version 3); version 1 files call it "cri".
void read_containerd_cri(const toml::table& config, RuntimeConfigFacts& out) {
  const char* plugin = out.config_version >= 3   ? "io.containerd.cri.v1.runtime"
                       : out.config_version == 2 ? "io.containerd.grpc.v1.cri"
                                                 : "cri";
  auto cri = config["plugins"][plugin];
  if (auto on = cri["enable_cdi"].value<bool>()) out.enable_cdi = *on;
  if (cri["cdi_spec_dirs"].is_array()) out.cdi_spec_dirs = string_array(cri["cdi_spec_dirs"]);
  add_runtimes(cri["containerd"]["runtimes"], out.runtimes);
}

RuntimeConfigFacts read_containerd(const std::string& root) {
  RuntimeConfigFacts c;
  c.name = "containerd";
  c.installed = exists(root, "/usr/bin/containerd") || exists(root, "/usr/local/bin/containerd") ||
                exists(root, "/etc/containerd/config.toml");
  const std::string main_file = "/etc/containerd/config.toml";
  auto config = parse_toml(root, main_file, c.problem);
  if (!config) return c;
  // Compared before narrowing: 4294967299 must not read as version 3.
  const std::int64_t version = config->at_path("version").value_or<std::int64_t>(1);
  if (version < 1 || version > 3) {
    c.problem = main_file + ": version " + std::to_string(version) +
                " is not one containerd reads (1, 2 or 3)";
    return c;
  }
  c.config_path = main_file;
  c.config_version = static_cast<int>(version);
  read_containerd_cri(*config, c);
  // Imported files are merged over the main one, in order.
  for (const auto& path : expand_imports(root, *config)) {
    std::string problem;
    auto part = parse_toml(root, path, problem);
    if (!problem.empty() && c.problem.empty()) c.problem = problem;
    if (part) read_containerd_cri(*part, c);
  }
  return c;
}

// CRI-O reads crio.conf, then crio.conf.d/* in lexical order; CDI is always on (since 1.23), but
// an empty cdi_spec_dirs leaves it nothing to read.
RuntimeConfigFacts read_crio(const std::string& root) {
  RuntimeConfigFacts c;
  c.name = "cri-o";
  c.installed = exists(root, "/usr/bin/crio") || exists(root, "/usr/local/bin/crio") ||
                exists(root, "/etc/crio/crio.conf");
  if (!c.installed) return c;
  std::vector<std::string> files = {"/etc/crio/crio.conf"};
  for (const auto& name : sorted_entry_names(under(root, "/etc/crio/crio.conf.d")))
    files.push_back("/etc/crio/crio.conf.d/" + name);
  bool dirs_set = false;
  for (const auto& path : files) {
    std::string problem;
    auto config = parse_toml(root, path, problem);
    if (!problem.empty() && c.problem.empty()) c.problem = problem;
    if (!config) continue;
    if (c.config_path.empty()) c.config_path = path;
    const toml::table& table = *config;
    auto runtime = table["crio"]["runtime"];
    if (runtime["cdi_spec_dirs"].is_array()) {
      c.cdi_spec_dirs = string_array(runtime["cdi_spec_dirs"]);
      dirs_set = true;
    }
    add_runtimes(runtime["runtimes"], c.runtimes);
  }
  c.enable_cdi = !(dirs_set && c.cdi_spec_dirs.empty());
  return c;
}

void add_strings(const YAML::Node& list, const char* key, std::vector<std::string>& out) {
  if (!list || !list.IsSequence()) return;
  for (const auto& item : list) {
    if (!item.IsMap()) continue;
    if (auto v = item[key]; v && v.IsScalar()) out.push_back(v.as<std::string>());
  }
}

// The device nodes (hostPath when given: that is what must exist on the host) and mounts of one
// containerEdits object.
void read_edits(const YAML::Node& edits, CdiSpecFacts& spec) {
  if (!edits || !edits.IsMap()) return;
  if (auto nodes = edits["deviceNodes"]; nodes && nodes.IsSequence()) {
    for (const auto& node : nodes) {
      if (!node.IsMap()) continue;
      auto host = node["hostPath"];
      auto path = host && host.IsScalar() ? host : node["path"];
      if (path && path.IsScalar()) spec.device_nodes.push_back(path.as<std::string>());
    }
  }
  add_strings(edits["mounts"], "hostPath", spec.host_paths);
}

std::string parse_nvidia_module_version(const std::string& root, const std::string& proc_text) {
  if (auto v = read_first_line(under(root, "/sys/module/nvidia/version")); v && !v->empty())
    return *v;
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024"
  // or "... Open Kernel Module for x86_64  550.54.15  Release Build ...": the first word after
  // "Module" that starts with a digit and holds a dot.
  auto at = proc_text.find("Module");
  if (at == std::string::npos) return "";
  std::istringstream words(proc_text.substr(at));
  for (std::string w; words >> w;) {
    if (std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos)
      return w;
  }
  return "";
}

bool is_version(const std::string& s) {
  if (s.empty() || s.find('.') == std::string::npos) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c) || c == '.'; });
}

}  // namespace

bool ContainerRuntimeFacts::process_running(const std::string& name) const {
  return processes.count(name.substr(0, kCommLength)) > 0;
}

std::optional<bool> cdi_enabled(const RuntimeConfigFacts& runtime) {
  if (!runtime.installed) return std::nullopt;
  if (runtime.name == "containerd") {
    if (runtime.config_path.empty()) return std::nullopt;
    return runtime.enable_cdi.value_or(runtime.config_version >= 3);
  }
  return runtime.enable_cdi.value_or(true);
}

const std::vector<std::string>& default_cdi_spec_dirs() {
  static const std::vector<std::string> dirs = {"/etc/cdi", "/var/run/cdi"};
  return dirs;
}

CdiSpecFacts parse_cdi_spec(const std::string& path, const std::string& text) {
  CdiSpecFacts spec;
  spec.path = path;
  try {
    YAML::Node doc = YAML::Load(text);
    if (!doc.IsMap()) {
      spec.problem = "not a CDI spec (no mapping at the top)";
      return spec;
    }
    if (auto v = doc["cdiVersion"]; v && v.IsScalar()) spec.cdi_version = v.as<std::string>();
    if (auto k = doc["kind"]; k && k.IsScalar()) spec.kind = k.as<std::string>();
    if (spec.cdi_version.empty() || spec.kind.empty()) {
      spec.problem = "cdiVersion or kind is missing";
      return spec;
    }
    read_edits(doc["containerEdits"], spec);
    if (auto devices = doc["devices"]; devices && devices.IsSequence()) {
      for (const auto& d : devices) {
        if (!d.IsMap()) continue;
        if (auto n = d["name"]; n && n.IsScalar()) spec.device_names.push_back(n.as<std::string>());
        read_edits(d["containerEdits"], spec);
      }
    }
    if (spec.device_names.empty()) spec.problem = "declares no device";
  } catch (const YAML::Exception& e) {
    spec.problem = "cannot be parsed: line " + std::to_string(e.mark.line + 1) + ": " + e.msg;
  }
  return spec;
}

ContainerRuntimeFacts read_container_runtime_facts(const std::string& root) {
  ContainerRuntimeFacts f;
  if (root.empty()) return f;
  f.containerd = read_containerd(root);
  f.crio = read_crio(root);
  f.docker_installed = exists(root, "/usr/bin/dockerd") || exists(root, "/usr/local/bin/dockerd");

  std::vector<std::string> dirs = default_cdi_spec_dirs();
  for (const auto* r : {&f.containerd, &f.crio}) {
    for (const auto& d : r->cdi_spec_dirs) {
      if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
    }
  }
  for (const auto& dir : dirs) {
    for (const auto& name : sorted_entry_names(under(root, dir))) {
      if (!name.ends_with(".json") && !name.ends_with(".yaml") && !name.ends_with(".yml")) continue;
      std::string path = dir + "/" + name;
      auto text = read_text_file(under(root, path));
      if (!text) {
        CdiSpecFacts unreadable;
        unreadable.path = path;
        unreadable.problem = "cannot be read";
        f.cdi_specs.push_back(std::move(unreadable));
        continue;
      }
      CdiSpecFacts spec = parse_cdi_spec(path, *text);
      if (exists(root, "/dev")) {
        for (const auto* list : {&spec.device_nodes, &spec.host_paths}) {
          for (const auto& p : *list) {
            if (!exists(root, p) && std::find(spec.missing_paths.begin(), spec.missing_paths.end(),
                                              p) == spec.missing_paths.end())
              spec.missing_paths.push_back(p);
          }
        }
      }
      f.cdi_specs.push_back(std::move(spec));
    }
  }

  static const char* const kToolkit[] = {"nvidia-ctk",
                                         "nvidia-container-runtime",
                                         "nvidia-container-runtime-hook",
                                         "nvidia-container-toolkit",
                                         "nvidia-container-cli",
                                         "amd-ctk",
                                         "amd-container-runtime",
                                         "habana-container-runtime",
                                         "habana-container-hook"};
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin", "/usr/local/nvidia/toolkit"}) {
    for (const char* program : kToolkit) {
      if (exists(root, std::string(dir) + "/" + program)) f.toolkit_programs.insert(program);
    }
  }

  for (const auto& name : sorted_entry_names(under(root, "/proc"))) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    f.processes_known = true;
    if (auto comm = read_first_line(under(root, "/proc/" + name + "/comm")); comm && !comm->empty())
      f.processes.insert(comm->substr(0, kCommLength));
  }

  std::string proc_text = read_text_file(under(root, "/proc/driver/nvidia/version")).value_or("");
  f.nvidia_module_version = parse_nvidia_module_version(root, proc_text);
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                          "/usr/lib", "/lib/x86_64-linux-gnu", "/lib64"}) {
    for (const auto& name : sorted_entry_names(under(root, dir))) {
      const std::string prefix = "libnvidia-ml.so.";
      if (!name.starts_with(prefix)) continue;
      std::string version = name.substr(prefix.size());
      if (is_version(version)) f.nvml_library_versions.insert(version);
    }
  }
  return f;
}

}  // namespace polyaccel
