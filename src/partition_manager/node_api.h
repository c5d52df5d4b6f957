// The few Kubernetes API calls the partition manager makes, through the DRA driver's API-server
// client (kube_api/client.h): its own Node's labels (get, watch, merge-patch), one ConfigMap key
// (get), a pod's eviction (policy/v1 Eviction) and an Event on the Node. Each names the object and
// the HTTP status in its error.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "core/error.h"
#include "kube_api/client.h"

namespace polyaccel {

struct NodeLabels {
  std::map<std::string, std::string> labels;
  std::string resource_version;  // where a watch of the Node starts
};

// The Node's labels. Error not_found when the Node does not exist.
Result<NodeLabels> get_node(kube_api::KubeClient& client, const std::string& node);
Result<std::map<std::string, std::string>> get_node_labels(kube_api::KubeClient& client,
                                                           const std::string& node);

// Watches the Node from `resource_version` (a GET of nodes with ?watch=1 and the field selector
// metadata.name=<node>: RBAC's watch on nodes): `on_change` gets its labels after each change
// and ends the watch by returning false. Ok when it ends that way, by the server's
// `server_timeout` or by `keep_going` (asked about once a second) returning false; an Error when
// the server ends it with an ERROR event (410 Gone: the resourceVersion is too old), the Node is
// deleted, the request is refused or the connection fails. Then what changed since is not
// known: get the Node again before the next watch.
Status watch_node(kube_api::KubeClient& client, const std::string& node,
                  const std::string& resource_version, std::chrono::seconds server_timeout,
                  const std::function<bool(const NodeLabels&)>& on_change,
                  const std::function<bool()>& keep_going);

// Sets labels on the Node (a JSON merge patch of metadata.labels only).
Status patch_node_labels(kube_api::KubeClient& client, const std::string& node,
                         const std::map<std::string, std::string>& labels);

// The text under `key` of ConfigMap `name_space`/`name`. Error not_found when either is absent;
// bad_input when the value is not a string or is larger than a config file may be.
Result<std::string> get_config_map_key(kube_api::KubeClient& client, const std::string& name_space,
                                       const std::string& name, const std::string& key);

// Asks the API server to evict the pod (honouring its PodDisruptionBudgets): true when accepted
// (or the pod is gone), false when a budget forbids it now (429: ask again later).
Result<bool> evict_pod(kube_api::KubeClient& client, const std::string& name_space,
                       const std::string& pod);

// An Event about the Node in the "default" namespace, where the API server takes Events about
// cluster-scoped objects (kubelet's go there too; `kubectl describe node` shows them), type
// "Normal" or "Warning", from `component`. The message is cut to 1024 bytes on a UTF-8 boundary.
Status post_node_event(kube_api::KubeClient& client, const std::string& node,
                       const std::string& type, const std::string& reason,
                       const std::string& message, const std::string& component);

}  // namespace polyaccel
