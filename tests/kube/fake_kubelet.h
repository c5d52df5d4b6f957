// A kubelet for tests, over the real protocol: it serves Registration on kubelet.sock in a
// directory, and on each Register does what kubelet's device manager does: checks the version,
// dials the plugin's socket, calls GetDevicePluginOptions and keeps a ListAndWatch stream open,
// recording every response.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kube/proto/deviceplugin_v1beta1.grpc.pb.h"

namespace polyaccel::testing {

class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  struct Endpoint {
    v1beta1::RegisterRequest request;
    v1beta1::DevicePluginOptions options;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
    grpc::ClientContext stream_context;
    std::thread reader;
    std::vector<v1beta1::ListAndWatchResponse> updates;  // guarded by the kubelet's mutex
    bool stream_ended = false;
    std::chrono::steady_clock::time_point received;  // when its Register call came in
  };

  explicit FakeKubelet(std::string dir) : dir_(std::move(dir)) {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
    b.RegisterService(this);
    // Before the socket exists: a plugin quick enough may register before BuildAndStart returns.
    listening_since_ = std::chrono::steady_clock::now();
    server_ = b.BuildAndStart();
  }

  // When this kubelet began to start its server on kubelet.sock.
  std::chrono::steady_clock::time_point listening_since() const { return listening_since_; }
  ~FakeKubelet() override { stop(); }

  // As a kubelet that goes away: streams cancelled, server stopped, kubelet.sock removed.
  void stop() {
    std::vector<std::shared_ptr<Endpoint>> all;
    {
      std::lock_guard lock(mutex_);
      for (auto& [_, eps] : endpoints_)
        all.insert(all.end(), eps.begin(), eps.end());
    }
    for (auto& e : all)
      e->stream_context.TryCancel();
    for (auto& e : all) {
      if (e->reader.joinable()) e->reader.join();
    }
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_->Wait();
      server_.reset();
    }
    ::unlink((dir_ + "/kubelet.sock").c_str());
  }

  bool serving() const { return server_ != nullptr; }

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    const auto received = std::chrono::steady_clock::now();
    if (req->version() != "v1beta1")
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unsupported version");
    auto ep = std::make_shared<Endpoint>();
    ep->received = received;
    ep->request = *req;
    ep->channel = grpc::CreateChannel("unix:" + dir_ + "/" + req->endpoint(),
                                      grpc::InsecureChannelCredentials());
    if (!ep->channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)))
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "cannot dial " + req->endpoint());
    ep->stub = v1beta1::DevicePlugin::NewStub(ep->channel);
    grpc::ClientContext ctx;
    grpc::Status st = ep->stub->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &ep->options);
    if (!st.ok()) return st;
    Endpoint* raw = ep.get();
    ep->reader = std::thread([this, raw] {
      auto reader = raw->stub->ListAndWatch(&raw->stream_context, v1beta1::Empty());
      v1beta1::ListAndWatchResponse r;
      while (reader->Read(&r)) {
        std::lock_guard lock(mutex_);
        raw->updates.push_back(r);
        cv_.notify_all();
      }
      reader->Finish();
      std::lock_guard lock(mutex_);
      raw->stream_ended = true;
      cv_.notify_all();
    });
    std::lock_guard lock(mutex_);
    endpoints_[req->resource_name()].push_back(ep);
    cv_.notify_all();
    return grpc::Status::OK;
  }

  // How many times this resource registered.
  size_t registrations(const std::string& resource) {
    std::lock_guard lock(mutex_);
    return endpoints_[resource].size();
  }

  // The newest endpoint of a resource, waiting up to `timeout` for a registration.
  std::shared_ptr<Endpoint> endpoint(const std::string& resource,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                     size_t at_least = 1) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, timeout, [&] { return endpoints_[resource].size() >= at_least; });
    auto& eps = endpoints_[resource];
    return eps.size() >= at_least ? eps.back() : nullptr;
  }

  // Waits for a ListAndWatch response of the endpoint that satisfies `pred`; the latest one.
  std::optional<v1beta1::ListAndWatchResponse> wait_update(
      const std::shared_ptr<Endpoint>& ep,
      const std::function<bool(const v1beta1::ListAndWatchResponse&)>& pred,
      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    std::optional<v1beta1::ListAndWatchResponse> found;
    cv_.wait_for(lock, timeout, [&] {
      if (!ep->updates.empty() && pred(ep->updates.back())) found = ep->updates.back();
      return found.has_value();
    });
    return found;
  }

  // Waits up to `timeout` for the endpoint's ListAndWatch stream to end (the plugin stopped).
  bool wait_stream_end(const std::shared_ptr<Endpoint>& ep, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return ep->stream_ended; });
  }

  // Every ListAndWatch response of the endpoint so far, in order.
  std::vector<v1beta1::ListAndWatchResponse> updates(const std::shared_ptr<Endpoint>& ep) {
    std::lock_guard lock(mutex_);
    return ep->updates;
  }

  size_t update_count(const std::shared_ptr<Endpoint>& ep) {
    std::lock_guard lock(mutex_);
    return ep->updates.size();
  }

 private:
  std::string dir_;
  std::unique_ptr<grpc::Server> server_;
  std::chrono::steady_clock::time_point listening_since_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<std::shared_ptr<Endpoint>>> endpoints_;
};

// Allocate as kubelet calls it for one container of a pod: `ids` from the endpoint's list.
inline grpc::Status allocate(FakeKubelet::Endpoint& ep, const std::vector<std::string>& ids,
                             v1beta1::AllocateResponse* out) {
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : ids)
    c->add_devices_ids(id);
  grpc::ClientContext ctx;
  return ep.stub->Allocate(&ctx, req, out);
}

}  // namespace polyaccel::testing
