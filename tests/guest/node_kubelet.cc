// node_kubelet: the kubelet and the API server of the real-node test (tests/guest/cri_node.py),
// for the agent that containerd runs from a rendered overlay, where a gtest cannot reach it. Over
// the real protocols, at the node's own paths under NODE_ROOT (the node's / as this process sees
// it):
// - the API server: the test one (tests/dra/fake_api_server.h, every object checked against the
//   resource.k8s.io/v1 schema) on 127.0.0.1, plain HTTP; the test puts TLS in front (socat) as the
//   agent's in-cluster client wants it, and hands the agent TOKEN as its service account token;
// - kubelet's plugin watcher: every socket in var/lib/kubelet/plugins_registry gets GetInfo and
//   NotifyRegistrationStatus; a DRA plugin's endpoint is then called with NodePrepareResources
//   and NodeUnprepareResources for claims the test allocates (as the scheduler would) to devices
//   of the node's published ResourceSlices;
// - kubelet's device manager: Registration on var/lib/kubelet/device-plugins/kubelet.sock
//   (tests/kube/fake_kubelet.h), ListAndWatch, Allocate.
// Commands, one a line on stdin; each answer one line on stdout, its word then JSON:
//   slices TIMEOUT_S              -> slices [{"device","pool","uuid"}...] of NODE (once published)
//   dra-prepare CLAIM UID DEVICE[,DEVICE...] -> dra-prepared {NodePrepareResourcesResponse}
//   dra-unprepare CLAIM UID       -> dra-unprepared {NodeUnprepareResourcesResponse}
//   dp-devices RESOURCE COUNT TIMEOUT_S -> dp-devices [ids] (once ListAndWatch lists COUNT)
//   dp-allocate RESOURCE ID...    -> dp-allocated {AllocateResponse}
//   dp-stream-end RESOURCE TIMEOUT_S -> dp-stream-end true|false
//   schema-errors                 -> schema-errors [what the API server found invalid]
//   requests                      -> requests ["METHOD PATH?QUERY" of each request it served]
// Unprompted: `api PORT` first, then `registered {"name","endpoint","type","versions"}` per
// registration; `error TEXT` for a command that failed. Ends at the end of stdin.
// Usage: node_kubelet NODE_ROOT NODE_NAME TOKEN
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dra/fake_api_server.h"
#include "dra/kubelet_dra_client.h"
#include "kube/fake_kubelet.h"
#include "kube/proto/dra_v1.grpc.pb.h"
#include "kube/proto/pluginregistration_v1.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using polyaccel::testing::FakeApiServer;
using polyaccel::testing::FakeKubelet;

std::mutex out_mu;

void say(const std::string& word, const std::string& text) {
  std::lock_guard<std::mutex> lock(out_mu);
  std::cout << word << " " << text << std::endl;
}

std::string as_json(const google::protobuf::Message& m) {
  std::string s;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(m, &s, o).ok()) return "{}";
  return s;
}

// kubelet's plugin watcher: registers each socket that appears in the registry directory.
class PluginWatcher {
 public:
  PluginWatcher(std::string node_root, fs::path registry)
      : node_root_(std::move(node_root)), registry_(std::move(registry)) {
    thread_ = std::thread([this] { run(); });
  }
  ~PluginWatcher() {
    stop_ = true;
    thread_.join();
  }
  // The DRA endpoint (a path under the node root) of driver `name`, once registered.
  std::string endpoint(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = endpoints_.find(name);
    return it == endpoints_.end() ? "" : it->second;
  }

