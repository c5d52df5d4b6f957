// The launch plan on real captured machines: local ranks get disjoint CPUs on their GPU's NUMA
// node and the RDMA NIC under their GPU's switch; --gpus N picks by topology; bad requests say why.
#include "launch/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/strings.h"
#include "discover/discover.h"
#include "discover/links.h"
#include "support/fixture_model.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::topology_fixture;

using polyaccel::testing::kXe8640;
const char* kJureca = "2socket-nps4-8numa-4xA100-4xmlx5-pcieswitch_jureca-dc-gpu.xml";
const char* kG4dn = "2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml";

HostModel load(const std::string& fixture) {
  return polyaccel::testing::fixture_model(fixture);
}

std::map<std::string, std::string> env_of(const LaunchPlan& p) {
  return {p.env.begin(), p.env.end()};
}

LaunchPlan rank_plan(const HostModel& m, unsigned rank, unsigned world,
                     std::optional<std::vector<std::string>> usable_netdevs = std::nullopt) {
  LaunchRequest r;
  r.usable_netdevs = std::move(usable_netdevs);
  r.argv = {"python", "train.py"};
  r.local_rank = rank;
  r.local_world_size = world;
  auto p = plan_launch(m, r);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return p ? *p : LaunchPlan{};
}

const Nic* nic_with_rdma(const HostModel& m, const std::string& rdma) {
  for (const auto& n : m.nics) {
    for (const auto& r : n.rdma_devices) {
      if (r == rdma) return &n;
    }
  }
  return nullptr;
}

// Every rank: one GPU, CPUs inside that GPU's NUMA node, memory on it, no CPU shared with
// another rank; the NICs in NCCL_IB_HCA hang below the GPU's own PCIe switch, or where the GPU
// has no NIC on its node, sit on its socket (the NUMA-distance tie-break).
void expect_ranks_disjoint_and_local(const HostModel& m, unsigned world) {
  CpuSet seen;
  for (unsigned r = 0; r < world; ++r) {
    LaunchPlan p = rank_plan(m, r, world);
    ASSERT_EQ(p.gpus.size(), 1u) << r;
    const Accelerator* a = m.accelerator(p.gpus[0].to_string());
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a, &m.accelerators[r % m.accelerators.size()]) << r;
    ASSERT_EQ(a->pci.numa_nodes.size(), 1u);
    const NumaNode* node = m.numa_node(a->pci.numa_nodes[0]);
    EXPECT_FALSE(p.cpus.empty()) << r;
    EXPECT_TRUE(node->cpus.contains(p.cpus)) << r << ": " << p.cpus.to_list();
    EXPECT_FALSE(seen.intersects(p.cpus)) << "rank " << r << " overlaps: " << p.cpus.to_list();
    seen |= p.cpus;
    EXPECT_EQ(p.mems, std::vector<unsigned>{node->os_index}) << r;
    auto env = env_of(p);
    EXPECT_EQ(env["OMP_NUM_THREADS"], std::to_string(p.cpus.count() / 2)) << r;  // SMT 2: cores
    auto hca = env.find("NCCL_IB_HCA");
    if (hca == env.end()) continue;
    ASSERT_EQ(hca->second.front(), '=');
    std::string names = hca->second.substr(1);
    for (size_t pos = 0; pos <= names.size();) {
      size_t comma = std::min(names.find(',', pos), names.size());
      const Nic* nic = nic_with_rdma(m, names.substr(pos, comma - pos));
      ASSERT_NE(nic, nullptr) << names;
      ASSERT_FALSE(nic->pci.switches.empty());
      if (nic->pci.numa_nodes != a->pci.numa_nodes) {
        const auto nic_node = nic->pci.numa_nodes.at(0);
        bool same_socket = false;
        for (const auto& pkg : m.packages) {
          auto has = [&](unsigned n) {
            return std::find(pkg.numa_nodes.begin(), pkg.numa_nodes.end(), n) !=
                   pkg.numa_nodes.end();
          };
          same_socket = same_socket || (has(nic_node) && has(node->os_index));
        }
        EXPECT_TRUE(same_socket) << "rank " << r << " NIC " << names;
      } else {
        EXPECT_EQ(nic->pci.switches.back().upstream_port, a->pci.switches.back().upstream_port)
            << "rank " << r << " NIC " << names;
      }
      pos = comma + 1;
    }
  }
}

