// runtime.*: the layer between the driver and a container — CDI on in the container runtime,
// CDI specs that match the host's devices, the vendor's container toolkit, the NVIDIA daemons an
// HGX board and a busy node need, and a kernel module that matches the user-space library.
// polyaccel installs none of these; it says which is wrong and how to fix it. Silent where the
// host has no accelerator of the vendor concerned, or (for the CDI and toolkit checks) no
// container runtime.
#include <algorithm>
#include <cctype>
#include <map>

#include "audit/checks.h"
#include "core/strings.h"

namespace polyaccel::audit {

namespace {

// What each vendor's devices look like in a CDI spec, and how its tools fix things.
struct VendorRuntime {
  Vendor vendor;
  const char* label;               // "NVIDIA"
  const char* node_prefix;         // per-device node in a spec: "/dev/nvidia" + digit
  std::vector<const char*> tools;  // any one of them is the toolkit
  const char* toolkit_package;
  const char* generate_command;  // the vendor's own CDI generator
};

const std::vector<VendorRuntime>& vendor_runtimes() {
  static const std::vector<VendorRuntime> v = {
      {Vendor::nvidia,
       "NVIDIA",
       "/dev/nvidia",
       {"nvidia-ctk", "nvidia-container-runtime", "nvidia-container-runtime-hook",
        "nvidia-container-toolkit"},
       "nvidia-container-toolkit",
       "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"},
      {Vendor::amd,
       "AMD",
       "/dev/dri/renderD",
       {"amd-ctk", "amd-container-runtime"},
       "amd-container-toolkit",
       "amd-ctk cdi generate --output=/etc/cdi/amd.json"},
      {Vendor::intel_gaudi,
       "Gaudi",
       "/dev/accel/accel",
       {"habana-container-runtime", "habana-container-hook"},
       "habanalabs-container-runtime",
       ""},
  };
  return v;
}

unsigned count_vendor(const HostModel& m, Vendor v) {
  unsigned n = 0;
  for (const auto& a : m.accelerators)
    n += a.vendor == v ? 1 : 0;
  return n;
}

// "/dev/nvidia3" is a device's node; "/dev/nvidiactl" and "/dev/nvidia-uvm" are not.
bool is_device_node(const std::string& path, const char* prefix) {
  std::string p = prefix;
  return path.size() > p.size() && path.starts_with(p) &&
         std::isdigit(static_cast<unsigned char>(path[p.size()]));
}

// "550.54.15" for ".../libcuda.so.550.54.15" or ".../libnvidia-ml.so.550.54.15": the driver
// release an NVIDIA user-space library belongs to; "" for anything else.
std::string nvidia_library_version(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  if (!name.starts_with("libcuda.so.") && !name.starts_with("libnvidia-")) return "";
  auto at = name.find(".so.");
  if (at == std::string::npos) return "";
  std::string version = name.substr(at + 4);
  bool ok = version.find('.') != std::string::npos &&
            std::all_of(version.begin(), version.end(), [](char ch) {
              return std::isdigit(static_cast<unsigned char>(ch)) || ch == '.';
            });
  return ok ? version : "";
}

std::string plural(unsigned n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

Finding make(const char* id, Severity severity, std::string subject) {
  Finding f;
  f.id = id;
  f.severity = severity;
  f.subject = std::move(subject);
  return f;
}

void check_cdi_enabled(const ContainerRuntimeFacts& r, bool nvidia, Findings& out) {
  const RuntimeConfigFacts& c = r.containerd;
  // By the configuration's version's default (cdi_enabled); without a configuration file the
  // version, and so the default, is unknown: said nothing.
  if (auto on = cdi_enabled(c)) {
    if (!*on) {
      const char* table = c.config_version >= 3 ? "plugins.\"io.containerd.cri.v1.runtime\""
                                                : "plugins.\"io.containerd.grpc.v1.cri\"";
      Finding f = make("runtime.cdi-disabled", Severity::warning, "containerd");
      f.observed = c.enable_cdi
                       ? c.config_path + " sets enable_cdi = false"
                       : c.config_path + " (config version " + std::to_string(c.config_version) +
                             ") leaves enable_cdi at containerd 1.x's default, false";
      f.expected =
          "enable_cdi = true, so the DRA driver's and device plugin's CDI devices reach "
          "containers";
      f.remedy.summary = std::string(
                             "set enable_cdi = true and cdi_spec_dirs = [\"/etc/cdi\", "
                             "\"/var/run/cdi\"] under [") +
                         table + "] in " + c.config_path + ", then restart containerd";
      if (nvidia)
        f.remedy.commands.push_back(
            "nvidia-ctk runtime configure --runtime=containerd --cdi.enabled");
      f.remedy.commands.push_back("systemctl restart containerd");
      out.push_back(std::move(f));
    }
  }
  const RuntimeConfigFacts& o = r.crio;
  if (auto on = cdi_enabled(o); on && !*on) {
    Finding f = make("runtime.cdi-disabled", Severity::warning, "cri-o");
    f.observed = "cdi_spec_dirs = [] in the [crio.runtime] configuration: CRI-O reads no CDI spec";
    f.expected = "cdi_spec_dirs naming /etc/cdi and /var/run/cdi (CRI-O's default)";
    f.remedy.summary =
        "remove the empty cdi_spec_dirs override from " +
        (o.config_path.empty() ? std::string("the CRI-O configuration") : o.config_path) +
        " and restart CRI-O";
    f.remedy.commands = {"systemctl restart crio"};
    out.push_back(std::move(f));
  }
}

void check_specs(const AuditContext& c, const ContainerRuntimeFacts& r, Findings& out) {
  const std::string& module = r.nvidia_module_version;
  for (const auto& spec : r.cdi_specs) {
    std::vector<std::string> why;
    if (!spec.problem.empty()) why.push_back(spec.problem);
    if (!spec.missing_paths.empty())
      why.push_back("names what the host lacks: " + join(spec.missing_paths, ", "));
    // A library of another driver release, mounted by a spec made before an upgrade.
    if (!module.empty()) {
      for (const auto& p : spec.host_paths) {
        std::string version = nvidia_library_version(p);
        if (!version.empty() && version != module) {
          why.push_back("mounts " + p + " of driver " + version + ", the kernel module is " +
                        module);
          break;
        }
      }
    }
    if (why.empty()) continue;
    Finding f = make("runtime.cdi-spec-stale", Severity::warning, spec.path);
    f.observed = join(why, "; ");
    f.expected = "every CDI spec readable and naming only device nodes and files the host has";
    f.remedy.summary =
        "regenerate the spec (a runtime refuses to start a container whose CDI "
        "device it cannot apply) or remove it";
    if (spec.kind.starts_with("nvidia.com/"))
      f.remedy.commands.push_back(vendor_runtimes()[0].generate_command);
    else if (spec.kind.starts_with("amd.com/"))
      f.remedy.commands.push_back(vendor_runtimes()[1].generate_command);
    else if (spec.kind.starts_with("polyaccel.io/"))
      f.remedy.commands.push_back("polyaccel cdi generate --cdi-dir " +
                                  spec.path.substr(0, spec.path.rfind('/')));
    out.push_back(std::move(f));
  }

  // Every vendor with devices here needs a spec that names them all.
  for (const auto& v : vendor_runtimes()) {
    unsigned devices = count_vendor(c.model, v.vendor);
    if (devices == 0) continue;
    std::map<std::string, bool> nodes;  // per-device nodes the specs name
    for (const auto& spec : r.cdi_specs) {
      if (!spec.problem.empty()) continue;
      for (const auto& p : spec.device_nodes) {
        if (is_device_node(p, v.node_prefix)) nodes[p] = true;
      }
    }
    if (nodes.size() >= devices) continue;
    Finding f =
        make("runtime.cdi-spec-missing", Severity::warning, std::string(v.label) + " accelerators");
    f.observed = nodes.empty()
                     ? std::string("no CDI spec names a ") + v.label + " device"
                     : "CDI specs name " + plural(static_cast<unsigned>(nodes.size()), "device") +
                           ", the host has " + std::to_string(devices);
    f.expected = std::string("a CDI spec for each of the ") + std::to_string(devices) + " " +
                 v.label + " devices";
    f.remedy.summary =
        "generate the CDI specs for this host's devices (a runtime with CDI on "
        "finds them under /etc/cdi or /var/run/cdi)";
    f.remedy.commands.push_back("polyaccel cdi generate --cdi-dir /var/run/cdi");
    if (*v.generate_command) f.remedy.commands.push_back(v.generate_command);
    out.push_back(std::move(f));
  }
}

void check_toolkits(const AuditContext& c, const ContainerRuntimeFacts& r, Findings& out) {
  for (const auto& v : vendor_runtimes()) {
    if (count_vendor(c.model, v.vendor) == 0) continue;
    bool present = std::any_of(v.tools.begin(), v.tools.end(),
                               [&](const char* t) { return r.toolkit_programs.count(t) > 0; });
    if (present) continue;
    Finding f =
        make("runtime.toolkit-missing", Severity::warning, std::string(v.label) + " toolkit");
    f.observed = std::string("none of ") + [&] {
      std::vector<std::string> names(v.tools.begin(), v.tools.end());
      return join(names, ", ");
    }() + " in /usr/bin, /usr/local/bin, /usr/sbin";
    f.expected = std::string("the ") + v.label +
                 " container toolkit, which containers without CDI and its CDI generator need";
    f.remedy.summary =
        std::string("install ") + v.toolkit_package + " from the vendor's repository";
    f.remedy.commands = {std::string("apt-get install ") + v.toolkit_package};
    out.push_back(std::move(f));
  }
}

void check_nvidia_daemons(const AuditContext& c, const ContainerRuntimeFacts& r, Findings& out) {
  if (!r.processes_known) return;
  unsigned nvswitches = 0;
  for (const auto& [address, fn] : c.facts.pci) {
    if (fn.vendor_id == 0x10de && (fn.class_code >> 8) == 0x0680) ++nvswitches;
  }
  if (nvswitches > 0 && count_vendor(c.model, Vendor::nvidia) > 0 &&
      !r.process_running("nv-fabricmanager")) {
    Finding f = make("runtime.fabricmanager", Severity::critical, "host");
    f.observed = plural(nvswitches, "NVSwitch") + " and no nv-fabricmanager running";
    f.expected =
        "nvidia-fabricmanager running: without it CUDA cannot start on an NVSwitch "
        "board (cudaErrorSystemNotReady)";
    f.remedy.summary = "install nvidia-fabricmanager of the driver's branch and start it";
    f.remedy.commands = {"systemctl enable --now nvidia-fabricmanager"};
    out.push_back(std::move(f));
  }
  // With persistence known from the library, gpu.persistence judges; here only where it is not.
  bool any_nvidia = false, unknown = false;
  for (const auto& a : c.model.accelerators) {
    if (a.vendor != Vendor::nvidia) continue;
    any_nvidia = true;
    if (!a.inventory || !a.inventory->persistence_mode) unknown = true;
  }
  if (any_nvidia && unknown && !r.process_running("nvidia-persistenced")) {
    Finding f = make("runtime.persistenced", Severity::warning, "host");
    f.observed = "nvidia-persistenced not running, persistence mode not known from NVML";
    f.expected = "nvidia-persistenced running, so the driver stays initialised between jobs";
    f.remedy.summary =
        "start nvidia-persistenced (every job start otherwise pays the GPU's "
        "initialisation)";
    f.remedy.commands = {"systemctl enable --now nvidia-persistenced"};
    out.push_back(std::move(f));
  }
}

void check_driver_match(const AuditContext& c, const ContainerRuntimeFacts& r, Findings& out) {
  const std::string& module = r.nvidia_module_version;
  if (module.empty()) return;
  std::vector<std::string> others;
  for (const auto& v : r.nvml_library_versions) {
    if (v != module) others.push_back(v);
  }
  bool library_matches = r.nvml_library_versions.count(module) > 0;
  std::string reported;
  for (const auto& a : c.model.accelerators) {
    if (a.inventory && !a.inventory->driver_version.empty() &&
        a.inventory->driver_version != module)
      reported = a.inventory->driver_version;
  }
  if ((r.nvml_library_versions.empty() || library_matches) && reported.empty()) return;
  Finding f = make("runtime.driver-mismatch", Severity::critical, "NVIDIA driver");
  f.observed = "kernel module " + module + ", user-space library " +
               (reported.empty() ? join(others, ", ") : reported);
  f.expected =
      "the kernel module and libnvidia-ml of one release (NVML otherwise fails with "
      "\"Driver/library version mismatch\")";
  f.remedy.summary =
      "reboot into the installed driver, or reload the module after stopping "
      "every GPU client; reinstall the user-space packages if they are the odd ones";
  f.remedy.commands = {"systemctl stop nvidia-persistenced nvidia-fabricmanager",
                       "rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia"};
  out.push_back(std::move(f));
}

}  // namespace

Findings check_runtime(const AuditContext& c) {
  Findings out;
  const ContainerRuntimeFacts& r = c.facts.runtime;
  if (c.model.accelerators.empty()) return out;
  if (r.any_runtime()) {
    check_cdi_enabled(r, count_vendor(c.model, Vendor::nvidia) > 0, out);
    check_specs(c, r, out);
    check_toolkits(c, r, out);
  }
  check_nvidia_daemons(c, r, out);
  check_driver_match(c, r, out);
  return out;
}

}  // namespace polyaccel::audit
