// Container runtime facts for the audit's runtime family: whether containerd and CRI-O have CDI
// on, the CDI specs on the host and what they reference, the vendors' container toolkits, the
// NVIDIA daemons that run, and the NVIDIA kernel module's version against the user-space
// library's. Read through a root like every other fact; reading never fails: what cannot be read
// or parsed is recorded as a problem (of the spec or of the runtime's configuration).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace polyaccel {

// One CDI spec file (etc/cdi, var/run/cdi or the runtime's cdi_spec_dirs).
struct CdiSpecFacts {
  std::string path;                       // absolute as the runtime sees it: "/etc/cdi/nvidia.yaml"
  std::string cdi_version;                // "0.6.0"
  std::string kind;                       // "nvidia.com/gpu"
  std::vector<std::string> device_names;  // "0", "all", "GPU-…"
  // Device nodes (container path, or hostPath when given) and mounted host paths of the spec and
  // its devices.
  std::vector<std::string> device_nodes;
  std::vector<std::string> host_paths;
  std::string problem;  // why it could not be read or parsed; empty when it was
  // Device nodes and host paths that the spec names and the host lacks (a driver upgrade or a
  // GPU gone since the spec was made); checked only where the root has a /dev.
  std::vector<std::string> missing_paths;
};

// A container runtime's configuration, as far as CDI goes.
struct RuntimeConfigFacts {
  std::string name;         // "containerd", "cri-o"
  bool installed = false;   // its binary or configuration is there
  std::string config_path;  // the main configuration file read, "" when none
  int config_version = 0;   // containerd: the file's `version` (2: containerd 1.x, 3: 2.x)
  // CDI as the configuration sets it: nullopt when the file leaves it to the default.
  std::optional<bool> enable_cdi;
  std::vector<std::string> cdi_spec_dirs;  // as configured; empty: the runtime's default
  std::vector<std::string> runtimes;       // runtime handlers: "runc", "nvidia"
  std::string problem;                     // the configuration could not be parsed
};

struct ContainerRuntimeFacts {
  RuntimeConfigFacts containerd;
  RuntimeConfigFacts crio;
  bool docker_installed = false;
  std::vector<CdiSpecFacts> cdi_specs;
  // Container-toolkit programs found in usr/bin, usr/local/bin, usr/sbin: "nvidia-ctk",
  // "nvidia-container-runtime", "amd-ctk", "habana-container-runtime", ...
  std::set<std::string> toolkit_programs;
  // Names (comm, at most 15 characters as the kernel keeps them) of running processes, and
  // whether proc had any to read (a gathered tree has none).
  std::set<std::string> processes;
  bool processes_known = false;
  // The NVIDIA kernel module's version ("550.54.15"), from proc/driver/nvidia/version or
  // sys/module/nvidia/version; empty when not loaded.
  std::string nvidia_module_version;
  // Versions of libnvidia-ml.so.<version> found in the library directories.
  std::set<std::string> nvml_library_versions;

  bool any_runtime() const { return containerd.installed || crio.installed || docker_installed; }
  // Whether a process of that name runs (names longer than 15 characters compare as truncated).
  bool process_running(const std::string& name) const;
};

// Whether the runtime hands CDI devices to containers, by its configuration. containerd 1.x
// (config version 2) has CDI off unless enable_cdi = true; 2.x (version 3) has it on unless the
// file turns it off; without a configuration file its version, and so its default, is unknown:
// nullopt. CRI-O has it on (since 1.23) unless cdi_spec_dirs = [] leaves it nothing to read.
// nullopt too for a runtime that is not installed. The audit's runtime family and the device
// plugin's `--device-list-strategy auto` both decide by it.
std::optional<bool> cdi_enabled(const RuntimeConfigFacts& runtime);

// The CDI spec directories a runtime reads when its configuration names none.
const std::vector<std::string>& default_cdi_spec_dirs();

ContainerRuntimeFacts read_container_runtime_facts(const std::string& root);

// Parses one CDI spec (JSON or YAML); `path` names it in the problem.
CdiSpecFacts parse_cdi_spec(const std::string& path, const std::string& text);

}  // namespace polyaccel