TEST(LaunchPlan, Xe8640FourRanksOwnTheirGpuNodeAndSwitchNic) {
  HostModel m = load(kXe8640);
  expect_ranks_disjoint_and_local(m, 4);
  // The README's layout: the GPUs of NUMA 1, 3, 5 share a switch with an HCA; 0000:cb:00.0 on
  // NUMA 7 has none: the nearest by NUMA distance is mlx5_3 on node 5, its own socket.
  EXPECT_EQ(env_of(rank_plan(m, 0, 4))["NCCL_IB_HCA"], "=mlx5_0,mlx5_1");
  EXPECT_EQ(env_of(rank_plan(m, 1, 4))["NCCL_IB_HCA"], "=mlx5_2");
  EXPECT_EQ(env_of(rank_plan(m, 1, 4))["UCX_NET_DEVICES"], "mlx5_2:1");
  // The IPoIB port is named for NCCL's sockets only when it is up with an address.
  EXPECT_EQ(env_of(rank_plan(m, 1, 4)).count("NCCL_SOCKET_IFNAME"), 0u);
  EXPECT_EQ(env_of(rank_plan(m, 1, 4, std::vector<std::string>{"ibp94s0"}))["NCCL_SOCKET_IFNAME"],
            "=ibp94s0");
  LaunchPlan lonely = rank_plan(m, 2, 4);
  EXPECT_EQ(lonely.gpus[0].to_string(), "0000:cb:00.0");
  EXPECT_EQ(env_of(lonely)["NCCL_IB_HCA"], "=mlx5_3");
  EXPECT_TRUE(lonely.warnings.empty());
  EXPECT_EQ(env_of(rank_plan(m, 3, 4))["CUDA_VISIBLE_DEVICES"], "0,1,2,3");
  EXPECT_EQ(env_of(rank_plan(m, 3, 4))["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  // A whole GPU node: 14 cores, both hyperthreads of each.
  EXPECT_EQ(rank_plan(m, 1, 4).cpus.to_list(), "14-27,126-139");
}

// More local ranks than GPUs: each would bind to, and set_device, another rank's GPU. Refused,
// naming where the rank count came from.
TEST(LaunchPlan, Xe8640EightRanksOnFourGpusAreRefused) {
  HostModel m = load(kXe8640);
  LaunchRequest r;
  r.argv = {"python", "train.py"};
  r.local_rank = 1;
  r.local_world_size = 8;
  r.local_rank_source = "OMPI_COMM_WORLD_LOCAL_RANK";
  auto p = plan_launch(m, r);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::bad_input);
  EXPECT_EQ(p.error().message(),
            "8 local ranks (OMPI_COMM_WORLD_LOCAL_RANK): more than the 4 GPUs this process may use "
            "(start at most one rank per GPU, or give each rank its GPU with --gpu)");
}

// The GPU a script selects by its local rank is the one chosen: every GPU stays visible (NCCL's
// peer-to-peer between the ranks' GPUs), ordered so that index LOCAL_RANK is the rank's own.
TEST(LaunchPlan, VisibilityPutsTheRanksGpuAtItsLocalRank) {
  HostModel m = load(kXe8640);
  for (unsigned rank = 0; rank < 4; ++rank) {
    LaunchPlan p = rank_plan(m, rank, 4);
    ASSERT_TRUE(p.device_index.has_value());
    EXPECT_EQ(*p.device_index, rank);
    auto visible = split(env_of(p)["CUDA_VISIBLE_DEVICES"], ',');
    ASSERT_EQ(visible.size(), 4u);
    // PCI-order indexes (no NVML here): the entry at the rank's index is the chosen GPU.
    auto all = m.accelerators_of(Vendor::nvidia);
    EXPECT_EQ(all[std::stoul(visible[rank])]->pci.address, p.gpus[0]) << rank;
  }
  // A GPU another run holds is not chosen, but stays visible: rank 0 then takes gpu1 and still
  // finds it at index 0.
  LaunchRequest r;
  r.argv = {"x"};
  r.local_rank = 0;
  r.local_world_size = 2;
  r.unavailable_gpus = {m.accelerators[0].pci.address};
  auto p = plan_launch(m, r);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->gpu_ids, std::vector<std::string>{"gpu1"});
  EXPECT_EQ(env_of(*p)["CUDA_VISIBLE_DEVICES"], "1,0,2,3");
  EXPECT_EQ(p->device_index, 0u);
}

