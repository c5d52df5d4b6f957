// The RDMA port collector on the captured Dell XE8640 (4 H100, 4 mlx5 HCAs behind the GPUs'
// PCIe switches) with a sys/class/infiniband tree the test builds: values and labels as the
// sampler reads them, port_rcv_data's 4-byte words, and files that are no reading (not a number,
// past 64 bits, too large, a link to a device or a FIFO) skipped while the rest of the port reads.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "discover/discover.h"
#include "discover/links.h"
#include "discover/rdma_ports.h"
#include "exporter/exporter.h"
#include "exporter/families.h"
#include "exporter/family_values.h"
#include "exporter/host_sampler.h"
#include "support/infiniband_tree.h"
#include "support/test_support.h"

namespace polyaccel::exporter {
namespace {

namespace fs = std::filesystem;
using polyaccel::testing::write_text;

class RdmaPorts : public ::testing::Test {
 protected:
  void SetUp() override {
    DiscoverOptions o;
    o.topology_xml = polyaccel::testing::xe8640_topology();
    o.backends = BackendMode::off;
    auto m = discover_host(o);
    ASSERT_TRUE(m) << m.error().message();
    model_ = *m;
    root_ = tmp_.path() / "root";
    for (const auto& nic : model_.nics) {
      for (const auto& dev : nic.rdma_devices)
        devices_.push_back(dev);
    }
    ASSERT_EQ(devices_.size(), 4u);
    for (size_t i = 0; i < devices_.size(); ++i)
      write_port(devices_[i], 1, 1000 * (i + 1));
  }

  fs::path port_dir(const std::string& dev, unsigned port) {
    return root_ / "sys/class/infiniband" / dev / "ports" / std::to_string(port);
  }

  // A healthy HDR port whose counters are `base` plus a per-counter offset.
  void write_port(const std::string& dev, unsigned port, std::uint64_t base) {
    fs::path d = port_dir(dev, port);
    write_text(d / "state", "4: ACTIVE\n");
    write_text(d / "phys_state", "5: LinkUp\n");
    write_text(d / "rate", "200 Gb/sec (4X HDR)\n");
    const char* counters[] = {"port_rcv_data",     "port_xmit_data", "port_rcv_packets",
                              "port_xmit_packets", "link_downed",    "symbol_error",
                              "port_rcv_errors",   "VL15_dropped",   "unicast_rcv_packets"};
    std::uint64_t k = 0;
    for (const char* c : counters)
      write_text(d / "counters" / c, std::to_string(base + k++) + "\n");
    write_text(d / "hw_counters/out_of_sequence", std::to_string(base + 100) + "\n");
    write_text(d / "hw_counters/rnr_nak_retry_err", "3\n");
    write_text(d / "hw_counters/lifespan", "10\n");  // a setting, not a counter: not listed
  }

  Families scrape() {
    auto host = std::make_shared<const HostSample>(read_host_sample(model_, root_.string()));
    Sources sources{[] { return std::make_shared<const AcceleratorSnapshot>(); },
                    [host] { return host; }, nullptr};
    Scraper scraper(make_all_collectors(), ExporterOptions{}, sources);
    return scraper.scrape();
  }

