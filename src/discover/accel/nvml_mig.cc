// MIG control through NVML: mode, GPU instances at explicit placements, compute instances.
//
// The library is opened by the same loader as the NVML backend (POLYACCEL_NVML_LIB or
// libnvidia-ml.so.1) and kept initialised while the control lives, so that one command sees the
// driver's state change under it. Every GPU instance gets one compute instance that spans it, as
// mig-parted and the GPU Operator create them.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "core/pci_address.h"
#include "discover/accel/library.h"
#include "discover/accel/nvml_abi.h"
#include "discover/accel/partition.h"

namespace polyaccel {
namespace {

using namespace nvml;  // NOLINT(google-build-using-namespace): the NVML ABI names

struct MigApi {
  fn::nvmlInit_v2* nvmlInit_v2 = nullptr;
  fn::nvmlShutdown* nvmlShutdown = nullptr;
  fn::nvmlErrorString* nvmlErrorString = nullptr;
  fn::nvmlDeviceGetCount_v2* nvmlDeviceGetCount_v2 = nullptr;
  fn::nvmlDeviceGetHandleByIndex_v2* nvmlDeviceGetHandleByIndex_v2 = nullptr;
  fn::nvmlDeviceGetPciInfo_v3* nvmlDeviceGetPciInfo_v3 = nullptr;
  fn::nvmlDeviceGetName* nvmlDeviceGetName = nullptr;
  fn::nvmlDeviceGetUUID* nvmlDeviceGetUUID = nullptr;
  fn::nvmlDeviceGetMemoryInfo* nvmlDeviceGetMemoryInfo = nullptr;
  fn::nvmlDeviceGetMigMode* nvmlDeviceGetMigMode = nullptr;
  fn::nvmlDeviceSetMigMode* nvmlDeviceSetMigMode = nullptr;
  fn::nvmlDeviceGetMaxMigDeviceCount* nvmlDeviceGetMaxMigDeviceCount = nullptr;
  fn::nvmlDeviceGetMigDeviceHandleByIndex* nvmlDeviceGetMigDeviceHandleByIndex = nullptr;
  fn::nvmlDeviceGetGpuInstanceId* nvmlDeviceGetGpuInstanceId = nullptr;
  fn::nvmlDeviceGetComputeRunningProcesses_v3* nvmlDeviceGetComputeRunningProcesses_v3 = nullptr;
  fn::nvmlDeviceGetGpuInstanceProfileInfo* nvmlDeviceGetGpuInstanceProfileInfo = nullptr;
  fn::nvmlDeviceGetGpuInstancePossiblePlacements_v2* nvmlDeviceGetGpuInstancePossiblePlacements_v2 =
      nullptr;
  fn::nvmlDeviceCreateGpuInstanceWithPlacement* nvmlDeviceCreateGpuInstanceWithPlacement = nullptr;
  fn::nvmlDeviceGetGpuInstances* nvmlDeviceGetGpuInstances = nullptr;
  fn::nvmlDeviceGetGpuInstanceById* nvmlDeviceGetGpuInstanceById = nullptr;
  fn::nvmlGpuInstanceGetInfo* nvmlGpuInstanceGetInfo = nullptr;
  fn::nvmlGpuInstanceDestroy* nvmlGpuInstanceDestroy = nullptr;
  fn::nvmlGpuInstanceGetComputeInstanceProfileInfo* nvmlGpuInstanceGetComputeInstanceProfileInfo =
      nullptr;
  fn::nvmlGpuInstanceCreateComputeInstance* nvmlGpuInstanceCreateComputeInstance = nullptr;
  fn::nvmlGpuInstanceGetComputeInstances* nvmlGpuInstanceGetComputeInstances = nullptr;
  fn::nvmlComputeInstanceDestroy* nvmlComputeInstanceDestroy = nullptr;
  fn::nvmlComputeInstanceGetInfo_v2* nvmlComputeInstanceGetInfo_v2 = nullptr;

