// A fake kubelet pod-resources server for tests: real gRPC over a unix socket, our .proto. It
// answers List with the pods the test sets, and counts the calls.
#pragma once

#include <grpcpp/grpcpp.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kube/proto/podresources_v1.grpc.pb.h"

namespace polyaccel::testing {

// A DRA claim a container references, with its allocated devices (driver, pool, device).
struct FakeClaim {
  std::string claim_namespace, claim_name;
  std::vector<std::array<std::string, 3>> devices;
};

struct FakeContainer {
  std::string pod, pod_namespace, container, resource;  // resource "": no device plugin's
  std::vector<std::string> device_ids;
  std::vector<FakeClaim> claims = {};
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
  // Answers as kubelet 1.<minor> does with its default feature gates: dynamic_resources only from
  // 1.34, where KubeletPodResourcesDynamicResources became beta and on (alpha, off, since 1.27).
  void set_kubelet_minor(int minor) { minor_ = minor; }

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
      if (!c.resource.empty()) {
        auto* dev = ctr->add_devices();
        dev->set_resource_name(c.resource);
        for (const auto& id : c.device_ids)
          dev->add_device_ids(id);
      }
      if (minor_ < 34) continue;
      for (const auto& claim : c.claims) {
        auto* dr = ctr->add_dynamic_resources();
        dr->set_claim_name(claim.claim_name);
        dr->set_claim_namespace(claim.claim_namespace);
        for (const auto& [driver, pool, device] : claim.devices) {
          auto* r = dr->add_claim_resources();
          r->add_cdi_devices()->set_name(driver + "/claim=" + device);
          r->set_driver_name(driver);
          r->set_pool_name(pool);
          r->set_device_name(device);
        }
      }
    }
    return grpc::Status::OK;
  }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::vector<FakeContainer> containers_;
  std::atomic<int> lists_{0};
  std::atomic<int> minor_{34};
};

}  // namespace polyaccel::testing
