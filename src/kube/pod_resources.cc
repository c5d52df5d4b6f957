#include "kube/pod_resources.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include "core/agent_parts.h"
#include "core/log.h"
#include "kube/proto/podresources_v1.grpc.pb.h"

namespace polyaccel {
namespace {

// A device plugin that time-slices a GPU reports "<id>::<replica>": the pod holds <id>.
std::string base_device_id(const std::string& id) {
  size_t sep = id.rfind("::");
  return sep == std::string::npos ? id : id.substr(0, sep);
}

}  // namespace

PodAssignments list_pod_resources(const PodResourcesOptions& options) {
  PodAssignments out;
  struct stat st {};
  if (::stat(options.socket.c_str(), &st) != 0) {
    out.error = options.socket + ": no such socket (no kubelet on this host)";
    return out;
  }
  grpc::ChannelArguments args;
  // A node with many pods answers more than gRPC's default 4 MiB (DCGM-exporter #509).
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  auto channel = grpc::CreateCustomChannel("unix://" + options.socket,
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options.timeout);
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  grpc::Status status = stub->List(&ctx, request, &response);
  if (!status.ok()) {
    out.error = options.socket + ": List failed: " + status.error_message();
    return out;
  }
  out.reachable = true;
  out.time = std::chrono::system_clock::now();
  for (const auto& pod : response.pod_resources()) {
    for (const auto& c : pod.containers()) {
      for (const auto& devices : c.devices()) {
        PodRef ref{pod.name(), pod.namespace_(), c.name(), devices.resource_name()};
        for (const auto& id : devices.device_ids()) {
          add_holder(out.by_device[base_device_id(id)], ref);
        }
      }
      for (const auto& claim : c.dynamic_resources()) {
        PodRef ref{pod.name(), pod.namespace_(), c.name(),
                   claim.claim_namespace() + "/" + claim.claim_name()};
        for (const auto& r : claim.claim_resources()) {
          // Before 1.31 kubelet named no device: nothing to join.
          if (r.driver_name().empty() || r.device_name().empty()) continue;
          add_holder(out.by_claim_device[claim_device_key(r.driver_name(), r.pool_name(),
                                                          r.device_name())],
                     ref);
        }
      }
    }
  }
  return out;
}

PodResourcesClient::PodResourcesClient(PodResourcesOptions options)
    : options_(std::move(options)), snapshot_(std::make_shared<const PodAssignments>()) {}

PodResourcesClient::~PodResourcesClient() {
  stop();
}

void PodResourcesClient::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { run_part("pod-resources", [this] { run(); }); });
}

void PodResourcesClient::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const PodAssignments> PodResourcesClient::snapshot() const {
  std::lock_guard lock(mu_);
  return snapshot_;
}

void PodResourcesClient::refresh_soon() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

std::uint64_t PodResourcesClient::lists() const {
  std::lock_guard lock(mu_);
  return lists_;
}

void PodResourcesClient::run() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mu_);
  while (!stop_) {
    auto last = Clock::now();
    ++lists_;
    lock.unlock();
    auto next = std::make_shared<const PodAssignments>(list_pod_resources(options_));
    lock.lock();
    // "No socket" is the normal state of a host without kubelet: not worth a log line.
    bool absent = !next->reachable && next->error.find("no such socket") != std::string::npos;
    if (!next->reachable && !absent && next->error != last_error_) {
      log_line("polyaccel agent: pod-resources: " + next->error);
    }
    last_error_ = next->reachable || absent ? std::string() : next->error;
    snapshot_ = std::move(next);
    wake_ = false;
    cv_.wait_until(lock, last + options_.interval, [this] { return stop_ || wake_; });
    // The rate limit holds for an early wake-up too.
    cv_.wait_until(lock, last + options_.min_gap, [this] { return stop_; });
  }
}

}  // namespace polyaccel