  void resolve(SharedLibrary& lib) {
#define POLYACCEL_NVML_RESOLVE(name) lib.resolve(name, #name)
    POLYACCEL_NVML_RESOLVE(nvmlInit_v2);
    POLYACCEL_NVML_RESOLVE(nvmlShutdown);
    POLYACCEL_NVML_RESOLVE(nvmlErrorString);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetCount_v2);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetHandleByIndex_v2);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetPciInfo_v3);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetName);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetUUID);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetMemoryInfo);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetMigMode);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceSetMigMode);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetMaxMigDeviceCount);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetMigDeviceHandleByIndex);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetGpuInstanceId);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetComputeRunningProcesses_v3);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetGpuInstanceProfileInfo);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetGpuInstancePossiblePlacements_v2);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceCreateGpuInstanceWithPlacement);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetGpuInstances);
    POLYACCEL_NVML_RESOLVE(nvmlDeviceGetGpuInstanceById);
    POLYACCEL_NVML_RESOLVE(nvmlGpuInstanceGetInfo);
    POLYACCEL_NVML_RESOLVE(nvmlGpuInstanceDestroy);
    POLYACCEL_NVML_RESOLVE(nvmlGpuInstanceGetComputeInstanceProfileInfo);
    POLYACCEL_NVML_RESOLVE(nvmlGpuInstanceCreateComputeInstance);
    POLYACCEL_NVML_RESOLVE(nvmlGpuInstanceGetComputeInstances);
    POLYACCEL_NVML_RESOLVE(nvmlComputeInstanceDestroy);
    POLYACCEL_NVML_RESOLVE(nvmlComputeInstanceGetInfo_v2);
#undef POLYACCEL_NVML_RESOLVE
  }
};

// The compute instance profile that spans a GPU instance of `slices` compute slices.
unsigned full_compute_profile(unsigned slices) {
  switch (slices) {
    case 1:
      return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
    case 2:
      return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
    case 3:
      return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
    case 4:
      return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
    case 6:
      return NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE;
    case 8:
      return NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE;
    default:
      return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
  }
}

// A profile's name as nvidia-smi and go-nvlib print it: "<slices>g.<GB>gb", GB rounded from the
// profile's share of eighths of the GPU's memory; the suffix from the profile enum.
std::string profile_name(unsigned kind, const nvmlGpuInstanceProfileInfo_t& info,
                         unsigned long long total_mib) {
  double total_gib = std::ceil(static_cast<double>(total_mib) / 1024.0);
  double eighths =
      total_mib
          ? std::ceil(8.0 * static_cast<double>(info.memorySizeMB) / static_cast<double>(total_mib))
          : 0;
  auto gb = static_cast<unsigned>(std::lround(eighths / 8.0 * total_gib));
  std::string name = std::to_string(info.sliceCount) + "g." + std::to_string(gb) + "gb";
  switch (kind) {
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1:
    case 8:  // 2 slices REV1
      return name + "+me";
    case 10:
    case 11:
    case 12:
    case 0x11:  // NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX (CUDA 13.2.1 and later)
      return name + "+gfx";
    case 13:
    case 14:
      return name + "-me";
    case 15:
    case 16:
      return name + "+me.all";
    default:
      return name;
  }
}

class NvmlMigControl final : public MigControl {
 public:
  NvmlMigControl(SharedLibrary lib, MigApi api) : lib_(std::move(lib)), api_(api) {}
  ~NvmlMigControl() override {
    if (api_.nvmlShutdown) api_.nvmlShutdown();
  }

