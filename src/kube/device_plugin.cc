#include "kube/device_plugin.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "core/agent_parts.h"
#include "core/file_io.h"
#include "core/socket_path.h"
#include "kube/nic_resources.h"
#include "kube/preferred_allocation.h"
#include "kube/proto/deviceplugin_v1beta1.grpc.pb.h"
#include "render/labels.h"

namespace polyaccel {

namespace {

using Clock = std::chrono::steady_clock;

// kubelet.sock appears (bind) an instant before kubelet listens on it: the first retry comes
// soon, later ones back off to 30 s.
constexpr std::chrono::milliseconds kFirstRetry{5};
constexpr std::chrono::milliseconds kLongestRetry{30000};
// The name of the lock that keeps a second agent off the directory. kubelet removes only the
// sockets of its directory at start, so the lock file outlives a kubelet restart.
constexpr const char* kLockName = "polyaccel.lock";
// Ids of withdrawn devices remembered per resource (Plan::withdrawn).
constexpr size_t kMaxWithdrawnIds = 1024;

// Everything an RPC needs, immutable once built: a new plan replaces it whole.
struct Plan {
  HostModel model;
  std::vector<PluginResource> resources;
  AllocationTopology topology;
  std::vector<DeviceNodes> nodes;
  NicNodes nic_nodes;
  std::vector<std::vector<DeviceSlot>> slots;  // per accelerator resource, for the chooser
  AllocateOptions allocate;
  // By resource: ids an earlier plan advertised and this one does not (a MIG instance destroyed,
  // a GPU gone), so that an Allocate kubelet chose before it saw the new list is told why.
  std::map<std::string, std::set<std::string>> withdrawn;

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

  // The accelerators of the last Allocate of an accelerator resource. kubelet allocates a pod's
  // resources one after the other (GetPreferredAllocation, then Allocate, per resource) and never
  // tells a plugin what another one gave: a NIC request that follows within kPodWindow is taken to
  // be the same pod's, and prefers the NICs nearest to these GPUs (docs/kubernetes.md).
  void note_gpus(std::vector<size_t> accelerators) const {
    std::lock_guard lock(mutex_);
    last_gpus_ = std::move(accelerators);
    last_gpus_at_ = Clock::now();
  }
  std::vector<size_t> recent_gpus() const {
    std::lock_guard lock(mutex_);
    if (Clock::now() - last_gpus_at_ > kPodWindow) return {};
    return last_gpus_;
  }
  static constexpr std::chrono::seconds kPodWindow{10};

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::shared_ptr<const Snapshot> snapshot_;
  std::uint64_t generation_ = 0;
  mutable std::vector<size_t> last_gpus_;
  mutable Clock::time_point last_gpus_at_{};
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
    bool ok =
        d.nic ? true : !d.lost && d.accelerator < s.healthy.size() && s.healthy[d.accelerator];
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
    if (resource->kind != ResourceKind::accelerator) {
      auto gpus = board_.recent_gpus();
      for (const auto& c : req->container_requests()) {
        std::vector<std::string> available(c.available_deviceids().begin(),
                                           c.available_deviceids().end());
        std::vector<std::string> must(c.must_include_deviceids().begin(),
                                      c.must_include_deviceids().end());
        size_t size = c.allocation_size() < 0 ? 0 : static_cast<size_t>(c.allocation_size());
        auto chosen =
            choose_nic_allocation(snapshot->plan->model, *resource, gpus, available, must, size);
        if (!chosen) return failed(chosen.error());
        auto* resp = out->add_container_responses();
        for (const auto& id : *chosen)
          resp->add_deviceids(id);
      }
      return grpc::Status::OK;
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
    std::vector<size_t> gpus;
    auto withdrawn = plan.withdrawn.find(resource_);
    for (const auto& c : req->container_requests()) {
      std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
      for (const auto& id : ids) {
        if (r->device(id) || withdrawn == plan.withdrawn.end() || !withdrawn->second.count(id))
          continue;
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "device " + id + ": " + resource_ +
                                " no longer advertises it (the node's devices changed: a MIG "
                                "reconfiguration or a GPU gone); the pod must be scheduled again");
      }
      auto a = compute_allocation(plan.model, *r, plan.nodes, ids, plan.allocate, plan.nic_nodes);
      if (!a) return failed(a.error());
      if (r->kind == ResourceKind::accelerator) {
        for (const auto& id : ids) {
          if (const PluginDevice* d = r->device(id)) gpus.push_back(d->accelerator);
        }
      }
      auto* resp = out->add_container_responses();
      for (const auto& [k, v] : a->envs)
        (*resp->mutable_envs())[k] = v;
      for (const auto& [k, v] : a->annotations)
        (*resp->mutable_annotations())[k] = v;
      for (const auto& name : a->cdi_devices)
        resp->add_cdi_devices()->set_name(name);
      for (const auto& d : a->devices) {
        auto* spec = resp->add_devices();
        spec->set_container_path(d.container_path);
        spec->set_host_path(d.host_path);
        spec->set_permissions(d.permissions);
      }
    }
    if (!gpus.empty()) board_.note_gpus(std::move(gpus));
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
  std::chrono::milliseconds backoff{kFirstRetry};
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
  std::optional<NicConfig> nic;  // the last good NIC config
  std::optional<std::string> nic_text;
  std::optional<Error> nic_error;
  std::map<std::string, bool> health;  // by PCI bus id
  std::vector<Server> servers;
  FileId kubelet_file;
  unsigned registrations = 0;
  std::map<std::string, std::string> logged;  // last line per subject