 private:
  void run() {
    while (!stop_) {
      std::error_code ec;
      for (fs::directory_iterator it(registry_, ec), end; !ec && it != end; it.increment(ec)) {
        if (!it->is_socket(ec) || registered_.count(it->path())) continue;
        registered_.insert(it->path());
        register_socket(it->path());
      }
      std::this_thread::sleep_for(200ms);
    }
  }
  void register_socket(const fs::path& socket) {
    auto reg = pluginregistration::Registration::NewStub(
        grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials()));
    pluginregistration::PluginInfo info;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    grpc::Status s = reg->GetInfo(&ctx, {}, &info);
    if (!s.ok()) return say("error", "GetInfo on " + socket.string() + ": " + s.error_message());
    json versions = json::array();
    for (const auto& v : info.supported_versions())
      versions.push_back(v);
    // The endpoint is a path of the node: this process finds it under the node's root.
    std::string endpoint = node_root_ + info.endpoint();
    bool ok = info.type() == "DRAPlugin" && !info.endpoint().empty() && fs::exists(endpoint);
    pluginregistration::RegistrationStatus st;
    st.set_plugin_registered(ok);
    if (!ok) st.set_error("no DRAPlugin endpoint at " + info.endpoint());
    pluginregistration::RegistrationStatusResponse r;
    grpc::ClientContext ctx2;
    ctx2.set_deadline(std::chrono::system_clock::now() + 30s);
    s = reg->NotifyRegistrationStatus(&ctx2, st, &r);
    if (!s.ok()) return say("error", "NotifyRegistrationStatus: " + s.error_message());
    if (ok) {
      std::lock_guard<std::mutex> lock(mu_);
      endpoints_[info.name()] = endpoint;
    }
    say("registered", json{{"name", info.name()},
                           {"endpoint", info.endpoint()},
                           {"type", info.type()},
                           {"versions", versions},
                           {"accepted", ok}}
                          .dump());
  }

  std::string node_root_;
  fs::path registry_;
  std::set<fs::path> registered_;
  std::mutex mu_;
  std::map<std::string, std::string> endpoints_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The node's devices of driver polyaccel.io in the published slices.
json node_devices(FakeApiServer& server, const std::string& node) {
  json out = json::array();
  std::lock_guard<std::mutex> lock(server.mu);
  for (const auto& [name, s] : server.slices) {
    if (s["spec"].value("nodeName", "") != node || s["spec"].value("driver", "") != "polyaccel.io")
      continue;
    for (const auto& d : s["spec"].value("devices", json::array())) {
      std::string uuid;
      if (d.contains("attributes") && d["attributes"].contains("uuid"))
        uuid = d["attributes"]["uuid"].value("string", "");
      out.push_back({{"device", d.value("name", "")},
                     {"pool", s["spec"]["pool"].value("name", "")},
                     {"uuid", uuid}});
    }
  }
  return out;
}

namespace dra_v1 = k8s::io::kubelet::pkg::apis::dra::v1;

// One call of the plugin's dra/v1 service, as kubelet makes it for claim ns1/NAME (45 s at most).
template <class Request, class Response>
std::string call_dra(const std::string& endpoint, const std::string& name, const std::string& uid,
                     grpc::Status (dra_v1::DRAPlugin::Stub::*rpc)(grpc::ClientContext*,
                                                                  const Request&, Response*)) {
  Response resp;
  grpc::Status s = polyaccel::testing::try_dra_plugin(endpoint, {{name, uid}}, rpc, &resp);
  if (!s.ok()) throw std::runtime_error(s.error_message());
  return as_json(resp);
}

