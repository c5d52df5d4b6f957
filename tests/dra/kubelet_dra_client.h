// What kubelet sends a DRA plugin on its socket (dra/v1 NodePrepareResources and
// NodeUnprepareResources): what the plugin, dynamic MIG and agent tests call. Header-only, as
// dra_fixture.h.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "kube/proto/dra_v1.grpc.pb.h"

namespace polyaccel::testing {

namespace dra_v1 = k8s::io::kubelet::pkg::apis::dra::v1;

// Claims by name and uid, all in namespace ns1.
using DraClaims = std::vector<std::pair<std::string, std::string>>;

// One call of the plugin's dra/v1 service on its socket `endpoint` for `claims`, 45 s at most:
// the call's status (a claim's own error is in the response). For tests and node_kubelet alike.
template <class Request, class Response>
grpc::Status try_dra_plugin(const std::string& endpoint, const DraClaims& claims,
                            grpc::Status (dra_v1::DRAPlugin::Stub::*rpc)(grpc::ClientContext*,
                                                                         const Request&, Response*),
                            Response* resp) {
  auto stub = dra_v1::DRAPlugin::NewStub(
      grpc::CreateChannel("unix:" + endpoint, grpc::InsecureChannelCredentials()));
  Request req;
  for (const auto& [name, uid] : claims) {
    auto* c = req.add_claims();
    c->set_namespace_("ns1");
    c->set_name(name);
    c->set_uid(uid);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));
  return ((*stub).*rpc)(&ctx, req, resp);
}

// The same; a failed call fails the test with its message.
template <class Request, class Response>
Response call_dra_plugin(const std::string& endpoint, const DraClaims& claims,
                         grpc::Status (dra_v1::DRAPlugin::Stub::*rpc)(grpc::ClientContext*,
                                                                      const Request&, Response*)) {
  Response resp;
  grpc::Status s = try_dra_plugin(endpoint, claims, rpc, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp;
}

inline dra_v1::NodePrepareResourcesResponse node_prepare(const std::string& endpoint,
                                                         const DraClaims& claims) {
  return call_dra_plugin(endpoint, claims, &dra_v1::DRAPlugin::Stub::NodePrepareResources);
}

inline dra_v1::NodeUnprepareResourcesResponse node_unprepare(const std::string& endpoint,
                                                             const DraClaims& claims) {
  return call_dra_plugin(endpoint, claims, &dra_v1::DRAPlugin::Stub::NodeUnprepareResources);
}

}  // namespace polyaccel::testing