// What the process inherited narrows the GPUs it may use, as the runtimes compound the
// variables: a container's NVIDIA_VISIBLE_DEVICES, then CUDA_VISIBLE_DEVICES within it.
TEST(LaunchPlan, InheritedVisibilityNarrowsAndNeverWidens) {
  HostModel m = load(kXe8640);
  LaunchRequest r;
  r.argv = {"x"};
  r.local_rank = 1;
  r.local_world_size = 2;
  r.inherited_visibility = {{"NVIDIA_VISIBLE_DEVICES", "1,2,3"}, {"CUDA_VISIBLE_DEVICES", "1,2"}};
  auto p = plan_launch(m, r);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->gpu_ids, std::vector<std::string>{"gpu3"});  // gpu2, gpu3 given; rank 1: gpu3
  EXPECT_EQ(env_of(*p)["CUDA_VISIBLE_DEVICES"], "2,3");
  EXPECT_EQ(p->device_index, 1u);
  // --gpus N chooses among them only.
  LaunchRequest n;
  n.argv = {"x"};
  n.gpu_count = 3;
  n.inherited_visibility = {{"CUDA_VISIBLE_DEVICES", "0,3"}};
  auto q = plan_launch(m, n);
  ASSERT_FALSE(q.ok());
  // A GPU the variable names and the host lacks; "void" gives none.
  r.inherited_visibility = {{"CUDA_VISIBLE_DEVICES", "7"}};
  auto bad = plan_launch(m, r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "CUDA_VISIBLE_DEVICES=7: names 7, which is not one of the 4 GPUs visible to this "
            "process");
  r.inherited_visibility = {{"NVIDIA_VISIBLE_DEVICES", "void"}};
  EXPECT_FALSE(plan_launch(m, r).ok());
}

