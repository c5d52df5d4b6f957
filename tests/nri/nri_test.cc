// NRI's transport (the multiplexer's frames and ttrpc's messages, byte for byte as
// github.com/containerd/nri and ttrpc write them) and the CPU policy the plugin answers with.
// The plugin against the real containerd: Guest.node-containerd17/21 (tests/guest/node_agent.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nri/cpu_policy.h"
#include "nri/ttrpc.h"

namespace polyaccel::nri {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b)
    s.push_back(char(c));
  return s;
}

TEST(NriTtrpc, AMessageIsAFrameOfTheMuxAroundTtrpcsHeader) {
  TtrpcMessage m{kRuntimeServiceConn, 1, MessageType::request, 0, "abc"};
  // mux: conn 2, length 13; ttrpc: length 3, stream 1, type 1, flags 0; payload.
  EXPECT_EQ(encode_message(m),
            bytes({0, 0, 0, 2, 0, 0, 0, 13, 0, 0, 0, 3, 0, 0, 0, 1, 1, 0}) + "abc");
  MessageReader r;
  std::vector<TtrpcMessage> out;
  ASSERT_TRUE(r.feed(encode_message(m), out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].conn, 2u);
  EXPECT_EQ(out[0].stream, 1u);
  EXPECT_EQ(out[0].type, MessageType::request);
  EXPECT_EQ(out[0].payload, "abc");
}

// ttrpc writes through a buffered writer: a message's header and payload may come in separate
// frames, and the trunk in any pieces; two connections interleave.
TEST(NriTtrpc, MessagesSplitAcrossFramesAndReadsAreReassembled) {
  TtrpcMessage a{kPluginServiceConn, 3, MessageType::request, 0, std::string(70000, 'a')};
  TtrpcMessage b{kRuntimeServiceConn, 1, MessageType::response, 0, "b"};
  std::string ea = encode_message(a), eb = encode_message(b);
  // a's ttrpc header in one frame, its payload in two more.
  std::string body = ea.substr(kMuxHeaderSize);
  auto frame = [](std::uint32_t conn, const std::string& part) {
    std::string f = bytes({0, 0, 0, int(conn)});
    std::uint32_t n = part.size();
    f += bytes({int(n >> 24), int((n >> 16) & 255), int((n >> 8) & 255), int(n & 255)});
    return f + part;
  };
  std::string trunk = frame(1, body.substr(0, 10)) + eb + frame(1, body.substr(10, 40000)) +
                      frame(1, body.substr(40010));
  MessageReader r;
  std::vector<TtrpcMessage> out;
  for (std::size_t at = 0; at < trunk.size(); at += 777)
    ASSERT_TRUE(r.feed(std::string_view(trunk).substr(at, 777), out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].payload, "b");
  EXPECT_EQ(out[1].conn, 1u);
  EXPECT_EQ(out[1].stream, 3u);
  EXPECT_EQ(out[1].payload, a.payload);
}

TEST(NriTtrpc, OversizedOrUnknownInputEndsTheConnection) {
  std::vector<TtrpcMessage> out;
  MessageReader conn3;
  EXPECT_FALSE(conn3.feed(bytes({0, 0, 0, 3, 0, 0, 0, 0}), out));
  MessageReader huge_frame;
  auto r = huge_frame.feed(bytes({0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff}), out);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), ::testing::HasSubstr("a frame of 2147483647 bytes"));
  MessageReader huge_message;
  r = huge_message.feed(bytes({0, 0, 0, 1, 0, 0, 0, 10, 0x01, 0, 0, 0, 0, 0, 0, 1, 1, 0}), out);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), ::testing::HasSubstr("a ttrpc message of 16777216 bytes"));
  MessageReader bad_type;
  EXPECT_FALSE(bad_type.feed(bytes({0, 0, 0, 1, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 1, 9, 0}), out));
  EXPECT_THAT(out, IsEmpty());
}

CpuSet cpus(const char* list) {
  return *CpuSet::parse_list(list);
}

