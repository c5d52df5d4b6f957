// Keeps the API server's ResourceSlices of this node's pool equal to the pool built from the
// HostModel: lists what the server has (field selectors spec.nodeName, spec.driver), and writes
// only when something differs: every slice updated with its resourceVersion and the next pool
// generation, missing ones created, extra ones deleted, so that resourceSliceCount and the
// generation stay right. A steady node makes no writes at all.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "dra/slices.h"
#include "kube_api/client.h"

namespace polyaccel::dra {

// What the API server keeps of the fields that feature gates guard: a server with the gate off
// accepts the slice and silently drops the field (Kubernetes 1.34 and 1.35 by default). And where
// it takes counter sets: its validation refuses the other layout (slices.h, CounterLayout).
struct ServerFields {
  bool counters = true;  // sharedCounters, consumesCounters (DRAPartitionableDevices)
  bool taints = true;    // devices' taints (DRADeviceTaints)
  // allowMultipleAllocations and capacities' requestPolicy (DRAConsumableCapacity: alpha in
  // 1.34 and 1.35, beta and on in 1.36)
  bool shares = true;
  CounterLayout layout = CounterLayout::own_slices;
  bool operator==(const ServerFields&) const = default;
};

struct SyncResult {
  unsigned created = 0, updated = 0, deleted = 0;
  std::int64_t generation = 0;  // the pool generation on the server after the sync
  // What the stored slices show of the gated fields we sent: the write answers, and the list for a
  // slice stored at the generation this publisher wrote it (compared with what it sent then, never
  // with what it sends now: a GPU tainted since is not a taint the server dropped). Kept or
  // dropped; nullopt when nothing sent uses the field.
  std::optional<bool> counters_kept, taints_kept, shares_kept;
  unsigned writes() const { return created + updated + deleted; }
};

class SlicePublisher {
 public:
  explicit SlicePublisher(kube_api::KubeClient& client) : client_(client) {}

  // Makes the server's slices equal `pool`. A 409 (someone else wrote meanwhile) lists again and
  // retries, a few times. Errors: 403 (RBAC, with the remedy), other statuses, transport.
  Result<SyncResult> sync(const Pool& pool);
  // What the server keeps and the layout it takes, asked without storing anything: dry-run
  // creates (?dryRun=All) of a slice "<node>-polyaccel-probe". First as 1.35 and later want it:
  // a device with a taint that consumes a counter set of another slice and allows multiple
  // allocations (a capacity with a requestPolicy). Only a server that
  // answers 422 "must reference a counterSet defined in the ResourceSlice sharedCounters" (1.34)
  // is asked again, with the counter set beside the device. The answer is the object as the
  // server would store it.
  Result<ServerFields> probe(const std::string& driver, const std::string& node);
  // The layout a write's 422 asked for since the last call (the server's own rule, quoted in
  // slices.h), then nothing: how a server whose dry runs are refused still gets its layout.
  std::optional<CounterLayout> take_layout_wanted() { return std::exchange(layout_wanted_, {}); }
  // Deletes every slice of the pool (the driver is going away for good).
  Status remove_all(const std::string& driver, const std::string& node);

 private:
  Result<SyncResult> sync_once(const Pool& pool, bool& conflict);
  kube_api::KubeClient& client_;
  // The generation of each pool ("driver/node") this publisher last wrote or saw.
  std::map<std::string, std::int64_t> last_generation_;
  // The spec each slice (by name) was last written with, its pool generation included.
  std::map<std::string, nlohmann::json> sent_;
  std::optional<CounterLayout> layout_wanted_;
};

// The layout a 422 of kube-apiserver asks for, by its message: "only one of `sharedCounters` or
// `devices` is allowed" (1.35+) or "must reference a counterSet defined in the ResourceSlice
// sharedCounters" (1.34); nothing for any other answer.
std::optional<CounterLayout> layout_required_by(const kube_api::HttpResponse& r);

inline constexpr const char* kResourceSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";

// The list of a pool's slices: kResourceSlicesPath with the field selectors spec.nodeName and
// spec.driver.
std::string pool_slices_path(const std::string& driver, const std::string& node);

// An API error for people: "POST ...: 403 Forbidden: <the Status message>".
Error api_error(const std::string& what, const kube_api::HttpResponse& r);

}  // namespace polyaccel::dra
