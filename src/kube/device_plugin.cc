#include "kube/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include "core/file_io.h"
#include "kube/preferred_allocation.h"
#include "kube/proto/deviceplugin_v1beta1.grpc.pb.h"
#include "render/labels.h"

namespace polyaccel {

namespace {

using Clock = std::chrono::steady_clock;

// Everything an RPC needs, immutable once built: a new plan replaces it whole.
struct Plan {
  HostModel model;
  std::vector<PluginResource> resources;
  AllocationTopology topology;
  std::vector<DeviceNodes> nodes;
  std::vector<std::vector<DeviceSlot>> slots;  // per resource, for the chooser
  AllocateOptions allocate;

  const PluginResource* resource(const std::string& name, size_t* index = nullptr) const {
    for (size_t i = 0; i < resources.size(); ++i) {
      if (resources[i].name != name) continue;
      if (index) *index = i;
      return &resources[i];
    }
    return nullptr;
  }
};

struct Snapshot {
  std::shared_ptr<const Plan> plan;
  std::vector<bool> healthy;  // per accelerator of the plan's model
};

// The current snapshot, shared by every server; a generation number tells streams to look again.
class Board {
 public:
  std::pair<std::shared_ptr<const Snapshot>, std::uint64_t> get() const {
    std::lock_guard lock(mutex_);
    return {snapshot_, generation_};
  }
  void set(std::shared_ptr<const Snapshot> s) {
    {
      std::lock_guard lock(mutex_);
      snapshot_ = std::move(s);
      ++generation_;
    }
    cv_.notify_all();
  }
  void wake() const {
    std::lock_guard lock(mutex_);  // a waiter between its check and its sleep must not miss it
    cv_.notify_all();
  }
  void wait(std::uint64_t seen, Clock::time_point until, const std::atomic<bool>& stop) const {
    std::unique_lock lock(mutex_);
    cv_.wait_until(lock, until, [&] { return generation_ != seen || stop; });
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::shared_ptr<const Snapshot> snapshot_;
  std::uint64_t generation_ = 0;
};

grpc::Status failed(const Error& e) {
  auto code = e.code == ErrorCode::bad_input ? grpc::StatusCode::INVALID_ARGUMENT
                                             : grpc::StatusCode::FAILED_PRECONDITION;
  return grpc::Status(code, e.message());
}

v1beta1::ListAndWatchResponse device_list(const Snapshot& s, const PluginResource& r) {
  v1beta1::ListAndWatchResponse resp;
  for (const auto& d : r.devices) {
    auto* dev = resp.add_devices();
    dev->set_id(d.id);
    bool ok = d.accelerator < s.healthy.size() && s.healthy[d.accelerator];
    dev->set_health(ok ? "Healthy" : "Unhealthy");
    // No TopologyInfo where the NUMA node is unknown: kubelet reads that as "no preference".
    if (!d.numa_nodes.empty()) {
      for (unsigned n : d.numa_nodes)
        dev->mutable_topology()->add_nodes()->set_id(n);
    }
  }
  return resp;
}

class ResourceService final : public v1beta1::DevicePlugin::Service {
 public:
  ResourceService(std::string resource, const Board& board)
      : resource_(std::move(resource)), board_(board) {}