// issue 40 (5): a MIG device narrows the process to its instance's GPU, and the variable run sets
// names the MIG device, never the whole GPU; a MIG UUID the host does not have is refused.
TEST(LaunchPlan, AMigDeviceNarrowsToItsGpuAndStaysTheMigDevice) {
  HostModel m = load(kXe8640);
  ASSERT_GE(m.accelerators.size(), 4u);
  const std::string mig = "MIG-7c1d9e42-30ab-5f86-b2e4-9a0c6d1f3e58";
  AcceleratorInventory inv;
  inv.backend = "nvml";
  inv.uuid = "GPU-1e7f3a90-c4d2-5b86-0e1f-7a2c9d4b8e63";
  MigInstance instance;
  instance.uuid = mig;
  instance.profile_name = "3g.40gb";
  inv.mig_instances = {instance};
  m.accelerators[2].inventory = inv;
  for (const auto& given : std::vector<std::pair<std::string, std::string>>{
           {"CUDA_VISIBLE_DEVICES", mig}, {"NVIDIA_VISIBLE_DEVICES", mig}}) {
    SCOPED_TRACE(given.first);
    LaunchRequest r;
    r.argv = {"x"};
    r.inherited_visibility = {given};
    auto p = plan_launch(m, r);
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->gpu_ids, std::vector<std::string>{"gpu2"});
    EXPECT_EQ(env_of(*p)["CUDA_VISIBLE_DEVICES"], mig);
    EXPECT_TRUE(p->warnings.empty()) << p->warnings[0];
  }
  // With an index beside it: those two GPUs, the MIG one still by its MIG device.
  LaunchRequest two;
  two.argv = {"x"};
  two.gpu_count = 2;
  two.inherited_visibility = {{"CUDA_VISIBLE_DEVICES", "0," + mig}};
  auto p = plan_launch(m, two);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->gpu_ids, (std::vector<std::string>{"gpu0", "gpu2"}));
  EXPECT_EQ(env_of(*p)["CUDA_VISIBLE_DEVICES"].find(mig) != std::string::npos, true)
      << env_of(*p)["CUDA_VISIBLE_DEVICES"];
  // An instance this host does not have: refused, never every GPU.
  LaunchRequest unknown;
  unknown.argv = {"x"};
  unknown.inherited_visibility = {
      {"CUDA_VISIBLE_DEVICES", "MIG-00000000-0000-0000-0000-000000000000"}};
  auto bad = plan_launch(m, unknown);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("no MIG instance of the GPUs visible"), std::string::npos)
      << bad.error().message();
}

// Memory is bound only within the nodes the process may use (a container's cpuset.mems); where
// the rank's GPU node is not among them, nothing is bound and a warning says so.
TEST(LaunchPlan, MemoryNodesNeverWidened) {
  HostModel m = load(kXe8640);
  LaunchRequest r;
  r.argv = {"x"};
  r.local_rank = 1;
  r.local_world_size = 4;
  r.allowed_mems = {0, 2};
  auto p = plan_launch(m, r);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->mems.empty());  // gpu1 is on NUMA node 1
  ASSERT_EQ(p->warnings.size(), 1u);
  EXPECT_EQ(p->warnings[0],
            "memory not bound: NUMA node 1 is not among this process's memory "
            "nodes (0,2)");
  r.allowed_mems = {0, 1};
  p = plan_launch(m, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->mems, std::vector<unsigned>{1});
}

TEST(LaunchPlan, JurecaOneHcaPerGpu) {
  HostModel m = load(kJureca);
  expect_ranks_disjoint_and_local(m, 4);
  for (unsigned r = 0; r < 4; ++r) {
    auto env = env_of(rank_plan(m, r, 4, std::vector<std::string>{"ib0", "ib1", "ib2", "ib3"}));
    EXPECT_EQ(env["NCCL_IB_HCA"], "=mlx5_" + std::to_string(r)) << r;
    EXPECT_EQ(env["NCCL_SOCKET_IFNAME"], "=ib" + std::to_string(r)) << r;
  }
  EXPECT_EQ(rank_plan(m, 0, 4).mems, std::vector<unsigned>{3});  // gpu0 (0000:03:00.0) is on NUMA 3
}

TEST(LaunchPlan, G4dnEightGpusOnTwoNodesNeverOverlap) {
  HostModel m = load(kG4dn);
  CpuSet seen;
  for (unsigned r = 0; r < 8; ++r) {
    LaunchPlan p = rank_plan(m, r, 8);
    EXPECT_EQ(p.cpus.count(), 12u) << r;  // 24 cores of a node over its 4 GPUs, 2 PUs each
    EXPECT_FALSE(seen.intersects(p.cpus)) << r;
    seen |= p.cpus;
  }
  EXPECT_EQ(seen, m.pus);
}