  polyaccel::testing::TempDir tmp_;
  fs::path root_;
  HostModel model_;
  std::vector<std::string> devices_;
};

TEST_F(RdmaPorts, ValuesAndLabelsOfEveryPort) {
  auto f = scrape();
  EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", "rdma_port"}}), 1.0);
  EXPECT_EQ(count(f, "polyaccel_rdma_state_id"), 4u);
  for (size_t i = 0; i < model_.nics.size(); ++i) {
    const Nic& nic = model_.nics[i];
    if (nic.rdma_devices.empty()) continue;
    const std::string dev = nic.rdma_devices.front();
    const double base =
        1000.0 * (1 + (std::find(devices_.begin(), devices_.end(), dev) - devices_.begin()));
    Labels l = {{"device", dev},
                {"port", "1"},
                {"nic", nic.id},
                {"pci_bus_id", nic.pci.address.to_string()}};
    EXPECT_EQ(value(f, "polyaccel_rdma_state_id", l), 4.0) << dev;
    EXPECT_EQ(value(f, "polyaccel_rdma_physical_state_id", l), 5.0) << dev;
    EXPECT_EQ(value(f, "polyaccel_rdma_rate_bytes_per_second", l), 25e9) << dev;
    // port_rcv_data and port_xmit_data count 4-byte words.
    EXPECT_EQ(value(f, "polyaccel_rdma_port_data_received_bytes_total", l), 4 * base) << dev;
    EXPECT_EQ(value(f, "polyaccel_rdma_port_data_transmitted_bytes_total", l), 4 * (base + 1));
    EXPECT_EQ(value(f, "polyaccel_rdma_port_packets_received_total", l), base + 2);
    EXPECT_EQ(value(f, "polyaccel_rdma_link_downed_total", l), base + 4);
    EXPECT_EQ(value(f, "polyaccel_rdma_symbol_error_total", l), base + 5);
    EXPECT_EQ(value(f, "polyaccel_rdma_port_errors_received_total", l), base + 6);
    EXPECT_EQ(value(f, "polyaccel_rdma_vl15_dropped_total", l), base + 7);
    EXPECT_EQ(value(f, "polyaccel_rdma_unicast_packets_received_total", l), base + 8);
    EXPECT_EQ(value(f, "polyaccel_rdma_hw_out_of_sequence_total", l), base + 100);
    EXPECT_EQ(value(f, "polyaccel_rdma_hw_rnr_nak_retry_err_total", l), 3.0);
  }
  EXPECT_EQ(count(f, "polyaccel_rdma_hw_lifespan_total"), 0u);  // not a known counter
  // Files the tree lacks give no series, not zeros.
  EXPECT_EQ(count(f, "polyaccel_rdma_port_transmit_wait_total"), 0u);
}

// The NUMA node and GPU labels are the ones the rest of the project uses: discover/links.h's
// dram_node and nccl_nics (what `polyaccel nccl` writes as NCCL_IB_HCA for each GPU).
TEST_F(RdmaPorts, NumaNodeAndGpuAreTheNcclPairing) {
  auto f = scrape();
  size_t paired = 0;
  for (const auto& nic : model_.nics) {
    if (nic.rdma_devices.empty()) continue;
    std::string gpus;
    for (const auto& a : model_.accelerators) {
      for (const Nic* n : nccl_nics(model_, a))
        if (n->id == nic.id) gpus += (gpus.empty() ? "" : ",") + a.id;
    }
    paired += !gpus.empty();
    auto node = dram_node(model_, nic.pci);
    ASSERT_TRUE(node) << nic.id;
    EXPECT_EQ(count(f, "polyaccel_rdma_state_id",
                    {{"device", nic.rdma_devices.front()},
                     {"numa_node", std::to_string(*node)},
                     {"gpu", gpus}}),
              1u)
        << nic.id << " " << gpus;
  }
  // The fixtures README: ConnectX-7 mlx5_2 with the GPU of NUMA 1, the dual-port ConnectX-6
  // (mlx5_0, mlx5_1) with the GPU of NUMA 3, ConnectX-7 mlx5_3 with the GPU of NUMA 5 and, on
  // the same socket, the NIC-less GPU of NUMA 7.
  EXPECT_EQ(count(f, "polyaccel_rdma_state_id",
                  {{"device", "mlx5_2"}, {"numa_node", "1"}, {"gpu", "gpu1"}}),
            1u);
  EXPECT_EQ(count(f, "polyaccel_rdma_state_id", {{"device", "mlx5_0"}, {"gpu", "gpu0"}}), 1u);
  EXPECT_EQ(count(f, "polyaccel_rdma_state_id", {{"device", "mlx5_1"}, {"gpu", "gpu0"}}), 1u);
  EXPECT_EQ(count(f, "polyaccel_rdma_state_id",
                  {{"device", "mlx5_3"}, {"numa_node", "5"}, {"gpu", "gpu2,gpu3"}}),
            1u);
  EXPECT_GE(paired, 3u);
  EXPECT_EQ(count(f, "polyaccel_rdma_state_id", {{"gpu", ""}}), 4u - paired);
}

TEST_F(RdmaPorts, EveryPortOfADeviceInPortOrder) {
  write_port(devices_[0], 2, 5000);
  write_port(devices_[0], 10, 6000);
  write_text(root_ / "sys/class/infiniband" / devices_[0] / "ports/0/state", "4: ACTIVE\n");
  write_text(root_ / "sys/class/infiniband" / devices_[0] / "ports/x/state", "4: ACTIVE\n");
  auto ports = read_rdma_ports(root_.string(), devices_[0]);
  ASSERT_EQ(ports.size(), 3u);
  EXPECT_EQ(ports[0].port, 1u);
  EXPECT_EQ(ports[1].port, 2u);
  EXPECT_EQ(ports[2].port, 10u);
  auto f = scrape();
  EXPECT_EQ(value(f, "polyaccel_rdma_port_data_received_bytes_total",
                  {{"device", devices_[0]}, {"port", "10"}}),
            4.0 * 6000);
}

TEST_F(RdmaPorts, BadFilesAreNoReadingAndTheRestOfThePortReads) {
  fs::path d = port_dir(devices_[0], 1);
  write_text(d / "counters/port_rcv_data", "lots\n");
  write_text(d / "counters/port_xmit_data", "-1\n");
  write_text(d / "counters/port_rcv_packets", "18446744073709551616\n");   // 2^64
  write_text(d / "counters/link_downed", "7\n" + std::string(8192, ' '));  // oversized
  fs::remove(d / "counters/symbol_error");
  fs::create_symlink("/dev/zero", d / "counters/symbol_error");  // never ends
  fs::remove(d / "counters/port_rcv_errors");
  ASSERT_EQ(::mkfifo((d / "counters/port_rcv_errors").c_str(), 0600), 0);  // would block
  write_text(d / "state", "ACTIVE\n");
  write_text(d / "phys_state", "9: Unknown\n");  // PortPhysicalState is 0..7
  write_text(d / "rate", "nan Gb/sec (4X HDR)\n");
  auto f = scrape();
  EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", "rdma_port"}}), 1.0);
  Labels l = {{"device", devices_[0]}, {"port", "1"}};
  for (const char* name :
       {"polyaccel_rdma_port_data_received_bytes_total",
        "polyaccel_rdma_port_data_transmitted_bytes_total",
        "polyaccel_rdma_port_packets_received_total", "polyaccel_rdma_link_downed_total",
        "polyaccel_rdma_symbol_error_total", "polyaccel_rdma_port_errors_received_total",
        "polyaccel_rdma_state_id", "polyaccel_rdma_physical_state_id",
        "polyaccel_rdma_rate_bytes_per_second"})
    EXPECT_EQ(count(f, name, l), 0u) << name;
  EXPECT_EQ(value(f, "polyaccel_rdma_port_packets_transmitted_total", l), 1003.0);
  EXPECT_EQ(value(f, "polyaccel_rdma_hw_out_of_sequence_total", l), 1100.0);
  // The largest 64-bit word count, times 4 without wrapping.
  write_text(d / "counters/port_rcv_data", "18446744073709551615\n");
  f = scrape();
  EXPECT_EQ(value(f, "polyaccel_rdma_port_data_received_bytes_total", l),
            4.0 * 18446744073709551615.0);
}

TEST_F(RdmaPorts, DeviceNamesThatAreNotOnePathComponentReadNothing) {
  write_port("x", 1, 1);
  for (const char* name : {"..", ".", "", "mlx5_0/../x", "a b"})
    EXPECT_TRUE(read_rdma_ports(root_.string(), name).empty()) << name;
  EXPECT_EQ(read_rdma_ports(root_.string(), "x").size(), 1u);
  EXPECT_TRUE(read_rdma_ports("", devices_[0]).empty());  // no root: nothing read
}

TEST(RdmaPortText, StateRateAndCounterParsers) {
  EXPECT_EQ(parse_rdma_port_state("4: ACTIVE\n", 5), 4u);
  EXPECT_EQ(parse_rdma_port_state("1: DOWN", 5), 1u);
  EXPECT_EQ(parse_rdma_port_state("6: X", 5), std::nullopt);
  EXPECT_EQ(parse_rdma_port_state("ACTIVE", 5), std::nullopt);
  EXPECT_EQ(parse_rdma_port_state("-1: X", 5), std::nullopt);
  EXPECT_EQ(parse_rdma_port_state(": X", 5), std::nullopt);
  EXPECT_EQ(parse_rdma_port_rate("200 Gb/sec (4X HDR)\n"), 25e9);
  EXPECT_EQ(parse_rdma_port_rate("2.5 Gb/sec (1X SDR)"), 2.5e9 / 8);
  EXPECT_EQ(parse_rdma_port_rate("400 Gb/sec (4X NDR)"), 50e9);
  EXPECT_EQ(parse_rdma_port_rate("200 Mb/sec"), std::nullopt);
  EXPECT_EQ(parse_rdma_port_rate("inf Gb/sec"), std::nullopt);
  EXPECT_EQ(parse_rdma_port_rate("1e300 Gb/sec"), std::nullopt);
  EXPECT_EQ(parse_rdma_port_rate("-5 Gb/sec"), std::nullopt);
  EXPECT_EQ(parse_rdma_port_rate(""), std::nullopt);
  EXPECT_EQ(parse_rdma_port_rate("200"), std::nullopt);
  EXPECT_EQ(parse_rdma_counter("18446744073709551615\n"), 18446744073709551615ull);
  EXPECT_EQ(parse_rdma_counter("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parse_rdma_counter("0x10"), std::nullopt);
  EXPECT_EQ(parse_rdma_counter("1 2"), std::nullopt);
  EXPECT_EQ(parse_rdma_counter(""), std::nullopt);
}

// On a gathered tree (the NEC host, --fsroot): hwloc finds the RDMA devices the test adds below
// the two HCAs' PCI functions, and the sampler reads their ports through the same root.
TEST(RdmaPortsOnAGatheredTree, HwlocFindsTheDevicesAndTheSamplerReadsThem) {
  polyaccel::testing::TempDir tmp;
  const fs::path root = polyaccel::testing::extract_tarball(
      polyaccel::testing::topology_fixture(
          "sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"),
      tmp.path());
  polyaccel::testing::add_infiniband_device(root, polyaccel::testing::kNecIbHca0Dir, "mlx5_0",
                                            "100 Gb/sec (4X EDR)", 1000);
  polyaccel::testing::add_infiniband_device(root, polyaccel::testing::kNecIbHca1Dir, "mlx5_1",
                                            "100 Gb/sec (4X EDR)", 3000);
  DiscoverOptions o;
  o.fsroot = root.string();
  o.backends = BackendMode::off;
  auto m = discover_host(o);
  ASSERT_TRUE(m) << m.error().message();
  std::vector<std::string> found;
  for (const auto& nic : m->nics)
    found.insert(found.end(), nic.rdma_devices.begin(), nic.rdma_devices.end());
  ASSERT_EQ(found, (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  auto sample = read_host_sample(*m, root.string());
  ASSERT_EQ(sample.rdma_ports.size(), 2u);
  EXPECT_EQ(sample.rdma_ports[0].pci_bus_id, "0000:1a:00.0");
  EXPECT_EQ(sample.rdma_ports[1].pci_bus_id, "0000:3e:00.0");
  EXPECT_EQ(sample.rdma_ports[1].reading.counters.at("port_rcv_data"), 3000u);
  EXPECT_EQ(sample.rdma_ports[1].reading.rate_bytes_per_second, 12.5e9);
}

}  // namespace
}  // namespace polyaccel::exporter
