// A test that plays the Kubernetes API server over real HTTP (civetweb): Nodes, ConfigMaps, Events
// and evictions for the partition manager (handle_core); ResourceSlices (list with
// field selectors, create, update with resourceVersion, delete) and ResourceClaims (get). Every
// object a client sends is checked against the real OpenAPI schema of resource.k8s.io/v1
// (k8s_schema.h); the problems are kept for the test to assert none. It can refuse writes (403),
// answer one write with a conflict (409), and stop and start again on the same port (a server that
// goes away and comes back). As the real server it drops the fields of a feature gate that is
// off (DRAPartitionableDevices: sharedCounters, consumesCounters; DRADeviceTaints: taints;
// DRAConsumableCapacity: allowMultipleAllocations, a capacity's requestPolicy) unless the stored
// object already has them, checks against the schema of the version it plays (1.34.9's for 1.34
// and 1.35, 1.36.3's from 1.36), then refuses (422, the real message) a slice that breaks
// the rules of the Kubernetes version it plays (1.34 to 1.37, slice_validation.h: counter sets
// beside their devices for 1.34, in slices of their own from 1.35), answers GET /version, answers
// dry runs (?dryRun=All) without storing, serves
// watches of the slices (?watch=1, field selectors, timeoutSeconds) and deletes all slices of a
// node as the kubelet does when it starts (wipe_node); and watches of a Node (fieldSelector
// metadata.name, from a resourceVersion; dropped or answered 410 Gone on demand). Writes can take
// as long to be stored as on a real server (write_latency), and each stored write is reported in
// order (on_stored) for tests of what was offered when.
#pragma once

#include <arpa/inet.h>
#include <civetweb.h>