  void stop(const Board& board) {
    stopping_ = true;
    board.wake();
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    std::string last;
    while (!stopping_ && !ctx->IsCancelled()) {
      auto [snapshot, generation] = board_.get();
      const PluginResource* r = snapshot->plan->resource(resource_);
      if (!r) return grpc::Status::OK;  // the resource is gone; its server is stopping
      auto resp = device_list(*snapshot, *r);
      std::string wire = resp.SerializeAsString();
      if (wire != last) {
        if (!writer->Write(resp)) return grpc::Status::OK;
        last = std::move(wire);
      }
      // Wake on a new snapshot, or after a second to notice a cancelled stream.
      board_.wait(generation, Clock::now() + std::chrono::seconds(1), stopping_);
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override {
    auto snapshot = board_.get().first;
    size_t index = 0;
    const PluginResource* resource = snapshot->plan->resource(resource_, &index);
    if (!resource) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, resource_ + " is no longer served");
    }
    for (const auto& c : req->container_requests()) {
      PreferredAllocationRequest r;
      r.available.assign(c.available_deviceids().begin(), c.available_deviceids().end());
      r.must_include.assign(c.must_include_deviceids().begin(), c.must_include_deviceids().end());
      r.size = c.allocation_size() < 0 ? 0 : static_cast<size_t>(c.allocation_size());
      r.packed = resource->policy == ReplicaPolicy::packed && resource->max_replicas > 1;
      auto chosen =
          choose_preferred_allocation(snapshot->plan->topology, snapshot->plan->slots[index], r);
      if (!chosen) return failed(chosen.error());
      auto* resp = out->add_container_responses();
      for (const auto& id : *chosen)
        resp->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override {
    auto snapshot = board_.get().first;
    const Plan& plan = *snapshot->plan;
    const PluginResource* r = plan.resource(resource_);
    if (!r) return grpc::Status(grpc::StatusCode::UNAVAILABLE, resource_ + " is no longer served");
    for (const auto& c : req->container_requests()) {
      std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
      auto a = compute_allocation(plan.model, *r, plan.nodes, ids, plan.allocate);
      if (!a) return failed(a.error());
      auto* resp = out->add_container_responses();
      for (const auto& [k, v] : a->envs)
        (*resp->mutable_envs())[k] = v;
      for (const auto& [k, v] : a->annotations)
        (*resp->mutable_annotations())[k] = v;
      for (const auto& d : a->devices) {
        auto* spec = resp->add_devices();
        spec->set_container_path(d.container_path);
        spec->set_host_path(d.host_path);
        spec->set_permissions(d.permissions);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  const std::string resource_;
  const Board& board_;
  std::atomic<bool> stopping_{false};
};

struct FileId {
  bool exists = false;
  ino_t inode = 0;
  long long ctime_ns = 0;
  bool operator==(const FileId&) const = default;
};

// One resource's gRPC server on its own socket.
struct Server {
  std::string resource;
  std::string socket_name;
  std::unique_ptr<ResourceService> service;
  std::unique_ptr<grpc::Server> grpc;
  FileId file;
  bool registered = false;
  Clock::time_point next_registration{};
  std::chrono::seconds backoff{1};
};

// Which file a path names: a socket made again gets a new one even where the file system
// hands out the old inode number again.
FileId file_id(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return {true, st.st_ino, st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec};
}

}  // namespace

struct DevicePlugin::Impl {
  DevicePluginOptions options;
  Board board;

  mutable std::mutex mutex;  // everything below
  HostModel model;
  std::optional<SharingConfig> sharing;  // the last good config
  std::optional<std::string> sharing_text;
  std::optional<Error> sharing_error;
  std::map<std::string, bool> health;  // by PCI bus id
  std::vector<Server> servers;
  FileId kubelet_file;
  unsigned registrations = 0;
  std::map<std::string, std::string> logged;  // last line per subject

  std::thread watcher;
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stopping = false;

  explicit Impl(DevicePluginOptions o) : options(std::move(o)) {}

  std::string path(const std::string& name) const { return options.kubelet_dir + "/" + name; }

  // Logs a line about `subject` once, then only when it changes.
  void log(const std::string& subject, const std::string& line) {
    auto& last = logged[subject];
    if (last == line) return;
    last = line;
    if (options.log) {
      options.log(line);
    } else {
      std::fprintf(stderr, "polyaccel agent: %s\n", line.c_str());
    }
  }

  // Reads the sharing config when its content changed. True when a new good config was taken.
  Result<bool> reload_sharing() {
    if (options.sharing_config.empty()) return false;
    auto text = read_input_file(options.sharing_config, kMaxConfigFileBytes, "sharing config");
    if (!text) {
      Error e = text.error();
      if (!sharing) return e;
      sharing_error = e;
      log("sharing", e.message() + "; keeping the last good sharing config");
      return false;
    }
    if (sharing_text && *sharing_text == *text) return false;
    sharing_text = *text;
    auto parsed = parse_sharing_config(*text, options.sharing_config);
    if (!parsed) {
      if (!sharing) return parsed.error();
      sharing_error = parsed.error();
      log("sharing", parsed.error().message() + "; keeping the last good sharing config");
      return false;
    }
    sharing = std::move(*parsed);
    sharing_error.reset();
    log("sharing", "sharing config " + options.sharing_config + " taken");
    return true;
  }

  Result<std::shared_ptr<Plan>> make_plan() const {
    ResourceOptions ro;
    ro.sharing = sharing ? &*sharing : nullptr;
    ro.mig_strategy = MigStrategy::none;
    if (options.mig_strategy) {
      ro.mig_strategy = *options.mig_strategy;
    } else if (sharing && !sharing->mig_strategy.empty()) {
      auto s = parse_mig_strategy(sharing->mig_strategy, "flags.migStrategy");
      if (!s) return s.error();
      ro.mig_strategy = *s;
    }
    auto resources = plan_resources(model, ro);
    if (!resources) return resources.error();
    auto plan = std::make_shared<Plan>();
    plan->model = model;
    plan->resources = std::move(*resources);
    plan->topology = AllocationTopology::from_model(plan->model);
    plan->nodes = read_device_nodes(plan->model, options.root);
    plan->allocate = options.allocate;
    for (const auto& r : plan->resources) {
      std::vector<DeviceSlot> slots;
      for (const auto& d : r.devices)
        slots.push_back({d.id, d.accelerator});
      plan->slots.push_back(std::move(slots));
    }
    return plan;
  }

  void publish(std::shared_ptr<const Plan> plan) {
    auto s = std::make_shared<Snapshot>();
    for (const auto& a : plan->model.accelerators) {
      auto it = health.find(a.pci.address.to_string());
      s->healthy.push_back(it == health.end() || it->second);
    }
    s->plan = std::move(plan);
    board.set(std::move(s));
  }

  void write_labels(const Plan& plan) {
    if (options.nfd_features_dir.empty()) return;
    LabelOptions lo;
    lo.mig_strategy = "none";
    if (options.mig_strategy) {
      lo.mig_strategy = to_string(*options.mig_strategy);
    } else if (sharing && !sharing->mig_strategy.empty()) {
      lo.mig_strategy = sharing->mig_strategy;
    }
    for (const auto& r : plan.resources) {
      std::set<std::pair<size_t, size_t>> physical;
      for (const auto& d : r.devices)
        physical.insert({d.accelerator, d.mig.value_or(SIZE_MAX)});
      lo.resources.push_back({r.name, static_cast<unsigned>(physical.size()), r.max_replicas,
                              to_string(r.sharing), r.renamed});
    }
    auto w =
        write_feature_file(options.nfd_features_dir + "/polyaccel", node_labels(plan.model, lo));
    if (!w) log("labels", "node labels: " + w.error().message());
  }

  Status start_server(Server& s) {
    const std::string socket = path(s.socket_name);
    // Our own stale socket only: the name is ours, never kubelet.sock or its checkpoint.
    ::unlink(socket.c_str());
    s.service = std::make_unique<ResourceService>(s.resource, board);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    builder.RegisterService(s.service.get());
    s.grpc = builder.BuildAndStart();
    if (!s.grpc) {
      return Error{ErrorCode::io, socket, "cannot serve the device plugin API on it",
                   "is --kubelet-dir writable?"};
    }
    s.file = file_id(socket);
    s.registered = false;
    s.next_registration = {};
    s.backoff = std::chrono::seconds(1);
    return Ok{};
  }

  void stop_server(Server& s) {
    if (!s.grpc) return;
    s.service->stop(board);
    s.grpc->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    s.grpc->Wait();
    s.grpc.reset();
    const std::string socket = path(s.socket_name);
    if (file_id(socket) == s.file) ::unlink(socket.c_str());
  }

  Status register_server(Server& s) {
    auto channel =
        grpc::CreateChannel("unix:" + path("kubelet.sock"), grpc::InsecureChannelCredentials());
    auto stub = v1beta1::Registration::NewStub(channel);
    v1beta1::RegisterRequest req;
    req.set_version("v1beta1");
    req.set_endpoint(s.socket_name);
    req.set_resource_name(s.resource);
    req.mutable_options()->set_get_preferred_allocation_available(true);
    v1beta1::Empty resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status st = stub->Register(&ctx, req, &resp);
    if (!st.ok()) {
      return Error{ErrorCode::io,
                   path("kubelet.sock"),
                   "registering " + s.resource + " failed: " + st.error_message(),
                   {}};
    }
    return Ok{};
  }

  // Servers for exactly the plan's resources: new ones started, gone ones stopped.
  Status sync_servers(const Plan& plan) {
    std::set<std::string> wanted;
    for (const auto& r : plan.resources)
      wanted.insert(r.name);
    for (auto& s : servers) {
      if (!wanted.count(s.resource)) stop_server(s);
    }
    servers.erase(
        std::remove_if(servers.begin(), servers.end(), [&](const Server& s) { return !s.grpc; }),
        servers.end());
    for (const auto& r : plan.resources) {
      bool running = std::any_of(servers.begin(), servers.end(),
                                 [&](const Server& s) { return s.resource == r.name; });
      if (running) continue;
      Server s;
      s.resource = r.name;
      s.socket_name = r.socket_name();
      Status st = start_server(s);
      if (!st) return st;
      log("serve " + r.name, "serving " + r.name + " (" + std::to_string(r.devices.size()) +
                                 " devices) on " + path(s.socket_name));
      servers.push_back(std::move(s));
    }
    return Ok{};
  }

  // A new plan from the model and the last good sharing config. Keeps the old one on an error.
  Status replan() {
    auto plan = make_plan();
    if (!plan) return plan.error();
    std::shared_ptr<const Plan> p = *plan;
    publish(p);
    write_labels(*p);
    return sync_servers(*p);
  }

  // One look at the kubelet directory and the sharing config.
  void tick() {
    std::lock_guard lock(mutex);
    auto changed = reload_sharing();
    if (changed && *changed) {
      Status st = replan();
      if (!st) log("plan", st.error().message() + "; keeping the resources served now");
    }
    FileId kubelet = file_id(path("kubelet.sock"));
    if (kubelet != kubelet_file) {
      // A new kubelet: it deleted our sockets at start; serve and register again.
      if (kubelet.exists) log("kubelet", "kubelet.sock appeared in " + options.kubelet_dir);
      for (auto& s : servers)
        s.registered = false;
      kubelet_file = kubelet;
    }
    for (auto& s : servers) {
      if (file_id(path(s.socket_name)) != s.file) {
        log("socket " + s.resource, s.socket_name + " was removed; serving it again");
        stop_server(s);
        Status st = start_server(s);
        if (!st) {
          log("serve " + s.resource, st.error().message());
          continue;
        }
      }
      if (s.registered || !kubelet.exists || Clock::now() < s.next_registration) continue;
      Status st = register_server(s);
      if (st) {
        s.registered = true;
        ++registrations;
        log("register " + s.resource, "registered " + s.resource + " with kubelet");
      } else {
        log("register " + s.resource, st.error().message());
        s.next_registration = Clock::now() + s.backoff;
        s.backoff = std::min(s.backoff * 2, std::chrono::seconds(30));
      }
    }
  }

  void watch() {
    while (true) {
      tick();
      std::unique_lock lock(stop_mutex);
      if (stop_cv.wait_for(lock, options.poll_interval, [&] { return stopping; })) return;
    }
  }
};

DevicePlugin::DevicePlugin(DevicePluginOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

DevicePlugin::~DevicePlugin() {
  stop();
}

Status DevicePlugin::start(HostModel model) {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->model = std::move(model);
    auto loaded = impl_->reload_sharing();
    if (!loaded) return loaded.error();
    Status st = impl_->replan();
    if (!st) return st;
  }
  // The watcher registers with kubelet at once, off the caller's thread: kubelet dials back.
  impl_->watcher = std::thread([this] { impl_->watch(); });
  return Ok{};
}

void DevicePlugin::stop() {
  {
    std::lock_guard lock(impl_->stop_mutex);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  if (impl_->watcher.joinable()) impl_->watcher.join();
  std::lock_guard lock(impl_->mutex);
  for (auto& s : impl_->servers)
    impl_->stop_server(s);
  impl_->servers.clear();
}

void DevicePlugin::set_model(HostModel model) {
  std::lock_guard lock(impl_->mutex);
  impl_->model = std::move(model);
  Status st = impl_->replan();
  if (!st) impl_->log("plan", st.error().message() + "; keeping the resources served now");
}

void DevicePlugin::set_health(const std::map<std::string, bool>& healthy_by_bus_id) {
  std::lock_guard lock(impl_->mutex);
  bool changed = false;
  for (const auto& [bus, ok] : healthy_by_bus_id) {
    auto it = impl_->health.find(bus);
    if (it != impl_->health.end() && it->second == ok) continue;
    if (it == impl_->health.end() && ok) {
      impl_->health[bus] = ok;
      continue;  // healthy was already assumed
    }
    impl_->health[bus] = ok;
    changed = true;
    impl_->log("health " + bus, bus + (ok ? " is healthy" : " is unhealthy"));
  }
  if (!changed) return;
  auto current = impl_->board.get().first;
  if (current) impl_->publish(current->plan);
}

std::vector<std::string> DevicePlugin::resources() const {
  auto current = impl_->board.get().first;
  std::vector<std::string> out;
  if (current) {
    for (const auto& r : current->plan->resources)
      out.push_back(r.name);
  }
  return out;
}

unsigned DevicePlugin::registrations() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->registrations;
}

std::optional<Error> DevicePlugin::sharing_config_error() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->sharing_error;
}

}  // namespace polyaccel
