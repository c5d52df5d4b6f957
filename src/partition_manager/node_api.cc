#include "partition_manager/node_api.h"

#include <chrono>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "core/file_io.h"
#include "core/json.h"
#include "core/strings.h"

namespace polyaccel {

namespace {

using kube_api::HttpResponse;
using kube_api::KubeClient;
using kube_api::now_rfc3339;
using kube_api::url_encode;

// The API server's message for a failed request, else its status.
Error api_error(const std::string& what, const HttpResponse& r) {
  std::string message;
  auto doc = nlohmann::json::parse(r.body, nullptr, false);
  if (doc.is_object() && doc.contains("message") && doc["message"].is_string())
    message = doc["message"].get<std::string>();
  ErrorCode code = r.status == 404 ? ErrorCode::not_found : ErrorCode::io;
  return Error{
      code, what, "HTTP " + std::to_string(r.status) + (message.empty() ? "" : ": " + message),
      r.status == 403 ? "the agent's ServiceAccount lacks this permission (deploy/ RBAC)" : ""};
}

}  // namespace

namespace {

std::map<std::string, std::string> labels_of(const nlohmann::json& node) {
  std::map<std::string, std::string> labels;
  for (const auto& [k, v] : json_object(json_object(node, "metadata"), "labels").items()) {
    if (v.is_string()) labels[k] = v.get<std::string>();
  }
  return labels;
}

std::string resource_version_of(const nlohmann::json& node) {
  return json_string(json_object(node, "metadata"), "resourceVersion");
}

}  // namespace

Result<NodeLabels> get_node(KubeClient& client, const std::string& node) {
  std::string what = "Node " + node;
  auto r = client.request("GET", "/api/v1/nodes/" + url_encode(node));
  if (!r) return r.error();
  if (r->status != 200) return api_error(what, *r);
  auto doc = nlohmann::json::parse(r->body, nullptr, false);
  if (!doc.is_object())
    return Error{ErrorCode::io, what, "the API server's answer is not JSON", ""};
  return NodeLabels{labels_of(doc), resource_version_of(doc)};
}

Result<std::map<std::string, std::string>> get_node_labels(KubeClient& client,
                                                           const std::string& node) {
  auto n = get_node(client, node);
  if (!n) return n.error();
  return n->labels;
}

Status watch_node(KubeClient& client, const std::string& node, const std::string& resource_version,
                  std::chrono::seconds server_timeout,
                  const std::function<bool(const NodeLabels&)>& on_change,
                  const std::function<bool()>& keep_going) {
  const std::string path = "/api/v1/nodes?fieldSelector=" + url_encode("metadata.name=" + node) +
                           "&resourceVersion=" + url_encode(resource_version) +
                           "&watch=1&timeoutSeconds=" + std::to_string(server_timeout.count());
  std::string ended;  // an ERROR event's message
  auto r = client.watch(
      path,
      [&](const std::string& line) {
        auto event = nlohmann::json::parse(line, nullptr, false);
        if (!event.is_object()) return true;  // not an event: ignored, as a blank line
        std::string type = json_string(event, "type");
        const auto& object = json_object(event, "object");
        if (type == "ERROR") {
          // 410 Gone (the resourceVersion is older than what the server keeps) and the like.
          ended = "the server ended the watch: " + json_string(object, "message");
          return false;
        }
        if (type == "BOOKMARK" || !object.is_object()) return true;
        if (type == "DELETED") {
          ended = "the Node was deleted";
          return false;
        }
        return on_change(NodeLabels{labels_of(object), resource_version_of(object)});
      },
      keep_going, server_timeout + std::chrono::seconds(30));
  if (!r) return r.error();
  if (r->status != 200) return api_error("watch of Node " + node, *r);
  if (!ended.empty()) return Error{ErrorCode::io, "watch of Node " + node, ended, ""};
  return Ok{};
}

Status patch_node_labels(KubeClient& client, const std::string& node,
                         const std::map<std::string, std::string>& labels) {
  nlohmann::json patch = {{"metadata", {{"labels", labels}}}};
  auto r = client.request("PATCH", "/api/v1/nodes/" + url_encode(node), patch.dump());
  if (!r) return r.error();
  if (r->status != 200) return api_error("Node " + node + " labels", *r);
  return Ok{};
}

Result<std::string> get_config_map_key(KubeClient& client, const std::string& name_space,
                                       const std::string& name, const std::string& key) {
  std::string what = "ConfigMap " + name_space + "/" + name;
  auto r = client.request(
      "GET", "/api/v1/namespaces/" + url_encode(name_space) + "/configmaps/" + url_encode(name));
  if (!r) return r.error();
  if (r->status != 200) return api_error(what, *r);
  auto doc = nlohmann::json::parse(r->body, nullptr, false);
  if (!doc.is_object())
    return Error{ErrorCode::io, what, "the API server's answer is not JSON", ""};
  const auto& data = json_object(doc, "data");
  if (!data.contains(key))
    return Error{ErrorCode::not_found, what, "has no key " + key, "add data." + key};
  if (!data.at(key).is_string()) return bad_input(what, "data." + key + " is not a string");
  std::string text = data.at(key).get<std::string>();
  if (text.size() > kMaxConfigFileBytes)
    return bad_input(
        what, "data." + key + " is larger than " + std::to_string(kMaxConfigFileBytes) + " bytes");
  return text;
}

Result<bool> evict_pod(KubeClient& client, const std::string& name_space, const std::string& pod) {
  nlohmann::json eviction = {{"apiVersion", "policy/v1"},
                             {"kind", "Eviction"},
                             {"metadata", {{"name", pod}, {"namespace", name_space}}}};
  auto r = client.request(
      "POST",
      "/api/v1/namespaces/" + url_encode(name_space) + "/pods/" + url_encode(pod) + "/eviction",
      eviction.dump());
  if (!r) return r.error();
  if (r->status == 200 || r->status == 201) return true;
  if (r->status == 404) return true;   // gone already
  if (r->status == 429) return false;  // a PodDisruptionBudget forbids it now
  return api_error("eviction of pod " + name_space + "/" + pod, *r);
}

Status post_node_event(KubeClient& client, const std::string& node, const std::string& type,
                       const std::string& reason, const std::string& message,
                       const std::string& component) {
  // A Node is cluster-scoped: the API server takes an Event about it only in "default" (or no
  // namespace), where kubelet posts its own; elsewhere it answers 422 "involvedObject.namespace:
  // does not match event.namespace".
  const std::string name_space = "default";
  static thread_local std::mt19937_64 random{std::random_device{}()};
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random()));
  std::string time = now_rfc3339();
  nlohmann::json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", node + "." + suffix}, {"namespace", name_space}}},
      {"involvedObject", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", node}}},
      {"type", type},
      {"reason", reason},
      {"message", std::string(utf8_prefix(message, 1024))},
      {"source", {{"component", component}, {"host", node}}},
      {"reportingComponent", component},
      {"reportingInstance", node},
      {"firstTimestamp", time},
      {"lastTimestamp", time},
      {"count", 1}};
  auto r = client.request("POST", "/api/v1/namespaces/" + name_space + "/events",
                          event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (!r) return r.error();
  if (r->status != 201 && r->status != 200) return api_error("Event on Node " + node, *r);
  return Ok{};
}

}  // namespace polyaccel