// EFA is driven by aws-ofi-nccl through libfabric, not by NCCL's IB transport: the run gets the
// provider variables, as Allocate does, never an EFA device in NCCL_IB_HCA. g4dn's EFA is gen 1
// (1d0f:efa0), without RDMA read: FI_EFA_USE_DEVICE_RDMA=1 would make libfabric abort.
TEST(LaunchPlan, G4dnEfaGetsLibfabricNotIbVariables) {
  HostModel m = load(kG4dn);
  bool efa_seen = false;
  for (unsigned r = 0; r < 8; ++r) {
    auto env = env_of(rank_plan(m, r, 8));
    EXPECT_EQ(env.count("NCCL_IB_HCA"), 0u) << r;
    EXPECT_EQ(env.count("UCX_NET_DEVICES"), 0u) << r;
    if (env.count("FI_PROVIDER")) {
      efa_seen = true;
      EXPECT_EQ(env["FI_PROVIDER"], "efa");
      EXPECT_EQ(env.count("FI_EFA_USE_DEVICE_RDMA"), 0u) << r;
    }
  }
  EXPECT_TRUE(efa_seen);
}

TEST(LaunchPlan, GpusNPrefersGpusWithANicAndFewNodes) {
  HostModel m = load(kXe8640);
  LaunchRequest r;
  r.argv = {"x"};
  r.gpu_count = 2;
  auto p = plan_launch(m, r);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->gpus.size(), 2u);
  for (const auto& g : p->gpus)
    EXPECT_NE(g.to_string(), "0000:cb:00.0");  // the GPU without an HCA on its switch
  EXPECT_EQ(p->mems.size(), 2u);

  HostModel t4 = load(kG4dn);
  r.gpu_count = 4;
  p = plan_launch(t4, r);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->mems.size(), 1u);  // four T4 of one socket, not spread over two
  r.unavailable_gpus = {t4.accelerators[0].pci.address};
  p = plan_launch(t4, r);
  ASSERT_TRUE(p.ok());
  for (const auto& g : p->gpus)
    EXPECT_NE(g, t4.accelerators[0].pci.address);
}

TEST(LaunchPlan, HugepagesNeedFreePagesOfThatSizeOnTheNode) {
  HostModel m = load(kG4dn);
  LaunchRequest r;
  r.argv = {"x"};
  r.gpu_ids = {"gpu0"};
  r.hugepage_bytes = 2u << 20;
  r.existing_glibc_tunables = "glibc.malloc.arena_max=4";
  auto p = plan_launch(m, r);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(env_of(*p)["GLIBC_TUNABLES"], "glibc.malloc.arena_max=4:glibc.malloc.hugetlb=2097152");
  r.hugepage_bytes = 1u << 30;  // none reserved on that machine
  p = plan_launch(m, r);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message().find("no free hugepages"), std::string::npos)
      << p.error().message();
}

TEST(LaunchPlan, BadRequestsSayWhy) {
  HostModel m = load(kXe8640);
  auto expect_bad = [&](LaunchRequest r, const std::string& text) {
    if (r.argv.empty() && text != "nothing to run") r.argv = {"x"};
    auto p = plan_launch(m, r);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.error().code, ErrorCode::bad_input);
    EXPECT_NE(p.error().message().find(text), std::string::npos) << p.error().message();
  };
  expect_bad(LaunchRequest{}, "nothing to run");
  LaunchRequest r;
  r.gpu_ids = {"gpu0", "0000:4e:00.0"};
  expect_bad(r, "given twice");
  r.gpu_ids = {"gpu9"};
  expect_bad(r, "no such accelerator");
  r = {};
  r.gpu_count = 5;
  expect_bad(r, "only 4 free");
  r = {};
  r.local_rank = 4;
  r.local_world_size = 4;
  expect_bad(r, "not below the local world size 4");
  r = {};
  r.gpu_count = 1;
  r.local_rank = 0;
  expect_bad(r, "give one, not both");
  r = {};
  r.gpu_ids = {"gpu0"};
  r.unavailable_gpus = {m.accelerators[0].pci.address};
  expect_bad(r, "reserved by another run");
}

}  // namespace
}  // namespace polyaccel
