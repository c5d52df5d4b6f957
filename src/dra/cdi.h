// Container Device Interface (CDI) specs for the node's DRA devices: what a container runtime
// (containerd 2.x, CRI-O, podman) adds to a container for a device named
// "polyaccel.io/<class>=<device>". Pure builders from the HostModel, the pool (slices.h) and the
// device nodes read once through a root; writing and removing spec files is the only I/O.
//
//   NVIDIA  /dev/nvidia<N>, /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools; a MIG device
//           also its /dev/nvidia-caps/nvidia-cap<N> (gi and ci access, from
//           /proc/driver/nvidia-caps/mig-minors); NVIDIA_VISIBLE_DEVICES=<GPU or MIG UUIDs>;
//           with a driver root (cdi_driver.h): the driver's user-space files as read-only bind
//           mounts and the create-symlinks and update-ldcache hooks (polyaccel-cdi-hook)
//   AMD     /dev/kfd and /dev/dri/card<N>, /dev/dri/renderD<N> (as amd-ctk: ROCm's user space
//           is the image's)
//   Gaudi   /dev/accel/accel<N>, /dev/accel/accel_controlD<N>, the uverbs node of its on-chip
//           NIC (hlib_<N>) when there is one, as habana-container-runtime adds them;
//           HABANA_VISIBLE_DEVICES=<N>
//   RDMA    /dev/infiniband/uverbs<N> of its RDMA device, /dev/infiniband/rdma_cm;
//           NCCL_IB_HCA=<its RDMA devices> in a claim's spec
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/host_model.h"
#include "dra/cdi_driver.h"
#include "dra/slices.h"
#include "kube/device_nodes.h"

namespace polyaccel::dra {

// The CDI spec version written: the lowest our specs' content needs (0.5.0: device names that
// begin with a digit, a hostPath other than the path), as the CDI library's own producers do
// (MinimumRequiredVersion). A runtime skips a spec newer than its CDI library knows, saying only
// "unresolvable CDI devices": podman 4.3 (Debian 12) and containerd 1.7 know up to 0.5.0; every
// later runtime reads 0.5.0 too. --cdi-version writes a later one.
inline constexpr const char* kCdiVersion = "0.5.0";
inline constexpr const char* kCdiVendor = "polyaccel.io";
inline constexpr const char* kCdiDir = "/var/run/cdi";

struct CdiDeviceNode {
  std::string path;       // in the container
  std::string host_path;  // on the host
  std::string permissions = "rw";
  bool operator==(const CdiDeviceNode&) const = default;
};

struct CdiEdits {
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<CdiDeviceNode> device_nodes;
  std::vector<CdiMount> mounts;
  std::vector<CdiHook> hooks;
  bool empty() const {
    return env.empty() && device_nodes.empty() && mounts.empty() && hooks.empty();
  }
};

struct CdiDevice {
  std::string name;  // unique in the spec: letters, digits, '_', '-', '.', ':'
  CdiEdits edits;
};

struct CdiSpec {
  std::string version = kCdiVersion;
  std::string kind;  // "polyaccel.io/gpu"
  std::vector<CdiDevice> devices;
  CdiEdits edits;           // applied to a container that gets any device of the spec
  std::string file_suffix;  // a claim's spec: "_<claim uid>", one file per claim

  // "polyaccel.io/gpu=gpu-0"
  std::string qualified_name(const std::string& device) const { return kind + "=" + device; }
  // The spec's file name in a CDI directory: "polyaccel.io-gpu.json",
  // "polyaccel.io-claim_<uid>.json".
  std::string file_name() const;
};

// What the specs need from the host beyond the HostModel, read once through a root.
struct CdiHost {
  std::vector<DeviceNodes> accelerators;   // per HostModel accelerator (kube/device_nodes.h)
  std::map<std::string, unsigned> uverbs;  // RDMA device ("mlx5_0") → N of /dev/infiniband/uverbsN
  std::map<std::string, unsigned> mig_caps;   // "gpu0/gi1/access" → minor of nvidia-cap<minor>
  std::map<unsigned, unsigned> gaudi_uverbs;  // accel minor N → K of the uverbsK of hlib_<N>
  NvidiaDriverFiles nvidia_driver;            // empty unless a driver root was read
};
// `driver_root` empty: the NVIDIA driver's files are not looked for (device nodes only).
CdiHost read_cdi_host(const HostModel& model, const std::string& root,
                      const std::string& driver_root = {},
                      const std::string& host_driver_root = {});

struct CdiOptions {
  std::string version = kCdiVersion;
  std::string dev_root = "/dev";  // where the host's device nodes are (hostPath)
  // The host path of the program the runtime runs as the NVIDIA hooks (polyaccel-cdi-hook);
  // empty: no hooks (mounts only; ldconfig in the container then does not know the libraries).
  std::string hook_path;
};

// The CDI class of a device: "gpu" (GPUs, MIG devices, partitions), "hpu", "nic" (NICs, VFs).
const char* cdi_class(DeviceKind kind);

// One spec per class with a device per pool device (for `polyaccel cdi generate` and the device
// plugin's cdi_devices). A device whose nodes are unknown (driver not loaded) is left out and
// named in `skipped`.
std::vector<CdiSpec> node_specs(const HostModel& model, const Pool& pool, const CdiHost& host,
                                const CdiOptions& options, std::vector<std::string>* skipped);

// The spec of one prepared claim, kind "polyaccel.io/claim": a device per allocated device
// ("<claim uid>-<device>", or "<claim uid>-<device>-<share id>" for a share of a device that
// allows multiple allocations: `share_ids`, parallel to `devices`, empty or "" where a device is
// not shared) and the claim-wide environment. Error when a device's nodes are unknown.
Result<CdiSpec> claim_spec(const HostModel& model, const std::vector<const Device*>& devices,
                           const CdiHost& host, const std::string& claim_uid,
                           const CdiOptions& options,
                           const std::vector<std::string>& share_ids = {});

nlohmann::json to_json(const CdiSpec& spec);

// Atomically, as <dir>/<file_name()>; the directory is created when missing.
Status write_cdi_spec(const std::filesystem::path& dir, const CdiSpec& spec);
// Removes <dir>/<file>; absent is fine.
Status remove_cdi_spec(const std::filesystem::path& dir, const std::string& file);

}  // namespace polyaccel::dra