#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dra/slice_validation.h"
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
    // Watches hold a thread each while they are open.
    const char* options[] = {"listening_ports", ports.c_str(), "num_threads", "8", nullptr};
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
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping_ = true;
    }
    changed_.notify_all();  // open watches end
    if (ctx_) mg_stop(ctx_);
    ctx_ = nullptr;
    std::lock_guard<std::mutex> lock(mu);
    stopping_ = false;
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
  // The Kubernetes version it plays, 1.<kubernetes_minor>: its validation of slices
  // (slice_validation.h) and GET /version. 1.36 by default, with the gates below at 1.36's
  // defaults (both on).
  unsigned kubernetes_minor = 36;
  // Feature gates of the server: off drops their fields from what is written (1.34's and 1.35's
  // defaults are both off).
  bool partitionable_devices = true;  // DRAPartitionableDevices
  bool device_taints = true;          // DRADeviceTaints
  bool consumable_capacity = true;    // DRAConsumableCapacity (alpha in 1.34 and 1.35)
  // Plays 1.<minor> with that version's default gates (call before the first request).
  void play(unsigned minor) {
    std::lock_guard<std::mutex> lock(mu);
    kubernetes_minor = minor;
    partitionable_devices = device_taints = consumable_capacity = minor >= 36;
  }
  // Slices refused 422 for that version's rules: the messages, and how many were real writes
  // (not dry runs).
  std::vector<std::string> refusals;
  unsigned refused_writes = 0;
  unsigned dry_runs = 0, watches = 0;
  bool refuse_dry_runs = false;  // answer them 400, as a proxy that does not pass them might
  // How long each write takes before it is stored and answered: a real server's round trip to
  // etcd (milliseconds; more on a loaded control plane). A client that does not wait for the
  // answer sees its change stored that much later.
  std::chrono::milliseconds write_latency{0};
  // Called under `mu` after each stored write: "slice" (a ResourceSlice created, updated or
  // deleted; `slices` holds it) or "labels" (a Node's labels patched; label_patches' last).
  std::function<void(const std::string& what)> on_stored;

  // The kubelet's wipe: every slice of `node` deleted at once (a DeleteCollection); how many.
  size_t wipe_node(const std::string& node) {
    size_t n = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto it = slices.begin(); it != slices.end();) {
        if (it->second["spec"].value("nodeName", "") != node) {
          ++it;
          continue;
        }
        event("DELETED", it->second);
        it = slices.erase(it);
        ++n;
      }
    }
    changed_.notify_all();
    return n;
  }

  // ResourceClaim status writes (PUT .../resourceclaims/<name>/status), authorized as
  // kube-apiserver does: resourceclaims/status update, and from 1.36 for each driver whose
  // status.devices entries change the synthetic resourceclaims/driver named for the driver,
  // verb associated-node:update when the writer's service account token names the claim's
  // allocated node (service_account_node), else arbitrary-node:update. `claim_rbac` holds what
  // the writer's RBAC grants, as "group resource[name] verb" ("resource.k8s.io
  // resourceclaims/driver[polyaccel.io] associated-node:update"); unset: everything. Each check
  // made is in `authorized` with its answer ("... -> allow"). Then status.devices is validated
  // as the server does (an allocated device each, no duplicates, CIDRs, sizes; 422).
  std::optional<std::set<std::string>> claim_rbac;
  std::string service_account_node = "node-1";
  std::vector<std::string> authorized;
  std::vector<std::string> claim_refusals;  // the 403 and 422 messages

  // The core API the partition manager uses (handle_core).
  std::map<std::string, nlohmann::json> nodes;        // by name
  std::map<std::string, nlohmann::json> config_maps;  // "ns/name"
  std::vector<nlohmann::json> events;
  std::vector<std::string> evictions;  // "ns/pod", accepted ones, in order
  unsigned refuse_next_evictions = 0;  // answer this many 429 (a PodDisruptionBudget forbids)
  std::vector<nlohmann::json> label_patches;  // the labels of each Node PATCH, in order
  // Called under `mu` for each accepted eviction (the test's kubelet ends the pod).
  std::function<void(const std::string& ns, const std::string& pod)> on_eviction;

  // Changes Node `name` as another client would (a label set with kubectl): its resourceVersion
  // moves on and the Node watches see a MODIFIED event.
  void update_node(const std::string& name, const std::function<void(nlohmann::json&)>& change) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto& node = nodes.at(name);
      change(node);
      node_modified(node);
    }
    changed_.notify_all();
  }
  // Ends every open watch (Nodes and ResourceSlices) as a server that restarts or a load
  // balancer that drops idle connections would (the server itself stays up).
  void close_watches() {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++watch_generation_;
    }
    changed_.notify_all();
  }
  unsigned node_watches = 0;
  // Answer this many ResourceSlice watches as a kube-apiserver whose watch cache lags behind
  // etcd (an old etcd, or the server an HA cluster failed over to): after a second, an ERROR
  // event 504 "Too large resource version", and nothing of what changed meanwhile.
  unsigned lagging_slice_watches = 0;
  // Answer this many Node watches with an ERROR event 410 Gone (the resourceVersion asked for
  // is older than what the server keeps), as the real server does after compaction.
  unsigned expire_next_node_watches = 0;
  // Node watches end at once, cleanly and without an event (a proxy that closes every stream).
  bool end_node_watches_at_once = false;

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
    std::string query = ri->query_string ? ri->query_string : "";
    std::string auth = mg_get_header(c, "Authorization") ? mg_get_header(c, "Authorization") : "";
    std::string path = ri->local_uri ? ri->local_uri : "";
    char watch[16];
    if (std::string(ri->request_method) == "GET" && path == kSlicesPath &&
        mg_get_var(query.c_str(), query.size(), "watch", watch, sizeof watch) > 0 &&
        (std::string(watch) == "1" || std::string(watch) == "true")) {
      self->serve_watch(c, query, auth);
      return 1;
    }
    if (std::string(ri->request_method) == "GET" && path == "/api/v1/nodes" &&
        mg_get_var(query.c_str(), query.size(), "watch", watch, sizeof watch) > 0 &&
        (std::string(watch) == "1" || std::string(watch) == "true")) {
      self->serve_node_watch(c, query, auth);
      return 1;
    }
    const std::string method = ri->request_method;
    if (method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE") {
      std::chrono::milliseconds latency;
      {
        std::lock_guard<std::mutex> lock(self->mu);
        latency = self->write_latency;
      }
      std::this_thread::sleep_for(latency);  // stored, and answered, only after it
    }
    self->handle(c, ri->request_method, path, query, body, auth);
    self->changed_.notify_all();  // watches see what it changed
    return 1;
  }

  static constexpr const char* kSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";

  // The field selector's node and driver ("" when not given).
  static std::pair<std::string, std::string> selected(const std::string& query) {
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
    return {node, driver};
  }
  static bool matches(const nlohmann::json& s, const std::pair<std::string, std::string>& sel) {
    return (sel.first.empty() || s["spec"].value("nodeName", "") == sel.first) &&
           (sel.second.empty() || s["spec"].value("driver", "") == sel.second);
  }

  // A watch as the real server serves one without a resourceVersion: ADDED for what exists,
  // then every change, one JSON object a line, until timeoutSeconds or the server stops.
  void serve_watch(mg_connection* c, const std::string& query, const std::string& auth) {
    auto sel = selected(query);
    char value[32];
    int timeout_s = 1800;
    if (mg_get_var(query.c_str(), query.size(), "timeoutSeconds", value, sizeof value) > 0)
      timeout_s = std::atoi(value);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    std::unique_lock<std::mutex> lock(mu);
    ++requests;
    seen.emplace_back("GET", std::string(kSlicesPath) + "?" + query);
    if (require_token && auth != "Bearer " + token)
      return reply(c, 401, status(401, "Unauthorized", "no token"));
    ++watches;
    mg_printf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n");
    std::string out;
    if (lagging_slice_watches > 0) {
      --lagging_slice_watches;
      const std::uint64_t current = rv_;
      changed_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
      out = nlohmann::json{{"type", "ERROR"},
                           {"object", status(504, "Timeout",
                                             "Timeout: Too large resource version: " +
                                                 std::to_string(current + 100) +
                                                 ", current: " + std::to_string(current))}}
                .dump() +
            "\n";
      lock.unlock();
      mg_write(c, out.data(), out.size());
      return;
    }
    const std::uint64_t generation = watch_generation_;
    for (const auto& [name, s] : slices)
      if (matches(s, sel)) out += nlohmann::json{{"type", "ADDED"}, {"object", s}}.dump() + "\n";
    size_t next_event = events_.size();
    while (!stopping_) {
      if (!out.empty()) {
        lock.unlock();
        int w = mg_write(c, out.data(), out.size());
        lock.lock();
        if (w <= 0) return;  // the client went away
        out.clear();
      }
      // A change made while the lock was released for the write is not lost: the predicate
      // looks at the events before waiting.
      if (!changed_.wait_until(lock, deadline, [&] {
            return stopping_ || watch_generation_ != generation || next_event < events_.size();
          }))
        return;
      if (watch_generation_ != generation) return;
      for (; next_event < events_.size(); ++next_event)
        if (matches(events_[next_event].second, sel))
          out += nlohmann::json{{"type", events_[next_event].first},
                                {"object", events_[next_event].second}}
                     .dump() +
                 "\n";
    }
  }

  // A watch of Nodes as the real server serves one (?fieldSelector=metadata.name=N): from
  // `resourceVersion` the changes after it; without one, ADDED for the Node first.
  void serve_node_watch(mg_connection* c, const std::string& query, const std::string& auth) {
    char value[512];
    std::string name;
    if (mg_get_var(query.c_str(), query.size(), "fieldSelector", value, sizeof value) > 0 &&
        std::string(value).rfind("metadata.name=", 0) == 0)
      name = std::string(value).substr(14);
    std::uint64_t from = 0;
    bool has_from =
        mg_get_var(query.c_str(), query.size(), "resourceVersion", value, sizeof value) > 0 &&
        value[0] != '\0';
    if (has_from) from = std::strtoull(value, nullptr, 10);
    int timeout_s = 1800;
    if (mg_get_var(query.c_str(), query.size(), "timeoutSeconds", value, sizeof value) > 0)
      timeout_s = std::atoi(value);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    std::unique_lock<std::mutex> lock(mu);
    ++requests;
    seen.emplace_back("GET", "/api/v1/nodes?" + query);
    if (require_token && auth != "Bearer " + token)
      return reply(c, 401, status(401, "Unauthorized", "no token"));
    ++node_watches;
    mg_printf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n");
    std::string out;
    if (end_node_watches_at_once) return;
    if (expire_next_node_watches > 0) {
      --expire_next_node_watches;
      out = nlohmann::json{{"type", "ERROR"},
                           {"object", status(410, "Expired",
                                             "too old resource version: " + std::to_string(from))}}
                .dump() +
            "\n";
      lock.unlock();
      mg_write(c, out.data(), out.size());
      return;
    }
    auto selected_node = [&](const nlohmann::json& n) {
      return name.empty() || n["metadata"].value("name", "") == name;
    };
    if (!has_from)
      for (const auto& [n, node] : nodes)
        if (selected_node(node))
          out += nlohmann::json{{"type", "ADDED"}, {"object", node}}.dump() + "\n";
    size_t next_event = 0;
    const unsigned generation = watch_generation_;
    while (!stopping_ && watch_generation_ == generation) {
      for (; next_event < node_events_.size(); ++next_event)
        if (node_events_[next_event].first > from && selected_node(node_events_[next_event].second))
          out += nlohmann::json{{"type", "MODIFIED"}, {"object", node_events_[next_event].second}}
                     .dump() +
                 "\n";
      if (!out.empty()) {
        lock.unlock();
        int w = mg_write(c, out.data(), out.size());
        lock.lock();
        if (w <= 0) return;  // the client went away
        out.clear();
      }
      // A change made while the lock was released for the write (update_node() takes the lock
      // exactly then) is not lost: the predicate looks before waiting. A plain wait lost it
      // once under ThreadSanitizer, and the watch waited for the next request to the server.
      if (!changed_.wait_until(lock, deadline, [&] {
            return stopping_ || watch_generation_ != generation || next_event < node_events_.size();
          }))
        return;
    }
  }
  // A Node changed (under the lock): a new resourceVersion, an event for the Node watches.
  void node_modified(nlohmann::json& node) {
    node["metadata"]["resourceVersion"] = std::to_string(++rv_);
    node_events_.emplace_back(rv_, node);
  }

  // A change for the watches (under the lock).
  void event(const std::string& type, const nlohmann::json& object) {
    events_.emplace_back(type, object);
  }

  // DRAConsumableCapacity's fields of a slice's devices.
  static void drop_sharing(nlohmann::json& obj) {
    if (!obj.is_object() || !obj.contains("spec") || !obj["spec"].is_object()) return;
    auto& spec = obj["spec"];
    if (!spec.contains("devices") || !spec["devices"].is_array()) return;
    for (auto& d : spec["devices"]) {
      if (!d.is_object()) continue;
      d.erase("allowMultipleAllocations");
      if (d.contains("capacity") && d["capacity"].is_object())
        for (auto& [name, c] : d["capacity"].items())
          if (c.is_object()) c.erase("requestPolicy");
    }
  }

  // What a server with the gate off keeps of a written slice: the gated fields only where the
  // stored object (`old`, null on create) uses them already (the API server's dropDisabledFields).
  void drop_disabled_fields(nlohmann::json& obj, const nlohmann::json* old) const {
    auto uses = [](const nlohmann::json* o, const char* device_field) {
      if (!o) return false;
      const auto& spec = (*o)["spec"];
      if (std::string(device_field) == "consumesCounters" && spec.contains("sharedCounters"))
        return true;
      for (const auto& d : spec.value("devices", nlohmann::json::array()))
        if (d.contains(device_field)) return true;
      return false;
    };
    if (!obj.contains("spec") || !obj["spec"].is_object()) return;
    auto& spec = obj["spec"];
    if (!partitionable_devices && !uses(old, "consumesCounters")) spec.erase("sharedCounters");
    if (!spec.contains("devices") || !spec["devices"].is_array()) return;
    if (!partitionable_devices && !uses(old, "consumesCounters"))
      for (auto& d : spec["devices"])
        d.erase("consumesCounters");
    if (!device_taints && !uses(old, "taints"))
      for (auto& d : spec["devices"])
        d.erase("taints");
    if (!consumable_capacity && !uses(old, "allowMultipleAllocations")) drop_sharing(obj);
    // What kube-apiserver fills in: a taint's timeAdded, when the writer left it out.
    for (auto& d : spec["devices"]) {
      if (!d.is_object() || !d.contains("taints") || !d["taints"].is_array()) continue;
      for (auto& t : d["taints"])
        if (t.is_object() && !t.contains("timeAdded")) t["timeAdded"] = "2026-12-06T00:00:00Z";
    }
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
    if (method == "GET" && path == "/version") {
      const std::string minor = std::to_string(kubernetes_minor);
      return reply(c, 200,
                   {{"major", "1"},
                    {"minor", minor},
                    {"gitVersion", "v1." + minor + ".3"},
                    {"platform", "linux/amd64"}});
    }
    if (method == "GET" && path == slices_path) {
      auto sel = selected(query);
      nlohmann::json items = nlohmann::json::array();
      for (const auto& [name, s] : slices)
        if (matches(s, sel)) items.push_back(s);
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
    if (handle_claim_status(c, method, path, body)) return;
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
    char dry[16];
    const bool dry_run = mg_get_var(query.c_str(), query.size(), "dryRun", dry, sizeof dry) > 0 &&
                         std::string(dry) == "All";
    if (method == "DELETE") {
      std::string name = path.substr(slices_path.size() + 1);
      auto it = slices.find(name);
      if (it == slices.end()) return reply(c, 404, status(404, "NotFound", name));
      event("DELETED", it->second);
      slices.erase(it);
      ++writes;
      if (on_stored) on_stored("slice");
      return reply(c, 200, status(200, "", ""));
    }
    nlohmann::json obj = nlohmann::json::parse(body, nullptr, false);
    // 1.34's and 1.35's Go types have DRAConsumableCapacity's fields (the 1.34.9 schema we hold
    // does not): with the gate off they are dropped, never refused.
    if (!consumable_capacity && kubernetes_minor <= 35) drop_sharing(obj);
    for (const auto& e : schema_for_version().validate(obj))
      schema_errors.push_back(method + " " + path + ": " + e);
    if (!obj.is_object() || !obj.contains("metadata"))
      return reply(c, 400, status(400, "BadRequest", "not an object"));
    std::string name = obj["metadata"].value("name", "");
    const nlohmann::json* old = nullptr;
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
      old = &it->second;
    }
    drop_disabled_fields(obj, old);
    if (dry_run && refuse_dry_runs)
      return reply(c, 400, status(400, "BadRequest", "dryRun is not supported here"));
    // Validation sees what is left once the disabled fields are dropped, dry run or not.
    if (auto invalid = resource_slice_errors(obj, kubernetes_minor); !invalid.empty()) {
      nlohmann::json answer = resource_slice_invalid(name, invalid);
      refusals.push_back(answer["message"].get<std::string>());
      if (!dry_run) ++refused_writes;
      return reply(c, 422, answer);
    }
    if (dry_run) {
      ++dry_runs;
      obj["metadata"]["uid"] = "uid-dry-run";
      return reply(c, method == "POST" ? 201 : 200, obj);
    }
    obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
    obj["metadata"]["uid"] = "uid-" + name;
    // The server sets a taint's timeAdded.
    if (obj["spec"].contains("devices") && obj["spec"]["devices"].is_array())
      for (auto& d : obj["spec"]["devices"])
        if (d.contains("taints"))
          for (auto& t : d["taints"])
            t["timeAdded"] = "2026-12-01T10:00:00Z";
    // 1.34's devices has no omitempty: a slice without devices reads back "devices": null.
    if (kubernetes_minor <= 34 && !obj["spec"].contains("devices"))
      obj["spec"]["devices"] = nullptr;
    event(method == "POST" ? "ADDED" : "MODIFIED", obj);
    slices[name] = obj;
    ++writes;
    if (on_stored) on_stored("slice");
    return reply(c, method == "POST" ? 201 : 200, obj);
  }

  bool allowed(const std::string& attributes) {
    bool yes = !claim_rbac || claim_rbac->count(attributes);
    authorized.push_back(attributes + (yes ? " -> allow" : " -> deny"));
    return yes;
  }

  // The node a claim is allocated to, when its node selector names exactly one
  // (nodeNameFromAllocation: one term, one matchFields metadata.name In [node]).
  static std::string allocated_node(const nlohmann::json& claim) {
    const auto* sel = claim.contains("status") && claim["status"].contains("allocation") &&
                              claim["status"]["allocation"].contains("nodeSelector")
                          ? &claim["status"]["allocation"]["nodeSelector"]
                          : nullptr;
    if (!sel || !sel->contains("nodeSelectorTerms") || (*sel)["nodeSelectorTerms"].size() != 1)
      return "";
    const auto& term = (*sel)["nodeSelectorTerms"][0];
    if (term.contains("matchExpressions") || !term.contains("matchFields") ||
        term["matchFields"].size() != 1)
      return "";
    const auto& f = term["matchFields"][0];
    if (f.value("key", "") != "metadata.name" || f.value("operator", "") != "In" ||
        !f.contains("values") || f["values"].size() != 1)
      return "";
    return f["values"][0].get<std::string>();
  }

  // "address/prefix" with the address in canonical form, as IsValidInterfaceAddress wants.
  static bool is_interface_address(const std::string& cidr) {
    auto slash = cidr.find('/');
    if (slash == std::string::npos) return false;
    std::string ip = cidr.substr(0, slash), prefix = cidr.substr(slash + 1);
    unsigned char buf[16];
    char back[64];
    int family = ip.find(':') == std::string::npos ? AF_INET : AF_INET6;
    if (::inet_pton(family, ip.c_str(), buf) != 1) return false;
    if (!::inet_ntop(family, buf, back, sizeof back) || ip != back) return false;
    if (prefix.empty() || prefix.size() > 3 ||
        prefix.find_first_not_of("0123456789") != std::string::npos)
      return false;
    return std::stoi(prefix) <= (family == AF_INET ? 32 : 128);
  }

  // kube-apiserver's checks of status.devices (ValidateResourceClaimStatusUpdate): problems.
  static std::vector<std::string> device_status_errors(const nlohmann::json& claim) {
    std::vector<std::string> errors;
    const auto& status = claim["status"];
    if (!status.contains("devices")) return errors;
    std::set<std::string> allocated, seen_keys;
    if (status.contains("allocation"))
      for (const auto& r :
           status["allocation"]["devices"].value("results", nlohmann::json::array()))
        allocated.insert(r.value("driver", "") + "/" + r.value("pool", "") + "/" +
                         r.value("device", "") + "/" + r.value("shareID", ""));
    for (size_t i = 0; i < status["devices"].size(); ++i) {
      const auto& e = status["devices"][i];
      const std::string at = "status.devices[" + std::to_string(i) + "]";
      const std::string key = e.value("driver", "") + "/" + e.value("pool", "") + "/" +
                              e.value("device", "") + "/" + e.value("shareID", "");
      if (!allocated.count(key))
        errors.push_back(at + ": Invalid value: \"" + key +
                         "\": must be an allocated device in the claim");
      if (!seen_keys.insert(key).second)
        errors.push_back(at + ": Duplicate value: \"" + key + "\"");
      if (e.contains("conditions") && e["conditions"].size() > 8)
        errors.push_back(at + ".conditions: Too many: must have at most 8 items");
      if (e.contains("data") && e["data"].dump().size() > 10 * 1024)
        errors.push_back(at + ".data: Too long: must have at most 10240 bytes");
      if (!e.contains("networkData")) continue;
      const auto& n = e["networkData"];
      if (n.value("interfaceName", "").size() > 256)
        errors.push_back(at +
                         ".networkData.interfaceName: Too long: may not be more than 256 bytes");
      if (n.value("hardwareAddress", "").size() > 128)
        errors.push_back(at +
                         ".networkData.hardwareAddress: Too long: may not be more than 128 bytes");
      const auto ips = n.value("ips", nlohmann::json::array());
      if (ips.size() > 16)
        errors.push_back(at + ".networkData.ips: Too many: must have at most 16 items");
      for (size_t k = 0; k < ips.size(); ++k)
        if (!ips[k].is_string() || !is_interface_address(ips[k].get<std::string>()))
          errors.push_back(
              at + ".networkData.ips[" + std::to_string(k) + "]: Invalid value: " + ips[k].dump() +
              ": must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)");
    }
    return errors;
  }

  // PUT /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>/status; false for any
  // other request.
  bool handle_claim_status(mg_connection* c, const std::string& method, const std::string& path,
                           const std::string& body) {
    const std::string prefix = "/apis/resource.k8s.io/v1/namespaces/";
    const std::string suffix = "/status";
    if (path.rfind(prefix, 0) != 0 || path.size() <= suffix.size() ||
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
      return false;
    std::string rest = path.substr(prefix.size(), path.size() - prefix.size() - suffix.size());
    auto slash = rest.find("/resourceclaims/");
    if (slash == std::string::npos) return false;
    const std::string ns = rest.substr(0, slash), name = rest.substr(slash + 16);
    auto forbid = [&](const std::string& why) {
      std::string m = "resourceclaims.resource.k8s.io \"" + name + "\" is forbidden: " + why;
      claim_refusals.push_back(m);
      reply(c, 403, status(403, "Forbidden", m));
      return true;
    };
    if (method != "PUT") {
      reply(c, 405, status(405, "MethodNotAllowed", method));
      return true;
    }
    if (!allowed("resource.k8s.io resourceclaims/status update"))
      return forbid("User cannot update resource \"resourceclaims/status\"");
    auto it = claims.find(ns + "/" + name);
    if (it == claims.end()) {
      reply(c, 404, status(404, "NotFound", "resourceclaims \"" + name + "\" not found"));
      return true;
    }
    auto obj = nlohmann::json::parse(body, nullptr, false);
    if (!obj.is_object() || !obj["metadata"].is_object()) {
      reply(c, 400, status(400, "BadRequest", "not an object"));
      return true;
    }
    const auto& old = it->second;
    const std::string rv = old["metadata"].value("resourceVersion", "");
    if (obj["metadata"].value("resourceVersion", "") != rv) {
      reply(c, 409, status(409, "Conflict", "the object has been modified"));
      return true;
    }
    for (const auto& e : schema_for_version().validate(obj, "io.k8s.api.resource.v1.ResourceClaim"))
      schema_errors.push_back("PUT " + path + ": " + e);
    // The status subresource changes status only.
    nlohmann::json next = old;
    next["status"] = obj.value("status", nlohmann::json::object());
    if (kubernetes_minor >= 36) {
      // getModifiedDrivers: a driver whose entries differ between the old and the new status.
      auto entries_of = [](const nlohmann::json& claim) {
        std::map<std::string, std::vector<nlohmann::json>> by_driver;
        if (claim.contains("status") && claim["status"].contains("devices"))
          for (const auto& e : claim["status"]["devices"])
            by_driver[e.value("driver", "")].push_back(e);
        return by_driver;
      };
      auto before = entries_of(old), after = entries_of(next);
      std::set<std::string> drivers;
      for (const auto& [d, e] : before)
        if (!after.count(d) || after[d] != e) drivers.insert(d);
      for (const auto& [d, e] : after)
        if (!before.count(d) || before[d] != e) drivers.insert(d);
      const std::string node = allocated_node(next);
      for (const auto& d : drivers) {
        const std::string attrs = "resource.k8s.io resourceclaims/driver[" + d + "] ";
        bool ok = !node.empty() && node == service_account_node &&
                  allowed(attrs + "associated-node:update");
        if (!ok) ok = allowed(attrs + "arbitrary-node:update");
        if (!ok) return forbid("changing status.devices requires extra permission");
      }
    }
    if (auto errors = device_status_errors(next); !errors.empty()) {
      std::string m = "ResourceClaim.resource.k8s.io \"" + name + "\" is invalid: ";
      for (size_t i = 0; i < errors.size(); ++i)
        m += (i ? ", " : "") + errors[i];
      claim_refusals.push_back(m);
      reply(c, 422, status(422, "Invalid", m));
      return true;
    }
    next["metadata"]["resourceVersion"] = std::to_string(++rv_);
    it->second = next;
    ++writes;
    reply(c, 200, next);
    return true;
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
        node_modified(it->second);
        if (on_stored && patch.contains("metadata") && patch["metadata"].contains("labels"))
          on_stored("labels");
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
      // As kube-apiserver validates an Event (core/v1 ValidateEventCreate): the object's
      // namespace is the request's, and an Event about a cluster-scoped object (a Node: no
      // involvedObject.namespace) lives in "default" only.
      const std::string meta_ns = event.is_object() && event["metadata"].is_object()
                                      ? event["metadata"].value("namespace", ns)
                                      : ns;
      const std::string involved_ns = event.is_object() && event["involvedObject"].is_object()
                                          ? event["involvedObject"].value("namespace", "")
                                          : "";
      if (meta_ns != ns) {
        reply(c, 400,
              status(400, "BadRequest",
                     "the namespace of the provided object does not match the namespace sent on "
                     "the request"));
        return true;
      }
      if (involved_ns.empty() ? ns != "default" : involved_ns != ns) {
        reply(c, 422,
              status(422, "Invalid",
                     "Event is invalid: involvedObject.namespace: Invalid value: \"" + involved_ns +
                         "\": does not match event.namespace"));
        return true;
      }
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
  // The schema of the version played: 1.34.9's up to 1.35, 1.36.3's from 1.36 (read once).
  const K8sSchema& schema_for_version() {
    if (kubernetes_minor <= 35) return schema_;
    if (!schema_136_)
      schema_136_ = std::make_unique<K8sSchema>(
          std::vector<std::string>{"v1.36/resource.k8s.io-v1-openapi.json"});
    return *schema_136_;
  }
  K8sSchema schema_;
  std::unique_ptr<K8sSchema> schema_136_;
  std::unique_ptr<K8sSchema> core_schema_;
  std::condition_variable changed_;
  std::vector<std::pair<std::string, nlohmann::json>> events_;         // every change, in order
  std::vector<std::pair<std::uint64_t, nlohmann::json>> node_events_;  // resourceVersion, Node
  unsigned watch_generation_ = 0;  // close_watches() moves it on
  bool stopping_ = false;
};

}  // namespace polyaccel::testing
