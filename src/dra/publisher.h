// Keeps the API server's ResourceSlices of this node's pool equal to the pool built from the
// HostModel: lists what the server has (field selectors spec.nodeName, spec.driver), and writes
// only when something differs: every slice updated with its resourceVersion and the next pool
// generation, missing ones created, extra ones deleted, so that resourceSliceCount and the
// generation stay right. A steady node makes no writes at all.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "dra/kube_client.h"
#include "dra/slices.h"

namespace polyaccel::dra {

struct SyncResult {
  unsigned created = 0, updated = 0, deleted = 0;
  std::int64_t generation = 0;  // the pool generation on the server after the sync
  unsigned writes() const { return created + updated + deleted; }
};

class SlicePublisher {
 public:
  explicit SlicePublisher(KubeClient& client) : client_(client) {}

  // Makes the server's slices equal `pool`. A 409 (someone else wrote meanwhile) lists again and
  // retries, a few times. Errors: 403 (RBAC, with the remedy), other statuses, transport.
  Result<SyncResult> sync(const Pool& pool);
  // Deletes every slice of the pool (the driver is going away for good).
  Status remove_all(const std::string& driver, const std::string& node);

 private:
  Result<SyncResult> sync_once(const Pool& pool, bool& conflict);
  KubeClient& client_;
};

inline constexpr const char* kResourceSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";

// An API error for people: "POST ...: 403 Forbidden: <the Status message>".
Error api_error(const std::string& what, const HttpResponse& r);

}  // namespace polyaccel::dra