TEST(NriCpuPolicy, ClaimsPinTheirContainersAndTheOthersShareWhatIsLeft) {
  CpuPolicy p(cpus("0-15"), cpus("0-1"));
  std::vector<std::string> problems;
  // Synchronize: a shared container already on all CPUs is not moved.
  auto moved = p.synchronize({{"s1", "ns/a/c", {"PATH=/bin"}, "0-15"}}, problems);
  EXPECT_THAT(moved, IsEmpty());
  auto a = p.create({"c1", "ns/gpu/c", {"POLYACCEL_CPUS_uid1=2-5", "POLYACCEL_MEMS_uid1=0"}, ""},
                    problems);
  ASSERT_TRUE(a.adjust);
  EXPECT_EQ(a.adjust->cpus, "2-5");
  EXPECT_EQ(a.adjust->mems, "0");
  ASSERT_EQ(a.updates.size(), 1u);
  EXPECT_EQ(a.updates[0].id, "s1");
  EXPECT_EQ(a.updates[0].cpus, "0-1,6-15");
  // Two claims of one container: their union.
  auto b = p.create({"c2",
                     "ns/gpu2/c",
                     {"POLYACCEL_CPUS_u2=8-9", "POLYACCEL_CPUS_u3=12", "POLYACCEL_MEMS_u2=1"},
                     ""},
                    problems);
  EXPECT_EQ(b.adjust->cpus, "8-9,12");
  EXPECT_EQ(b.updates[0].cpus, "0-1,6-7,10-11,13-15");
  auto shared = p.create({"s2", "ns/b/c", {}, ""}, problems);
  EXPECT_EQ(shared.adjust->cpus, "0-1,6-7,10-11,13-15");
  EXPECT_THAT(shared.updates, IsEmpty());
  // c1 goes: both shared containers grow onto its CPUs.
  auto grown = p.remove("c1");
  ASSERT_EQ(grown.size(), 2u);
  EXPECT_EQ(grown[0].cpus, "0-7,10-11,13-15");
  EXPECT_THAT(p.remove("c1"), IsEmpty()) << "stop, then remove: once";
  EXPECT_THAT(problems, IsEmpty());
}

// After an agent restart the runtime's containers say what they hold: nobody moves.
TEST(NriCpuPolicy, ARestartLearnsTheClaimsBackAndMovesNobody) {
  CpuPolicy p(cpus("0-7"), cpus("0"));
  std::vector<std::string> problems;
  auto moved = p.synchronize({{"c1", "a", {"POLYACCEL_CPUS_u=0-3"}, "0-3"},
                              {"s1", "b", {}, "4-7"},
                              {"s2", "c", {}, "4-7"}},
                             problems);
  EXPECT_THAT(moved, IsEmpty());
  EXPECT_EQ(p.shared_pool(), cpus("4-7"));
  // A shared container the agent never saw (made while it was down) on all CPUs is moved.
  moved = p.synchronize({{"c1", "a", {"POLYACCEL_CPUS_u=0-3"}, "0-3"}, {"s3", "d", {}, "0-7"}},
                        problems);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].id, "s3");
  EXPECT_EQ(moved[0].cpus, "4-7");
}

TEST(NriCpuPolicy, ABadClaimValueLeavesTheContainerAsItIs) {
  CpuPolicy p(cpus("0-7"), cpus("0"));
  std::vector<std::string> problems;
  for (const char* env : {"POLYACCEL_CPUS_u=0-99", "POLYACCEL_CPUS_u=x",
                          "POLYACCEL_CPUS_u=", "POLYACCEL_MEMS_u=0", "POLYACCEL_MEMS_u=3"}) {
    auto r = p.create({"c", "ns/p/c", {env}, ""}, problems);
    EXPECT_FALSE(r.adjust) << env;
    EXPECT_THAT(r.updates, IsEmpty()) << env;
  }
  ASSERT_EQ(problems.size(), 5u);
  EXPECT_THAT(problems[0], ::testing::HasSubstr(
                               "ns/p/c: the container's POLYACCEL_CPUS_u: '0-99' is not a set of "
                               "this node's CPUs (0-7)"));
  EXPECT_EQ(p.shared_pool(), cpus("0-7"));
}

