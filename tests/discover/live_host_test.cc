// Discovery of the machine the tests run on, checked against its own sysfs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/file_io.h"
#include "discover/discover.h"

namespace polyaccel {
namespace {

TEST(LiveHost, SeesEveryOnlineCpuAndTheNumaNodes) {
  auto m = discover_host({});
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->source, "live");
  EXPECT_GE(m->numa_nodes.size(), 1u);
  EXPECT_FALSE(m->architecture.empty());
  EXPECT_EQ(m->page_size, static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
  auto online = read_first_line("/sys/devices/system/cpu/online");
  ASSERT_TRUE(online);
  auto cpus = CpuSet::parse_list(*online);
  ASSERT_TRUE(cpus);
  EXPECT_EQ(m->pus, *cpus);
  // Each NUMA node the kernel shows is there with the CPUs of its cpulist.
  size_t kernel_nodes = 0;
  for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/node")) {
    std::string name = e.path().filename().string();
    if (name.rfind("node", 0) != 0 || !std::isdigit(static_cast<unsigned char>(name[4]))) continue;
    ++kernel_nodes;
    unsigned idx = static_cast<unsigned>(std::stoul(name.substr(4)));
    const NumaNode* n = m->numa_node(idx);
    ASSERT_TRUE(n) << name;
    auto list = read_first_line(e.path() / "cpulist");
    ASSERT_TRUE(list);
    EXPECT_EQ(n->cpus, *CpuSet::parse_list(*list)) << name;
    // Hugepages come from sysfs on the live host, with their free count.
    for (const auto& h : n->hugepages)
      EXPECT_TRUE(h.free.has_value());
  }
  if (kernel_nodes > 0) {
    EXPECT_EQ(m->numa_nodes.size(), kernel_nodes);
  }
}

}  // namespace
}  // namespace polyaccel
