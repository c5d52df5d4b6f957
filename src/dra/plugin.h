// The DRA kubelet plugin (../shared/reference/kubernetes/dra-kubelet-api.md 2, 3): DRAPlugin v1
// and v1beta1 on <plugin dir>/dra.sock, and the plugin watcher's Registration service on
// <registry dir>/<driver>-reg.sock (created last, removed on stop).
//
// NodePrepareResources reads each claim's allocation (through ClaimLookup: the API server), keeps
// the devices of our driver and pool, writes the claim's CDI spec and records the claim in a
// checkpoint file (written atomically) before it answers. A claim that is prepared already is
// answered from the checkpoint, so a repeat, a kubelet restart or an agent restart never prepares
// it twice; a device that another claim holds is refused, unless both hold shares of a device
// that allows multiple allocations (a shared NIC: each share its own CDI device). A MIG device
// whose instance does not exist yet is created first (GPU instance and its compute instance,
// through MigControl, the path of `polyaccel mig apply`), recorded with the claim, and destroyed at
// unprepare; a placement that an instance holds already is refused with the instance's name.
// NodeUnprepareResources removes the CDI spec and the record; an unknown claim is fine
// (idempotent).
//
// Device health for pod status (KEP 4680, kubelet feature gate ResourceHealthStatus): the same
// socket serves DRAResourceHealth v1alpha1, advertised in the registration. NodeWatchResources
// sends the health of every device set_health() gave, at once and on every change, and the whole
// state again every health_resend (kubelet takes a device it has not heard of for 30 s as
// Unknown). A device that is gone is sent as Unknown. stop() ends every stream (the kubelet sees
// the stream end and reports Unknown).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"
#include "discover/accel/partition.h"
#include "dra/cdi.h"
#include "dra/slices.h"
#include "kube_api/client.h"

namespace polyaccel::dra {

// A device of a claim's allocation result (status.allocation.devices.results[]).
struct AllocatedDevice {
  std::string request, driver, pool, device;
  bool admin_access = false;
  // shareID: one allocation of a device that allows several (DRAConsumableCapacity); empty when
  // the device is allocated whole.
  std::string share_id{};
};

struct ClaimInfo {
  std::string uid;
  std::vector<AllocatedDevice> devices;
};

// Reads a ResourceClaim's allocation by namespace and name.
using ClaimLookup =
    std::function<Result<ClaimInfo>(const std::string& ns, const std::string& name)>;
// GET /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>.
ClaimLookup api_claim_lookup(kube_api::KubeClient& client);
// The allocation of a ResourceClaim object; an Error when it has none or is not a claim.
Result<ClaimInfo> parse_claim(const nlohmann::json& claim);

// A MIG instance that prepare created for a claim (dynamic MIG, `--dra-mig-devices all`): it
// is destroyed at unprepare. Instances that existed before are never touched.
struct CreatedMig {
  std::string pci_bus_id;
  unsigned gpu_instance_id = 0, compute_instance_id = 0;
  std::string uuid;
  bool operator==(const CreatedMig&) const = default;
};

struct PreparedDevice {
  std::string request, pool, device;
  std::vector<std::string> cdi_ids;
  std::optional<CreatedMig> created_mig;
  std::string share_id;  // the allocation's shareID, when it is a share of the device
};

struct PreparedClaim {
  std::string uid, ns, name;
  std::vector<PreparedDevice> devices;
  std::string cdi_file;  // in the CDI directory
  // What its CPU and memory devices grant (cpu_devices.h): cpuset.cpus and cpuset.mems, and the
  // memory devices' bytes and hugepages; empty without such devices.
  CpuSet cpus, mems;
  std::uint64_t memory_bytes = 0;
  std::map<std::uint64_t, std::uint64_t> hugepage_bytes;  // page size → bytes
};

struct ClaimRef {
  std::string ns, uid, name;
};

// Per claim uid: the devices, or the error text kubelet gets for that claim.
struct PrepareOutcome {
  std::vector<PreparedDevice> devices;
  std::string error;
};

struct DraPluginOptions {
  std::string driver = kDriverName;
  std::string plugin_dir = "/var/lib/kubelet/plugins/polyaccel.io";  // dra.sock, checkpoint.json
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";
  std::string cdi_dir = kCdiDir;
  CdiOptions cdi;
  ClaimLookup lookup;
  // Writes a claim's status.devices for the NICs just prepared (claim_status.h); none: nothing
  // written. A failure is said once and never fails the prepare.
  std::function<Status(const ClaimRef& claim, const std::vector<nlohmann::json>& entries)>
      write_status;
  // Where the NICs' MACs are read for that status (<root>/sys/class/net/<if>/address).
  std::string root = "/";
  // Creates and destroys MIG instances for MIG devices that do not exist yet (the pool then
  // publishes every placement, MigDevices::all); none: such a claim is refused.
  std::shared_ptr<MigControl> mig;
  // One line per event worth a person's attention; stderr when empty.
  std::function<void(const std::string&)> log;
  // The health stream: the whole state again this often, and at most this many streams open at
  // once (kubelet holds one; a second one is refused with RESOURCE_EXHAUSTED past the limit).
  std::chrono::milliseconds health_resend{std::chrono::seconds(10)};
  unsigned max_health_streams = 4;
};

inline constexpr int kCheckpointVersion = 1;

// A device's health as the kubelet's health stream carries it.
enum class Health { unknown, healthy, unhealthy };
const char* to_string(Health health);

struct HealthReport {
  Health health = Health::unknown;
  std::string message;  // why, for people (`kubectl describe pod` on 1.36+)
  bool operator==(const HealthReport&) const = default;
};

// The pool's devices whose health the agent knows (accelerators, their MIG devices and
// partitions), by device name.
struct PoolHealth {
  std::string pool;
  std::map<std::string, HealthReport> devices;
  bool operator==(const PoolHealth&) const = default;
};

class DraPlugin {
 public:
  explicit DraPlugin(DraPluginOptions options);
  ~DraPlugin();
  DraPlugin(const DraPlugin&) = delete;
  DraPlugin& operator=(const DraPlugin&) = delete;

