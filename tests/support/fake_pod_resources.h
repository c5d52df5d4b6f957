// A fake kubelet pod-resources server for tests: real gRPC over a unix socket, our .proto. It
// answers List with the pods the test sets, and counts the calls.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kube/proto/podresources_v1.grpc.pb.h"

namespace polyaccel::testing {

struct FakeContainer {
  std::string pod, pod_namespace, container, resource;
  std::vector<std::string> device_ids;
};

class FakePodResources final : public v1::PodResourcesLister::Service {
 public:
  // Serves on unix:`socket`; throws when it cannot.
  explicit FakePodResources(const std::string& socket) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (!server_) throw std::runtime_error("cannot serve on " + socket);
  }
  ~FakePodResources() override { server_->Shutdown(); }

  void set(std::vector<FakeContainer> containers) {
    std::lock_guard lock(mu_);
    containers_ = std::move(containers);
  }
  int lists() const { return lists_.load(); }

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    ++lists_;
    std::lock_guard lock(mu_);
    for (const auto& c : containers_) {
      auto* pod = response->add_pod_resources();
      pod->set_name(c.pod);
      pod->set_namespace_(c.pod_namespace);
      auto* ctr = pod->add_containers();
      ctr->set_name(c.container);
      auto* dev = ctr->add_devices();
      dev->set_resource_name(c.resource);
      for (const auto& id : c.device_ids)
        dev->add_device_ids(id);
    }
    return grpc::Status::OK;
  }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::vector<FakeContainer> containers_;
  std::atomic<int> lists_{0};
};

}  // namespace polyaccel::testing