// A claimed container's hugetlb limits (kubelet's, from its pod's hugepages-<size> requests) are
// lowered to what its claimed NUMA nodes hold; other sizes, other containers and a claim without
// memory nodes keep theirs.
TEST(NriCpuPolicy, HugepageLimitsAreLoweredToWhatTheClaimedNodesHold) {
  EXPECT_EQ(page_size_bytes("2MB"), std::uint64_t{2} << 20);
  EXPECT_EQ(page_size_bytes("1GB"), std::uint64_t{1} << 30);
  EXPECT_EQ(page_size_bytes("64KB"), std::uint64_t{64} << 10);
  for (const char* bad : {"", "MB", "2mb", "2 MB", "-2MB", "99999999GB", "2TB", "0MB", "2048kB"})
    EXPECT_FALSE(page_size_bytes(bad)) << bad;
  const std::uint64_t mib2 = std::uint64_t{2} << 20, gib = std::uint64_t{1} << 30;
  const NodeHugepages pages = {{0, {{mib2, 512 * mib2}, {gib, 4 * gib}}},
                               {1, {{mib2, 16 * mib2}, {gib, 0}}}};
  CpuPolicy p(cpus("0-7"), cpus("0-1"));
  std::vector<std::string> problems;
  ContainerView c{"c1", "ns/p/c", {"POLYACCEL_CPUS_u=4-5", "POLYACCEL_MEMS_u=1"}, ""};
  c.hugepage_limits = {{"2MB", 64 * mib2}, {"1GB", 0}, {"64KB", 1 << 20}};
  auto a = p.create(c, problems, pages);
  ASSERT_TRUE(a.adjust);
  EXPECT_EQ(a.adjust->mems, "1");
  // 2MB: 64 pages asked, node 1 holds 16; 1GB asks none; node 1 has no 64KB pages.
  EXPECT_THAT(a.adjust->hugepages,
              ::testing::ElementsAre(HugepageLimit{"2MB", 16 * mib2}, HugepageLimit{"64KB", 0}));
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0],
            "ns/p/c: its pod asks 134217728 bytes of 2MB hugepages, its claim's NUMA nodes 1 hold "
            "33554432: its hugetlb limit is lowered to that");
  // Both nodes: the sum; within it nothing changes.
  problems.clear();
  c = {"c2", "ns/q/c", {"POLYACCEL_CPUS_v=6", "POLYACCEL_MEMS_v=0-1"}, ""};
  c.hugepage_limits = {{"2MB", 500 * mib2}, {"1GB", 4 * gib}};
  EXPECT_THAT(p.create(c, problems, pages).adjust->hugepages, IsEmpty());
  // Memory not pinned (CPUs alone) and shared containers: limits left to kubelet.
  c = {"c3", "ns/r/c", {"POLYACCEL_CPUS_w=7"}, ""};
  c.hugepage_limits = {{"2MB", 9999 * mib2}};
  EXPECT_THAT(p.create(c, problems, pages).adjust->hugepages, IsEmpty());
  c = {"s1", "ns/s/c", {}, ""};
  c.hugepage_limits = {{"2MB", 9999 * mib2}};
  EXPECT_THAT(p.create(c, problems, pages).adjust->hugepages, IsEmpty());
  // A size no kernel names is said and left.
  c = {"c4", "ns/t/c", {"POLYACCEL_CPUS_x=3", "POLYACCEL_MEMS_x=0"}, ""};
  c.hugepage_limits = {{"2\x1bMB", 1}};
  EXPECT_THAT(p.create(c, problems, pages).adjust->hugepages, IsEmpty());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], ::testing::HasSubstr("is not one this plugin knows"));
  EXPECT_THAT(problems[0], ::testing::Not(::testing::HasSubstr("\x1b")));
}

}  // namespace
}  // namespace polyaccel::nri