  // Loads the checkpoint, serves dra.sock, then creates the registration socket. An unreadable
  // checkpoint is an Error: starting empty would forget prepared claims.
  Status start(HostModel model, Pool pool, CdiHost host);
  // Removes the registration socket and stops both servers; the checkpoint stays.
  void stop();
  // The devices changed (MIG layout, a GPU lost and back).
  void set_devices(HostModel model, Pool pool, CdiHost host);
  // The devices' health now: every open health stream gets it when it differs from the last.
  // A device that was in an earlier call and is not in this one is kept as Unknown ("not on
  // this node now") until it comes back.
  void set_health(PoolHealth health);
  PoolHealth health() const;
  // Health streams open now, and opened so far.
  unsigned health_streams() const;
  std::uint64_t health_streams_opened() const;

  // What the gRPC services call; public for tests and benchmarks.
  std::map<std::string, PrepareOutcome> prepare(const std::vector<ClaimRef>& claims);
  std::map<std::string, std::string> unprepare(const std::vector<ClaimRef>& claims);

  std::vector<PreparedClaim> prepared() const;
  // Times kubelet said "registered" (NotifyRegistrationStatus true), and its last error.
  unsigned registrations() const;
  std::string registration_error() const;
  std::string endpoint() const;             // <plugin dir>/dra.sock
  std::string registration_socket() const;  // <registry dir>/<driver>-reg.sock

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The checkpoint's text and back (plugin.cc); exposed for tests.
std::string checkpoint_json(const std::map<std::string, PreparedClaim>& claims);
Result<std::map<std::string, PreparedClaim>> parse_checkpoint(const std::string& text,
                                                              const std::string& input);
// The prepared claims recorded in <plugin dir>/checkpoint.json, for a reader beside the plugin or
// after an agent restart (the claims' CPUs and memory nodes). None when there is no checkpoint;
// an Error when it cannot be read or parsed.
Result<std::vector<PreparedClaim>> read_prepared_claims(const std::string& plugin_dir);

}  // namespace polyaccel::dra