// A claim allocated to `device` of the node's pool, stored as the scheduler leaves it.
// Claim ns1/NAME allocated DEVICES (comma-separated), one request each.
void add_claim(FakeApiServer& server, const std::string& node, const std::string& name,
               const std::string& uid, const std::string& devices) {
  json requests = json::array(), results = json::array();
  std::istringstream in(devices);
  for (std::string device; std::getline(in, device, ',');) {
    const std::string request = "r" + std::to_string(results.size());
    requests.push_back({{"name", request}, {"exactly", {{"deviceClassName", "gpu.polyaccel.io"}}}});
    results.push_back(
        {{"request", request}, {"driver", "polyaccel.io"}, {"pool", node}, {"device", device}});
  }
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", name}, {"namespace", "ns1"}, {"uid", uid}}},
                {"spec", {{"devices", {{"requests", requests}}}}},
                {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
  std::lock_guard<std::mutex> lock(server.mu);
  server.claims["ns1/" + name] = claim;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: node_kubelet NODE_ROOT NODE_NAME TOKEN\n";
    return 2;
  }
  const std::string root = argv[1], node = argv[2];
  polyaccel::testing::TempDir scratch;
  FakeApiServer server(scratch.path());
  {
    std::lock_guard<std::mutex> lock(server.mu);
    server.token = argv[3];
  }
  say("api", std::to_string(server.port()));
  FakeKubelet device_manager(root + "/var/lib/kubelet/device-plugins");
  PluginWatcher watcher(root, root + "/var/lib/kubelet/plugins_registry");

  for (std::string line; std::getline(std::cin, line);) {
    auto w = words(line);
    if (w.empty()) continue;
    const std::string& cmd = w[0];
    try {
      if (cmd == "slices" && w.size() == 2) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(std::stoul(w[1]));
        json devices = node_devices(server, node);
        while (devices.empty() && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(200ms);
          devices = node_devices(server, node);
        }
        say("slices", devices.dump());
      } else if (cmd == "dra-prepare" && w.size() == 4) {
        std::string endpoint = watcher.endpoint("polyaccel.io");
        if (endpoint.empty()) throw std::runtime_error("polyaccel.io has not registered");
        add_claim(server, node, w[1], w[2], w[3]);
        say("dra-prepared",
            call_dra(endpoint, w[1], w[2], &dra_v1::DRAPlugin::Stub::NodePrepareResources));
      } else if (cmd == "dra-unprepare" && w.size() == 3) {
        std::string endpoint = watcher.endpoint("polyaccel.io");
        if (endpoint.empty()) throw std::runtime_error("polyaccel.io has not registered");
        say("dra-unprepared",
            call_dra(endpoint, w[1], w[2], &dra_v1::DRAPlugin::Stub::NodeUnprepareResources));
      } else if (cmd == "dp-devices" && w.size() == 4) {
        auto timeout = std::chrono::seconds(std::stoul(w[3]));
        size_t count = std::stoul(w[2]);
        auto ep = device_manager.endpoint(w[1], timeout);
        if (!ep) throw std::runtime_error(w[1] + " has not registered");
        auto update = device_manager.wait_update(
            ep, [&](const auto& r) { return static_cast<size_t>(r.devices_size()) >= count; },
            timeout);
        json ids = json::array();
        if (update)
          for (const auto& d : update->devices())
            ids.push_back(d.id());
        say("dp-devices", ids.dump());
      } else if (cmd == "dp-allocate" && w.size() >= 3) {
        auto ep = device_manager.endpoint(w[1], 1s);
        if (!ep) throw std::runtime_error(w[1] + " has not registered");
        v1beta1::AllocateResponse resp;
        grpc::Status s = polyaccel::testing::allocate(
            *ep, std::vector<std::string>(w.begin() + 2, w.end()), &resp);
        if (!s.ok()) throw std::runtime_error("Allocate: " + s.error_message());
        say("dp-allocated", as_json(resp));
      } else if (cmd == "dp-stream-end" && w.size() == 3) {
        auto ep = device_manager.endpoint(w[1], 1s);
        bool ended =
            ep && device_manager.wait_stream_end(ep, std::chrono::seconds(std::stoul(w[2])));
        say("dp-stream-end", ended ? "true" : "false");
      } else if (cmd == "requests") {
        json seen = json::array();
        std::lock_guard<std::mutex> lock(server.mu);
        for (const auto& [method, path] : server.seen)
          seen.push_back(method + " " + path);
        say("requests", seen.dump());
      } else if (cmd == "schema-errors") {
        std::lock_guard<std::mutex> lock(server.mu);
        say("schema-errors", json(server.schema_errors).dump());
      } else {
        say("error", "unknown command: " + json(line).dump());
      }
    } catch (const std::exception& e) {
      say("error", cmd + ": " + e.what());
    }
  }
  return 0;
}