  Clock::time_point kubelet_seen{};  // when the current kubelet.sock was first seen

  std::thread watcher;
  std::atomic<bool> stopping{false};
  int wake_fd = -1;     // an eventfd: stop() wakes the watcher with it
  int inotify_fd = -1;  // the kubelet directory and the config files' directories
  int lock_fd = -1;     // holds the flock on kLockName while the plugin runs

  explicit Impl(DevicePluginOptions o) : options(std::move(o)) {}
  ~Impl() {
    for (int fd : {wake_fd, inotify_fd, lock_fd}) {
      if (fd >= 0) ::close(fd);
    }
  }

  std::string path(const std::string& name) const { return options.kubelet_dir + "/" + name; }

  void emit(const std::string& line) const {
    if (options.log) {
      options.log(line);
    } else {
      std::fprintf(stderr, "polyaccel agent: %s\n", line.c_str());
    }
  }

  // Logs a line about `subject` once, then only when it changes: a state (a persistent failure).
  void log(const std::string& subject, const std::string& line) {
    auto& last = logged[subject];
    if (last == line) return;
    last = line;
    emit(line);
  }

  // Logs an event (a registration, a socket made again) every time it happens; it also clears
  // what `log` last said of the subject, so that a failure after it shows again.
  void event(const std::string& subject, const std::string& line) {
    logged.erase(subject);
    emit(line);
  }

  // The flock on kLockName: a second agent on the same directory would delete our sockets and
  // we theirs, each registering over the other.
  Status take_lock() {
    const std::string file = path(kLockName);
    int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      return Error{ErrorCode::io, file, std::string("cannot be opened: ") + std::strerror(errno),
                   "is --kubelet-dir writable?"};
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      char buf[32] = {};
      ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
      holder.erase(std::remove_if(holder.begin(), holder.end(),
                                  [](unsigned char c) { return c < '0' || c > '9'; }),
                   holder.end());
      ::close(fd);
      return bad_input(file,
                       "is held by another polyaccel agent" +
                           (holder.empty() ? std::string() : " (pid " + holder + ")") +
                           ": two device plugins on one kubelet directory delete each "
                           "other's sockets",
                       "run one agent per node, or give this one its own --kubelet-dir");
    }
    std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
      // The pid is only a hint for the message above; the lock itself holds.
    }
    lock_fd = fd;
    return Ok{};
  }

