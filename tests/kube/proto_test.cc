// The generated kubelet API code: messages survive the wire, and the gRPC method paths are the
// ones kubelet calls (a wrong package name would break them silently).
#include <gtest/gtest.h>

#include "kube/proto/deviceplugin_v1beta1.grpc.pb.h"
#include "kube/proto/podresources_v1.grpc.pb.h"

namespace {

TEST(KubeProto, PodResourcesRoundTrip) {
  v1::ListPodResourcesResponse resp;
  auto* pod = resp.add_pod_resources();
  pod->set_name("trainer-0");
  pod->set_namespace_("ml");
  auto* ctr = pod->add_containers();
  ctr->set_name("main");
  ctr->add_cpu_ids(4);
  auto* dev = ctr->add_devices();
  dev->set_resource_name("nvidia.com/gpu");
  dev->add_device_ids("GPU-5f3c2a1e-0000-0000-0000-000000000001");
  dev->mutable_topology()->add_nodes()->set_id(1);
  auto* mem = ctr->add_memory();
  mem->set_memory_type("hugepages-1Gi");
  mem->set_size(8ull << 30);

  std::string wire;
  ASSERT_TRUE(resp.SerializeToString(&wire));
  v1::ListPodResourcesResponse back;
  ASSERT_TRUE(back.ParseFromString(wire));
  ASSERT_EQ(back.pod_resources_size(), 1);
  const auto& c = back.pod_resources(0).containers(0);
  EXPECT_EQ(back.pod_resources(0).namespace_(), "ml");
  EXPECT_EQ(c.devices(0).device_ids(0), "GPU-5f3c2a1e-0000-0000-0000-000000000001");
  EXPECT_EQ(c.devices(0).topology().nodes(0).id(), 1);
  EXPECT_EQ(c.memory(0).size(), 8ull << 30);
  EXPECT_EQ(c.cpu_ids(0), 4);
}

TEST(KubeProto, FieldNumbersMatchKubelet) {
  // Bytes a kubelet would send: ContainerDevices{resource_name=1:"a", device_ids=2:"b"}.
  const std::string wire(
      "\x0a\x01"
      "a"
      "\x12\x01"
      "b",
      6);
  v1::ContainerDevices d;
  ASSERT_TRUE(d.ParseFromString(wire));
  EXPECT_EQ(d.resource_name(), "a");
  ASSERT_EQ(d.device_ids_size(), 1);
  EXPECT_EQ(d.device_ids(0), "b");

  // Device{ID=1:"x", health=2:"Healthy"}
  v1beta1::Device dev;
  dev.set_id("x");
  dev.set_health("Healthy");
  EXPECT_EQ(dev.SerializeAsString(), std::string("\x0a\x01x\x12\x07Healthy", 12));
}

TEST(KubeProto, DevicePluginRoundTrip) {
  v1beta1::AllocateResponse resp;
  auto* c = resp.add_container_responses();
  (*c->mutable_envs())["NVIDIA_VISIBLE_DEVICES"] = "GPU-1,GPU-2";
  auto* spec = c->add_devices();
  spec->set_host_path("/dev/nvidia0");
  spec->set_container_path("/dev/nvidia0");
  spec->set_permissions("rw");
  c->add_cdi_devices()->set_name("nvidia.com/gpu=0");
  v1beta1::AllocateResponse back;
  ASSERT_TRUE(back.ParseFromString(resp.SerializeAsString()));
  EXPECT_EQ(back.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-1,GPU-2");
  EXPECT_EQ(back.container_responses(0).devices(0).permissions(), "rw");
  EXPECT_EQ(back.container_responses(0).cdi_devices(0).name(), "nvidia.com/gpu=0");
}

TEST(KubeProto, MethodPathsAreKubelets) {
  EXPECT_EQ(v1::PodResourcesLister::service_full_name(), std::string("v1.PodResourcesLister"));
  EXPECT_EQ(v1beta1::Registration::service_full_name(), std::string("v1beta1.Registration"));
  EXPECT_EQ(v1beta1::DevicePlugin::service_full_name(), std::string("v1beta1.DevicePlugin"));
  EXPECT_EQ(v1::ListPodResourcesRequest::descriptor()->file()->package(), "v1");
}

}  // namespace
