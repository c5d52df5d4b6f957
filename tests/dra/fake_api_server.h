// A test that plays the Kubernetes API server over real HTTP (civetweb): Nodes, ConfigMaps, Events
// and evictions for the partition manager (handle_core); ResourceSlices (list with
// field selectors, create, update with resourceVersion, delete) and ResourceClaims (get). Every
// object a client sends is checked against the real OpenAPI schema of resource.k8s.io/v1
// (k8s_schema.h); the problems are kept for the test to assert none. It can refuse writes (403),
// answer one write with a conflict (409), and stop and start again on the same port (a server that
// goes away and comes back).
#pragma once

#include <civetweb.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/k8s_schema.h"
#include "support/test_support.h"

namespace polyaccel::testing {

class FakeApiServer {
 public:
  // Plain HTTP: Debian 12's civetweb 1.15 cannot load OpenSSL 3 (mg_init_library fails). The
  // client's TLS settings are tested with socat terminating TLS in front of this server
  // (tls_api_server_test.cc).
  explicit FakeApiServer(const std::filesystem::path& dir) : dir_(dir) { start(0); }
  ~FakeApiServer() { stop(); }

  void start(int port) {
    std::string ports = "127.0.0.1:" + std::to_string(port);
    const char* options[] = {"listening_ports", ports.c_str(), "num_threads", "2", nullptr};
    mg_callbacks cb{};
    cb.begin_request = &FakeApiServer::on_request;
    ctx_ = mg_start(&cb, this, options);
    if (!ctx_) throw std::runtime_error("civetweb did not start on " + ports);
    mg_server_port p[2];
    int n = mg_get_server_ports(ctx_, 2, p);
    if (n < 1) throw std::runtime_error("no port");
    port_ = p[0].port;
  }
  void stop() {
    if (ctx_) mg_stop(ctx_);
    ctx_ = nullptr;
  }
  void restart() {
    stop();
    start(port_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  // State, under the lock.
  std::mutex mu;
  std::map<std::string, nlohmann::json> slices;  // by name
  std::map<std::string, nlohmann::json> claims;  // "ns/name"
  std::vector<std::string> schema_errors;
  unsigned writes = 0, conflicts_sent = 0, requests = 0;
  std::vector<std::pair<std::string, std::string>> seen;  // each request: method, path?query
  bool forbid_writes = false;
  unsigned conflict_next_writes = 0;  // answer this many writes 409 (someone else wrote)
  std::string token = "test-token";
  bool require_token = true;  // false: the client authenticates with a certificate instead

  // The core API the partition manager uses (handle_core).
  std::map<std::string, nlohmann::json> nodes;        // by name
  std::map<std::string, nlohmann::json> config_maps;  // "ns/name"
  std::vector<nlohmann::json> events;
  std::vector<std::string> evictions;  // "ns/pod", accepted ones, in order
  unsigned refuse_next_evictions = 0;  // answer this many 429 (a PodDisruptionBudget forbids)
  std::vector<nlohmann::json> label_patches;  // the labels of each Node PATCH, in order
  // Called under `mu` for each accepted eviction (the test's kubelet ends the pod).
  std::function<void(const std::string& ns, const std::string& pod)> on_eviction;

  size_t slices_of(const std::string& node) {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (const auto& [name, s] : slices)
      if (s["spec"].value("nodeName", "") == node) ++n;
    return n;
  }

 private:
  static void reply(mg_connection* c, int status, const nlohmann::json& body) {
    std::string text = body.dump();
    mg_printf(c,
              "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n\r\n",
              status, text.size());
    mg_write(c, text.data(), text.size());
  }
  static nlohmann::json status(int code, const std::string& reason, const std::string& message) {
    return {{"kind", "Status"},   {"apiVersion", "v1"}, {"status", "Failure"},
            {"message", message}, {"reason", reason},   {"code", code}};
  }

  static int on_request(mg_connection* c) {
    auto* self = static_cast<FakeApiServer*>(mg_get_user_data(mg_get_context(c)));
    const mg_request_info* ri = mg_get_request_info(c);
    std::string body;
    char buf[8192];
    int n;
    while ((n = mg_read(c, buf, sizeof buf)) > 0)
      body.append(buf, static_cast<size_t>(n));
    self->handle(c, ri->request_method, ri->local_uri ? ri->local_uri : "",
                 ri->query_string ? ri->query_string : "", body,
                 mg_get_header(c, "Authorization") ? mg_get_header(c, "Authorization") : "");
    return 1;
  }

  void handle(mg_connection* c, const std::string& method, const std::string& path,
              const std::string& query, const std::string& body, const std::string& auth) {
    std::lock_guard<std::mutex> lock(mu);
    ++requests;
    seen.emplace_back(method, query.empty() ? path : path + "?" + query);
    const std::string slices_path = "/apis/resource.k8s.io/v1/resourceslices";
    if (require_token && auth != "Bearer " + token)
      return reply(c, 401, status(401, "Unauthorized", "no token"));
    if (handle_core(c, method, path, body)) return;
    if (method == "GET" && path == slices_path) {
      std::string node, driver;
      char value[512];
      if (mg_get_var(query.c_str(), query.size(), "fieldSelector", value, sizeof value) > 0) {
        std::string sel = value;
        for (size_t start = 0; start < sel.size();) {
          size_t comma = sel.find(',', start);
          std::string term =
              sel.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
          if (term.rfind("spec.nodeName=", 0) == 0) node = term.substr(14);
          if (term.rfind("spec.driver=", 0) == 0) driver = term.substr(12);
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
      }
      nlohmann::json items = nlohmann::json::array();
      for (const auto& [name, s] : slices) {
        if (!node.empty() && s["spec"].value("nodeName", "") != node) continue;
        if (!driver.empty() && s["spec"].value("driver", "") != driver) continue;
        items.push_back(s);
      }
      return reply(c, 200,
                   {{"kind", "ResourceSliceList"},
                    {"apiVersion", "resource.k8s.io/v1"},
                    {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
                    {"items", items}});
    }
    if (method == "GET" && path.rfind("/apis/resource.k8s.io/v1/namespaces/", 0) == 0) {
      std::string rest = path.substr(36);  // "<ns>/resourceclaims/<name>"
      auto slash = rest.find("/resourceclaims/");
      if (slash != std::string::npos) {
        auto it = claims.find(rest.substr(0, slash) + "/" + rest.substr(slash + 16));
        if (it != claims.end()) return reply(c, 200, it->second);
      }
      return reply(c, 404, status(404, "NotFound", "no such claim"));
    }
    bool is_write = method == "POST" || method == "PUT" || method == "DELETE";
    if (!is_write || path.rfind(slices_path, 0) != 0)
      return reply(c, 404, status(404, "NotFound", method + " " + path));
    if (forbid_writes) {
      return reply(c, 403,
                   status(403, "Forbidden", "resourceslices is forbidden: User cannot " + method));
    }
    if (conflict_next_writes > 0) {
      --conflict_next_writes;
      ++conflicts_sent;
      bump_everything();
      return reply(c, 409, status(409, "Conflict", "the object has been modified"));
    }
    if (method == "DELETE") {
      std::string name = path.substr(slices_path.size() + 1);
      if (!slices.erase(name)) return reply(c, 404, status(404, "NotFound", name));
      ++writes;
      return reply(c, 200, status(200, "", ""));
    }
    nlohmann::json obj = nlohmann::json::parse(body, nullptr, false);
    for (const auto& e : schema_.validate(obj))
      schema_errors.push_back(method + " " + path + ": " + e);
    if (!obj.is_object() || !obj.contains("metadata"))
      return reply(c, 400, status(400, "BadRequest", "not an object"));
    std::string name = obj["metadata"].value("name", "");
    if (method == "POST") {
      if (path != slices_path) return reply(c, 405, status(405, "MethodNotAllowed", path));
      if (slices.count(name)) return reply(c, 409, status(409, "AlreadyExists", name));
    } else {
      if (path != slices_path + "/" + name)
        return reply(c, 400, status(400, "BadRequest", "name does not match the path"));
      auto it = slices.find(name);
      if (it == slices.end()) return reply(c, 404, status(404, "NotFound", name));
      if (obj["metadata"].value("resourceVersion", "") !=
          it->second["metadata"]["resourceVersion"].get<std::string>())
        return reply(c, 409, status(409, "Conflict", "the object has been modified"));
    }
    obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
    obj["metadata"]["uid"] = "uid-" + name;
    // The server sets a taint's timeAdded.
    for (auto& d : obj["spec"]["devices"])
      if (d.contains("taints"))
        for (auto& t : d["taints"])
          t["timeAdded"] = "2026-12-01T10:00:00Z";
    slices[name] = obj;
    ++writes;
    return reply(c, method == "POST" ? 201 : 200, obj);
  }

  // Core API (the partition manager): Nodes (get, merge-patch), ConfigMaps (get), pods'
  // evictions (create) and Events (create, checked against core/v1's schema). Returns false for
  // a request it does not serve.
  bool handle_core(mg_connection* c, const std::string& method, const std::string& path,
                   const std::string& body) {
    const std::string nodes_path = "/api/v1/nodes/";
    const std::string ns_path = "/api/v1/namespaces/";
    if (path.rfind(nodes_path, 0) == 0) {
      std::string name = path.substr(nodes_path.size());
      auto it = nodes.find(name);
      if (it == nodes.end()) {
        reply(c, 404, status(404, "NotFound", "nodes \"" + name + "\" not found"));
        return true;
      }
      if (method == "GET") {
        reply(c, 200, it->second);
        return true;
      }
      if (method == "PATCH") {
        const char* type = mg_get_header(c, "Content-Type");
        if (!type || std::string(type) != "application/merge-patch+json") {
          reply(c, 415,
                status(415, "UnsupportedMediaType",
                       std::string("the body of the request was in an unknown format: ") +
                           (type ? type : "")));
          return true;
        }
        auto patch = nlohmann::json::parse(body, nullptr, false);
        if (!patch.is_object()) {
          reply(c, 400, status(400, "BadRequest", "not JSON"));
          return true;
        }
        if (patch.contains("metadata") && patch["metadata"].contains("labels"))
          label_patches.push_back(patch["metadata"]["labels"]);
        it->second.merge_patch(patch);
        it->second["metadata"]["resourceVersion"] = std::to_string(++rv_);
        reply(c, 200, it->second);
        return true;
      }
      reply(c, 405, status(405, "MethodNotAllowed", method));
      return true;
    }
    if (path.rfind(ns_path, 0) != 0) return false;
    std::string rest = path.substr(ns_path.size());  // "<ns>/<kind>/..."
    auto slash = rest.find('/');
    if (slash == std::string::npos) return false;
    std::string ns = rest.substr(0, slash);
    std::string tail = rest.substr(slash + 1);
    if (method == "GET" && tail.rfind("configmaps/", 0) == 0) {
      auto it = config_maps.find(ns + "/" + tail.substr(11));
      if (it == config_maps.end()) {
        reply(c, 404, status(404, "NotFound", "configmaps \"" + tail.substr(11) + "\" not found"));
      } else {
        reply(c, 200, it->second);
      }
      return true;
    }
    if (method == "POST" && tail == "events") {
      auto event = nlohmann::json::parse(body, nullptr, false);
      // core/v1's schema is large: read on the first Event only (the DRA tests send none).
      if (!core_schema_)
        core_schema_ =
            std::make_unique<K8sSchema>(std::vector<std::string>{"core-v1-openapi.json"});
      for (const auto& e : core_schema_->validate_object(event))
        schema_errors.push_back("POST " + path + ": " + e);
      events.push_back(event);
      reply(c, 201, event);
      return true;
    }
    const std::string pods = "pods/";
    if (method == "POST" && tail.rfind(pods, 0) == 0 && tail.size() > pods.size() + 9 &&
        tail.compare(tail.size() - 9, 9, "/eviction") == 0) {
      std::string pod = tail.substr(pods.size(), tail.size() - pods.size() - 9);
      auto eviction = nlohmann::json::parse(body, nullptr, false);
      if (!eviction.is_object() || eviction.value("kind", "") != "Eviction" ||
          eviction.value("apiVersion", "") != "policy/v1" ||
          eviction["metadata"].value("name", "") != pod) {
        reply(c, 400, status(400, "BadRequest", "not a policy/v1 Eviction of " + pod));
        return true;
      }
      if (refuse_next_evictions > 0) {
        --refuse_next_evictions;
        reply(c, 429,
              status(429, "TooManyRequests",
                     "Cannot evict pod as it would violate the pod's disruption budget."));
        return true;
      }
      evictions.push_back(ns + "/" + pod);
      if (on_eviction) on_eviction(ns, pod);
      reply(c, 201, status(201, "", ""));
      return true;
    }
    return false;
  }

  // Another writer touched every slice: their resourceVersions moved on.
  void bump_everything() {
    for (auto& [name, s] : slices)
      s["metadata"]["resourceVersion"] = std::to_string(++rv_);
  }

  std::filesystem::path dir_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
  std::uint64_t rv_ = 100;
  K8sSchema schema_;
  std::unique_ptr<K8sSchema> core_schema_;
};

}  // namespace polyaccel::testing