  // inotify on the kubelet directory (kubelet.sock made again, our sockets removed) and on the
  // directories of the config files (a ConfigMap update renames a new ..data link in).
  void watch_directories() {
    inotify_fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd < 0) {
      log("inotify", std::string("inotify unavailable (") + std::strerror(errno) +
                         "): looking at the kubelet directory every " +
                         std::to_string(options.poll_interval.count()) + " ms");
      return;
    }
    const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE |
                          IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;
    std::set<std::string> dirs{options.kubelet_dir};
    for (const auto& file : {options.sharing_config, options.nic_config}) {
      if (file.empty()) continue;
      auto dir = std::filesystem::path(file).parent_path();
      dirs.insert(dir.empty() ? std::string(".") : dir.string());
    }
    for (const auto& dir : dirs) {
      if (::inotify_add_watch(inotify_fd, dir.c_str(), mask) < 0) {
        log("inotify " + dir, "cannot watch " + dir + ": " + std::strerror(errno));
      }
    }
  }

  // Reads every pending inotify event; what changed is looked at by tick() itself.
  void drain_inotify() const {
    alignas(inotify_event) char buf[16384];
    while (::read(inotify_fd, buf, sizeof buf) > 0) {
    }
  }

  // How long the watcher may sleep: until the next registration retry, at most poll_interval.
  int sleep_ms() const {
    std::lock_guard lock(mutex);
    auto now = Clock::now();
    auto until = now + options.poll_interval;
    for (const auto& s : servers) {
      if (!s.registered && kubelet_file.exists) until = std::min(until, s.next_registration);
    }
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    return static_cast<int>(std::clamp<long long>(ms, 0, 24LL * 3600 * 1000));
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

  // Reads the NIC config when its content changed, as reload_sharing. True when one was taken.
  Result<bool> reload_nic() {
    if (options.nic_config.empty()) return false;
    auto text = read_input_file(options.nic_config, kMaxConfigFileBytes, "NIC config");
    Result<NicConfig> parsed =
        text ? parse_nic_config(*text, options.nic_config) : Result<NicConfig>(text.error());
    if (text && nic_text && *nic_text == *text) return false;
    if (text) nic_text = *text;
    if (!parsed) {
      if (!nic) return parsed.error();
      nic_error = parsed.error();
      log("nic", parsed.error().message() + "; keeping the last good NIC config");
      return false;
    }
    nic = std::move(*parsed);
    nic_error.reset();
    log("nic", "NIC config " + options.nic_config + " taken");
    return true;
  }

  // GPUs without a NUMA node in the model (the vendor library listed them, the host topology did
  // not hold them) take the one sysfs gives; each device's source is logged.
  void complete_locality(HostModel& m) {
    for (auto& a : m.accelerators) {
      const std::string bus = a.pci.address.to_string();
      std::string source = "the host topology";
      if (a.pci.numa_nodes.empty() && !options.root.empty()) {
        auto n = read_int_file(std::filesystem::path(options.root) / "sys/bus/pci/devices" / bus /
                               "numa_node");
        // -1: the firmware gives none. A node the model does not know is not believed.
        if (n && *n >= 0 && *n < 65536 &&
            (m.numa_nodes.empty() || m.numa_node(static_cast<unsigned>(*n)))) {
          a.pci.numa_nodes = {static_cast<unsigned>(*n)};
          source = "sysfs numa_node";
        }
      }
      std::string where = "unknown";
      if (!a.pci.numa_nodes.empty()) {
        where.clear();
        for (unsigned n : a.pci.numa_nodes)
          where += (where.empty() ? "" : ",") + std::to_string(n);
        where = "NUMA node " + where + " from " + source;
      }
      log("locality " + bus, a.id + " " + bus + ": " + where);
    }
  }

  Result<std::shared_ptr<Plan>> make_plan() {
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
    auto plan = std::make_shared<Plan>();
    plan->model = model;
    complete_locality(plan->model);
    auto resources = plan_resources(plan->model, ro);
    if (!resources) return resources.error();
    plan->resources = std::move(*resources);
    plan->nic_nodes = read_nic_nodes(plan->model, options.root);
    if (nic) {
      auto nics = plan_nic_resources(plan->model, *nic, plan->nic_nodes);
      if (!nics) return nics.error();
      for (auto& r : *nics) {
        if (plan->resource(r.name))
          return bad_input(nic->source, r.name + " is also an accelerator resource");
        plan->resources.push_back(std::move(r));
      }
    }
    for (const auto& r : plan->resources) {
      for (const auto& d : r.devices) {
        if (d.lost && d.replica == 0) {
          log("lost " + d.id, d.id + " is in the host topology but " + r.name +
                                  "'s vendor library does not answer for it: advertised Unhealthy");
        }
      }
    }
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
      if (r.kind != ResourceKind::accelerator) continue;
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
    if (Status st = prepare_socket_path(socket); !st) return st;
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
    s.backoff = kFirstRetry;
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

  // The ids the plan before `next` advertised and `next` does not, per resource, added to those
  // withdrawn earlier (an id advertised again leaves the list); each change is logged.
  void note_withdrawn(Plan& next) {
    auto current = board.get().first;
    if (current) next.withdrawn = current->plan->withdrawn;
    for (const auto& r : next.resources) {
      auto& gone = next.withdrawn[r.name];
      for (const auto& d : r.devices)
        gone.erase(d.id);
      const PluginResource* before = current ? current->plan->resource(r.name) : nullptr;
      if (!before) continue;
      std::vector<std::string> added, removed;
      for (const auto& d : before->devices) {
        if (r.device(d.id)) continue;
        removed.push_back(d.id);
        gone.insert(d.id);
      }
      for (const auto& d : r.devices)
        if (!before->device(d.id)) added.push_back(d.id);
      // Bounded on a node reconfigured for months: past the limit, the first ids in the set's
      // order are forgotten (arbitrary ones; Allocate then calls such an id unknown).
      while (gone.size() > kMaxWithdrawnIds)
        gone.erase(gone.begin());
      if (added.empty() && removed.empty()) continue;
      std::string line = r.name + ": " + std::to_string(r.devices.size()) + " devices now";
      for (const auto& id : added)
        line += ", +" + id;
      for (const auto& id : removed)
        line += ", -" + id;
      event("devices " + r.name, line);
    }
    // A resource no longer served has no server: kubelet finds its socket gone.
    for (auto it = next.withdrawn.begin(); it != next.withdrawn.end();) {
      if (!next.resource(it->first) || it->second.empty()) {
        it = next.withdrawn.erase(it);
      } else {
        ++it;
      }
    }
  }

  // A new plan from the model and the last good sharing config. Keeps the old one on an error.
  Status replan() {
    auto plan = make_plan();
    if (!plan) return plan.error();
    note_withdrawn(**plan);
    std::shared_ptr<const Plan> p = *plan;
    publish(p);
    write_labels(*p);
    return sync_servers(*p);
  }

  // One look at the kubelet directory and the sharing config.
  void tick() {
    std::lock_guard lock(mutex);
    auto changed = reload_sharing();
    auto nic_changed = reload_nic();
    if ((changed && *changed) || (nic_changed && *nic_changed)) {
      Status st = replan();
      if (!st) log("plan", st.error().message() + "; keeping the resources served now");
    }
    FileId kubelet = file_id(path("kubelet.sock"));
    if (kubelet != kubelet_file) {
      // A new kubelet: it deleted our sockets at start; serve and register again.
      if (kubelet.exists) {
        kubelet_seen = Clock::now();
        event("kubelet", "kubelet.sock appeared in " + options.kubelet_dir);
      }
      for (auto& s : servers) {
        s.registered = false;
        s.next_registration = {};
        s.backoff = kFirstRetry;
      }
      kubelet_file = kubelet;
    }
    for (auto& s : servers) {
      if (file_id(path(s.socket_name)) != s.file) {
        event("socket " + s.resource, s.socket_name + " was removed; serving it again");
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
        auto after =
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - kubelet_seen);
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.1f", static_cast<double>(after.count()) / 1000.0);
        event("register " + s.resource, "registered " + s.resource + " with kubelet (" +
                                            std::string(ms) + " ms after kubelet.sock appeared)");
      } else {
        log("register " + s.resource, st.error().message());
        s.next_registration = Clock::now() + s.backoff;
        // For a second after kubelet.sock appeared, kubelet is most likely still starting: keep
        // trying every few milliseconds; then back off.
        if (Clock::now() - kubelet_seen > std::chrono::seconds(1))
          s.backoff = std::min(s.backoff * 2, kLongestRetry);
      }
    }
  }

  void watch() {
    while (!stopping) {
      tick();
      pollfd fds[2] = {{wake_fd, POLLIN, 0}, {inotify_fd, POLLIN, 0}};
      int n = ::poll(fds, inotify_fd >= 0 ? 2 : 1, sleep_ms());
      if (stopping) return;
      if (n > 0 && inotify_fd >= 0 && (fds[1].revents & POLLIN)) drain_inotify();
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
    // The configs first: a bad one leaves the kubelet directory as it was.
    auto loaded = impl_->reload_sharing();
    if (!loaded) return loaded.error();
    auto nic_loaded = impl_->reload_nic();
    if (!nic_loaded) return nic_loaded.error();
    Status locked = impl_->take_lock();
    if (!locked) return locked;
    impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (impl_->wake_fd < 0) {
      return Error{ErrorCode::io, "eventfd", std::strerror(errno), {}};
    }
    // Before the first look: a change after it is seen by the watcher's first poll.
    impl_->watch_directories();
    Status st = impl_->replan();
    if (!st) return st;
  }
  // The watcher registers with kubelet at once, off the caller's thread: kubelet dials back.
  impl_->watcher = std::thread([this] { run_part("device-plugin", [this] { impl_->watch(); }); });
  return Ok{};
}

void DevicePlugin::stop() {
  impl_->stopping = true;
  if (impl_->wake_fd >= 0) {
    std::uint64_t one = 1;
    if (::write(impl_->wake_fd, &one, sizeof one) < 0) {
      // Full counter: the watcher is already woken.
    }
  }
  if (impl_->watcher.joinable()) impl_->watcher.join();
  std::lock_guard lock(impl_->mutex);
  for (auto& s : impl_->servers)
    impl_->stop_server(s);
  impl_->servers.clear();
  if (impl_->lock_fd >= 0) {
    ::close(impl_->lock_fd);  // releases the flock: another agent may take the directory
    impl_->lock_fd = -1;
  }
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

std::optional<Error> DevicePlugin::nic_config_error() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->nic_error;
}

}  // namespace polyaccel
