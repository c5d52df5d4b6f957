// What kubelet does with a DRA plugin's health service (dra-health v1alpha1, KEP 4680): it dials
// dra.sock, opens NodeWatchResources and reads message after message until the stream ends; each
// message is the health of every device it names. The plugin and runner tests read it through
// this. Header-only, as kubelet_dra_client.h.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/proto/dra_health_v1alpha1.grpc.pb.h"

namespace polyaccel::testing {

namespace dra_health = ::v1alpha1;

class KubeletHealthWatch {
 public:
  struct Device {
    dra_health::HealthStatus health = dra_health::UNKNOWN;
    std::string pool, message;
    std::int64_t last_updated = 0, timeout_s = 0;
  };
  using Message = std::map<std::string, Device>;  // by device name

  explicit KubeletHealthWatch(const std::string& endpoint)
      : stub_(dra_health::DRAResourceHealth::NewStub(
            grpc::CreateChannel("unix:" + endpoint, grpc::InsecureChannelCredentials()))) {
    reader_ = stub_->NodeWatchResources(&ctx_, {});
    thread_ = std::thread([this] { read(); });
  }
  ~KubeletHealthWatch() {
    ctx_.TryCancel();
    thread_.join();
  }
  KubeletHealthWatch(const KubeletHealthWatch&) = delete;
  KubeletHealthWatch& operator=(const KubeletHealthWatch&) = delete;

  // Waits until a message satisfies `pred` (the latest first, then new ones) or the stream ends.
  template <class Pred>
  bool wait_message(Pred pred, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    size_t seen = messages_.empty() ? 0 : messages_.size() - 1;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      for (; seen < messages_.size(); ++seen)
        if (pred(messages_[seen])) return true;
      if (ended_) return false;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && seen == messages_.size())
        return false;
    }
  }
  // Waits until more than `n` messages came.
  bool wait_more_than(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return messages_.size() > n; });
  }
  bool wait_ended(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return ended_; });
  }
  std::vector<Message> messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }
  grpc::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  void read() {
    dra_health::NodeWatchResourcesResponse resp;
    while (reader_->Read(&resp)) {
      Message m;
      for (const auto& d : resp.devices())
        m[d.device().device_name()] = {d.health(), d.device().pool_name(), d.message(),
                                       d.last_updated_time(), d.health_check_timeout_seconds()};
      std::lock_guard<std::mutex> lock(mu_);
      messages_.push_back(std::move(m));
      cv_.notify_all();
    }
    grpc::Status st = reader_->Finish();
    std::lock_guard<std::mutex> lock(mu_);
    status_ = st;
    ended_ = true;
    cv_.notify_all();
  }

  std::unique_ptr<dra_health::DRAResourceHealth::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<dra_health::NodeWatchResourcesResponse>> reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message> messages_;
  bool ended_ = false;
  grpc::Status status_;
  std::thread thread_;
};

}  // namespace polyaccel::testing