  Result<std::vector<MigGpu>> gpus() override {
    unsigned count = 0;
    if (nvmlReturn_t r = api_.nvmlDeviceGetCount_v2(&count); r != NVML_SUCCESS) {
      return failure("nvmlDeviceGetCount_v2", r);
    }
    std::vector<MigGpu> out;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t dev = nullptr;
      if (api_.nvmlDeviceGetHandleByIndex_v2(i, &dev) != NVML_SUCCESS) continue;
      unsigned current = 0, pending = 0;
      if (!api_.nvmlDeviceGetMigMode ||
          api_.nvmlDeviceGetMigMode(dev, &current, &pending) != NVML_SUCCESS) {
        continue;  // not MIG-capable
      }
      MigGpu g;
      g.index = i;
      g.mig_enabled = current == NVML_FEATURE_ENABLED;
      g.mig_pending = pending == NVML_FEATURE_ENABLED;
      nvmlPciInfo_t pci{};
      if (api_.nvmlDeviceGetPciInfo_v3 && api_.nvmlDeviceGetPciInfo_v3(dev, &pci) == NVML_SUCCESS) {
        auto a = PciAddress::parse(std::string(pci.busId, ::strnlen(pci.busId, sizeof pci.busId)));
        if (a) g.pci_bus_id = a->to_string();
        g.pci_id = pci.pciDeviceId;
      }
      g.name = text(api_.nvmlDeviceGetName, dev, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
      if (g.mig_enabled) {
        g.library_geometry = geometry(dev, g.name);
        auto instances = list(dev, g.library_geometry);
        if (!instances) return instances.error();
        g.instances = std::move(*instances);
      }
      out.push_back(std::move(g));
    }
    return out;
  }

  Result<MigModeChange> set_mig_mode(unsigned index, bool enabled) override {
    auto dev = device(index);
    if (!dev) return dev.error();
    unsigned current = 0, pending = 0;
    if (nvmlReturn_t r = api_.nvmlDeviceGetMigMode(*dev, &current, &pending); r != NVML_SUCCESS) {
      return failure("nvmlDeviceGetMigMode", r);
    }
    unsigned want = enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    if (current == want && pending == want) return MigModeChange::unchanged;
    if (!api_.nvmlDeviceSetMigMode) return missing("nvmlDeviceSetMigMode");
    nvmlReturn_t activation = NVML_SUCCESS;
    if (nvmlReturn_t r = api_.nvmlDeviceSetMigMode(*dev, want, &activation); r != NVML_SUCCESS) {
      return failure("nvmlDeviceSetMigMode", r);
    }
    if (api_.nvmlDeviceGetMigMode(*dev, &current, &pending) != NVML_SUCCESS) {
      return MigModeChange::pending_reset;
    }
    return current == want ? MigModeChange::applied : MigModeChange::pending_reset;
  }

