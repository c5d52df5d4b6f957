// The few Kubernetes API calls the partition manager makes, through the DRA driver's API-server
// client (dra/kube_client.h): its own Node's labels (get, merge-patch), one ConfigMap key (get),
// a pod's eviction (policy/v1 Eviction) and an Event on the Node. Each names the object and the
// HTTP status in its error.
#pragma once

#include <map>
#include <string>

#include "core/error.h"
#include "dra/kube_client.h"

namespace polyaccel {

// The Node's labels. Error not_found when the Node does not exist.
Result<std::map<std::string, std::string>> get_node_labels(dra::KubeClient& client,
                                                           const std::string& node);

// Sets labels on the Node (a JSON merge patch of metadata.labels only).
Status patch_node_labels(dra::KubeClient& client, const std::string& node,
                         const std::map<std::string, std::string>& labels);

// The text under `key` of ConfigMap `name_space`/`name`. Error not_found when either is absent;
// bad_input when the value is not a string or is larger than a config file may be.
Result<std::string> get_config_map_key(dra::KubeClient& client, const std::string& name_space,
                                       const std::string& name, const std::string& key);

// Asks the API server to evict the pod (honouring its PodDisruptionBudgets): true when accepted
// (or the pod is gone), false when a budget forbids it now (429: ask again later).
Result<bool> evict_pod(dra::KubeClient& client, const std::string& name_space,
                       const std::string& pod);

// An Event about the Node, in `name_space` (the agent's own: `kubectl describe node` finds a
// Node's events in every namespace), type "Normal" or "Warning", from `component`.
Status post_node_event(dra::KubeClient& client, const std::string& name_space,
                       const std::string& node, const std::string& type, const std::string& reason,
                       const std::string& message, const std::string& component);

}  // namespace polyaccel