  Result<MigPlacedInstance> create(unsigned index, unsigned profile_id, unsigned start) override {
    auto dev = device(index);
    if (!dev) return dev.error();
    if (!api_.nvmlDeviceCreateGpuInstanceWithPlacement || !api_.nvmlGpuInstanceGetInfo) {
      return missing("nvmlDeviceCreateGpuInstanceWithPlacement");
    }
    // The profile id's placement size, from the library.
    auto info = profile_info_by_id(*dev, profile_id);
    if (!info) return info.error();
    nvmlGpuInstancePlacement_t placement{start, 0};
    if (auto size = placement_size(*dev, profile_id)) placement.size = *size;
    nvmlGpuInstance_t gi = nullptr;
    if (nvmlReturn_t r =
            api_.nvmlDeviceCreateGpuInstanceWithPlacement(*dev, profile_id, &placement, &gi);
        r != NVML_SUCCESS) {
      return failure("nvmlDeviceCreateGpuInstanceWithPlacement(profile " +
                         std::to_string(profile_id) + ", start " + std::to_string(start) + ")",
                     r);
    }
    nvmlGpuInstanceInfo_t gi_info{};
    api_.nvmlGpuInstanceGetInfo(gi, &gi_info);
    MigPlacedInstance made;
    made.gpu_instance_id = gi_info.id;
    made.profile_id = gi_info.profileId;
    made.start = gi_info.placement.start;
    made.size = gi_info.placement.size;
    made.has_compute_instance = false;
    nvmlComputeInstanceProfileInfo_t ci_info{};
    nvmlComputeInstance_t ci = nullptr;
    nvmlReturn_t r = api_.nvmlGpuInstanceGetComputeInstanceProfileInfo
                         ? api_.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                               gi, full_compute_profile(info->sliceCount),
                               NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci_info)
                         : NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS && api_.nvmlGpuInstanceCreateComputeInstance) {
      r = api_.nvmlGpuInstanceCreateComputeInstance(gi, ci_info.id, &ci);
    }
    if (r != NVML_SUCCESS || !ci) {
      // Leave nothing half made: a GPU instance without compute instance serves nobody.
      api_.nvmlGpuInstanceDestroy(gi);
      return failure("nvmlGpuInstanceCreateComputeInstance (GPU instance " +
                         std::to_string(made.gpu_instance_id) + ", destroyed again)",
                     r == NVML_SUCCESS ? NVML_ERROR_UNKNOWN : r);
    }
    nvmlComputeInstanceInfo_t ci_desc{};
    if (api_.nvmlComputeInstanceGetInfo_v2 &&
        api_.nvmlComputeInstanceGetInfo_v2(ci, &ci_desc) == NVML_SUCCESS) {
      made.compute_instance_id = ci_desc.id;
    }
    made.has_compute_instance = true;
    fill_mig_device(*dev, made);
    return made;
  }

  Status destroy(unsigned index, unsigned gpu_instance_id) override {
    auto dev = device(index);
    if (!dev) return dev.error();
    if (!api_.nvmlDeviceGetGpuInstanceById || !api_.nvmlGpuInstanceDestroy) {
      return missing("nvmlGpuInstanceDestroy");
    }
    nvmlGpuInstance_t gi = nullptr;
    if (nvmlReturn_t r = api_.nvmlDeviceGetGpuInstanceById(*dev, gpu_instance_id, &gi);
        r != NVML_SUCCESS) {
      return failure("nvmlDeviceGetGpuInstanceById(" + std::to_string(gpu_instance_id) + ")", r);
    }
    for (nvmlComputeInstance_t ci : compute_instances(gi)) {
      if (nvmlReturn_t r = api_.nvmlComputeInstanceDestroy(ci); r != NVML_SUCCESS) {
        return failure(
            "nvmlComputeInstanceDestroy (GPU instance " + std::to_string(gpu_instance_id) + ")", r);
      }
    }
    if (nvmlReturn_t r = api_.nvmlGpuInstanceDestroy(gi); r != NVML_SUCCESS) {
      return failure("nvmlGpuInstanceDestroy(" + std::to_string(gpu_instance_id) + ")", r);
    }
    return Ok{};
  }

 private:
  Error failure(const std::string& call, nvmlReturn_t r) const {
    std::string why = api_.nvmlErrorString ? api_.nvmlErrorString(r) : "error";
    return Error{ErrorCode::io, call, why + " (NVML " + std::to_string(r) + ")", {}};
  }
  Error missing(const std::string& symbol) const {
    return Error{ErrorCode::unsupported, lib_.path(), "has no " + symbol,
                 "MIG control needs an NVML from driver R470 or later"};
  }

  Result<nvmlDevice_t> device(unsigned index) const {
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t r = api_.nvmlDeviceGetHandleByIndex_v2(index, &dev); r != NVML_SUCCESS) {
      return failure("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(index) + ")", r);
    }
    return dev;
  }

  template <class Fn>
  static std::string text(Fn* fn, nvmlDevice_t dev, unsigned size) {
    if (!fn) return {};
    std::array<char, 128> buf{};
    if (fn(dev, buf.data(), std::min<unsigned>(size, buf.size())) != NVML_SUCCESS) return {};
    return std::string(buf.data(), ::strnlen(buf.data(), buf.size()));
  }

  // The profile infos the device answers for, by enum.
  std::vector<std::pair<unsigned, nvmlGpuInstanceProfileInfo_t>> profile_infos(
      nvmlDevice_t dev) const {
    std::vector<std::pair<unsigned, nvmlGpuInstanceProfileInfo_t>> out;
    if (!api_.nvmlDeviceGetGpuInstanceProfileInfo) return out;
    for (unsigned kind = 0; kind < NVML_GPU_INSTANCE_PROFILE_COUNT; ++kind) {
      nvmlGpuInstanceProfileInfo_t info{};
      if (api_.nvmlDeviceGetGpuInstanceProfileInfo(dev, kind, &info) == NVML_SUCCESS) {
        out.emplace_back(kind, info);
      }
    }
    return out;
  }

  Result<nvmlGpuInstanceProfileInfo_t> profile_info_by_id(nvmlDevice_t dev, unsigned id) const {
    for (const auto& [kind, info] : profile_infos(dev)) {
      if (info.id == id) return info;
    }
    return Error{ErrorCode::bad_input,
                 "profile id " + std::to_string(id),
                 "the GPU has no such GPU instance profile",
                 {}};
  }

  std::vector<nvmlGpuInstancePlacement_t> placements(nvmlDevice_t dev, unsigned id) const {
    std::vector<nvmlGpuInstancePlacement_t> out(NVML_MAX_GPU_INSTANCES * 2);
    unsigned count = static_cast<unsigned>(out.size());
    if (!api_.nvmlDeviceGetGpuInstancePossiblePlacements_v2 ||
        api_.nvmlDeviceGetGpuInstancePossiblePlacements_v2(dev, id, out.data(), &count) !=
            NVML_SUCCESS) {
      return {};
    }
    out.resize(count);
    return out;
  }

  std::optional<unsigned> placement_size(nvmlDevice_t dev, unsigned id) const {
    auto p = placements(dev, id);
    if (p.empty()) return std::nullopt;
    return p.front().size;
  }

  // The GPU's own MIG geometry as the library describes it.
  std::optional<MigGeometry> geometry(nvmlDevice_t dev, const std::string& name) const {
    auto infos = profile_infos(dev);
    if (infos.empty()) return std::nullopt;
    unsigned long long total_mib = 0;
    nvmlMemory_t mem{};
    if (api_.nvmlDeviceGetMemoryInfo && api_.nvmlDeviceGetMemoryInfo(dev, &mem) == NVML_SUCCESS) {
      total_mib = mem.total >> 20;
    }
    MigGeometry g;
    g.model = name;
    g.aliases = {name};
    g.compute_slices = g.memory_slices = g.max_instances = 0;
    for (const auto& [kind, info] : infos) {
      MigProfile p;
      p.name = profile_name(kind, info, total_mib);
      p.profile_id = info.id;
      p.profile_kind = kind;
      p.compute_slices = info.sliceCount;
      p.max_instances = info.instanceCount;
      p.memory_mib = info.memorySizeMB;
      for (const auto& pl : placements(dev, info.id)) {
        p.starts.push_back(pl.start);
        p.memory_slices = pl.size;
        g.memory_slices = std::max(g.memory_slices, pl.start + pl.size);
      }
      g.compute_slices = std::max(g.compute_slices, info.sliceCount);
      g.max_instances = std::max(g.max_instances, info.instanceCount);
      g.profiles.push_back(std::move(p));
    }
    return g;
  }

  std::vector<nvmlComputeInstance_t> compute_instances(nvmlGpuInstance_t gi) const {
    std::vector<nvmlComputeInstance_t> out;
    if (!api_.nvmlGpuInstanceGetComputeInstances) return out;
    for (unsigned kind = 0; kind <= NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE; ++kind) {
      nvmlComputeInstanceProfileInfo_t info{};
      if (!api_.nvmlGpuInstanceGetComputeInstanceProfileInfo ||
          api_.nvmlGpuInstanceGetComputeInstanceProfileInfo(
              gi, kind, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info) != NVML_SUCCESS) {
        continue;
      }
      std::array<nvmlComputeInstance_t, NVML_MAX_GPU_INSTANCES> cis{};
      unsigned count = 0;
      if (api_.nvmlGpuInstanceGetComputeInstances(gi, info.id, cis.data(), &count) ==
          NVML_SUCCESS) {
        out.insert(out.end(), cis.begin(), cis.begin() + std::min<unsigned>(count, cis.size()));
      }
    }
    return out;
  }

  // UUID and processes of the MIG device that belongs to the instance.
  void fill_mig_device(nvmlDevice_t dev, MigPlacedInstance& inst) const {
    unsigned max = 0;
    if (!api_.nvmlDeviceGetMaxMigDeviceCount || !api_.nvmlDeviceGetMigDeviceHandleByIndex ||
        !api_.nvmlDeviceGetGpuInstanceId ||
        api_.nvmlDeviceGetMaxMigDeviceCount(dev, &max) != NVML_SUCCESS) {
      return;
    }
    for (unsigned i = 0; i < max; ++i) {
      nvmlDevice_t mig = nullptr;
      unsigned gi = 0;
      if (api_.nvmlDeviceGetMigDeviceHandleByIndex(dev, i, &mig) != NVML_SUCCESS ||
          api_.nvmlDeviceGetGpuInstanceId(mig, &gi) != NVML_SUCCESS || gi != inst.gpu_instance_id) {
        continue;
      }
      inst.uuid = text(api_.nvmlDeviceGetUUID, mig, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
      if (!api_.nvmlDeviceGetComputeRunningProcesses_v3) return;
      std::array<nvmlProcessInfo_t, 64> procs{};
      unsigned n = static_cast<unsigned>(procs.size());
      if (api_.nvmlDeviceGetComputeRunningProcesses_v3(mig, &n, procs.data()) == NVML_SUCCESS) {
        for (unsigned k = 0; k < std::min<unsigned>(n, procs.size()); ++k)
          inst.pids.push_back(procs[k].pid);
      }
      return;
    }
  }

  Result<std::vector<MigPlacedInstance>> list(nvmlDevice_t dev,
                                              const std::optional<MigGeometry>& geo) const {
    std::vector<MigPlacedInstance> out;
    if (!api_.nvmlDeviceGetGpuInstances || !api_.nvmlGpuInstanceGetInfo) return out;
    for (const auto& [kind, info] : profile_infos(dev)) {
      std::array<nvmlGpuInstance_t, NVML_MAX_GPU_INSTANCES> gis{};
      unsigned count = 0;
      if (nvmlReturn_t r = api_.nvmlDeviceGetGpuInstances(dev, info.id, gis.data(), &count);
          r != NVML_SUCCESS) {
        return failure("nvmlDeviceGetGpuInstances", r);
      }
      for (unsigned k = 0; k < std::min<unsigned>(count, gis.size()); ++k) {
        nvmlGpuInstanceInfo_t gi{};
        if (api_.nvmlGpuInstanceGetInfo(gis[k], &gi) != NVML_SUCCESS) continue;
        MigPlacedInstance inst;
        inst.gpu_instance_id = gi.id;
        inst.profile_id = gi.profileId;
        inst.start = gi.placement.start;
        inst.size = gi.placement.size;
        if (geo) {
          if (const MigProfile* p = geo->profile_by_id(gi.profileId)) inst.profile = p->name;
        }
        auto cis = compute_instances(gis[k]);
        inst.has_compute_instance = !cis.empty();
        if (!cis.empty() && api_.nvmlComputeInstanceGetInfo_v2) {
          nvmlComputeInstanceInfo_t ci{};
          if (api_.nvmlComputeInstanceGetInfo_v2(cis.front(), &ci) == NVML_SUCCESS) {
            inst.compute_instance_id = ci.id;
          }
        }
        fill_mig_device(dev, inst);
        out.push_back(std::move(inst));
      }
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
    return out;
  }

  SharedLibrary lib_;
  MigApi api_;
};

}  // namespace

Result<std::unique_ptr<MigControl>> open_nvml_mig_control() {
  std::string path = library_path("POLYACCEL_NVML_LIB", "libnvidia-ml.so.1");
  auto lib = SharedLibrary::open(path, "NVML");
  if (!lib) return lib.error();
  MigApi api;
  api.resolve(*lib);
  if (!api.nvmlInit_v2 || !api.nvmlDeviceGetCount_v2 || !api.nvmlDeviceGetHandleByIndex_v2 ||
      !api.nvmlDeviceGetMigMode) {
    return Error{ErrorCode::unsupported, path, "lacks the NVML calls MIG needs", {}};
  }
  if (nvmlReturn_t r = api.nvmlInit_v2(); r != NVML_SUCCESS) {
    std::string why = api.nvmlErrorString ? api.nvmlErrorString(r) : "error";
    return Error{ErrorCode::io, path, "nvmlInit_v2 failed: " + why, {}};
  }
  return std::unique_ptr<MigControl>(std::make_unique<NvmlMigControl>(std::move(*lib), api));
}

}  // namespace polyaccel
