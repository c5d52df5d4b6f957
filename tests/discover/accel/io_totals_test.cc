// add_io (discover/accel/io_totals.h): the bytes each device moved since the agent started, made
// from the libraries' counters and rates, as hw.gpu.io sends them.
#include "discover/accel/io_totals.h"

#include <limits>

#include <gtest/gtest.h>

namespace polyaccel {
namespace {

using namespace std::chrono_literals;

AcceleratorSample at(std::chrono::system_clock::time_point t) {
  AcceleratorSample s;
  s.time = t;
  return s;
}

const auto t0 = std::chrono::system_clock::time_point(1'700'000'000s);

TEST(IoTotals, RatesAreIntegratedOverTheTimeBetweenSamples) {
  // GPM's PCIe rates (NVIDIA) and HLML's PCIe throughput (Gaudi) add rate x seconds.
  AcceleratorSample first = at(t0);
  first.profiling.pcie_rx_bytes_per_second = 1000;
  first.profiling.pcie_tx_bytes_per_second = 10;
  add_io(std::nullopt, first);
  EXPECT_EQ(first.io_received_bytes, 0u);  // starts at 0 at the first sample
  EXPECT_EQ(first.io_transmitted_bytes, 0u);
  AcceleratorSample second = at(t0 + 2500ms);
  second.profiling.pcie_rx_bytes_per_second = 2000;
  second.profiling.pcie_tx_bytes_per_second = 20;
  add_io(first, second);
  EXPECT_EQ(second.io_received_bytes, 5000u);
  EXPECT_EQ(second.io_transmitted_bytes, 50u);
  AcceleratorSample gaudi = at(t0 + 3500ms);
  gaudi.pcie_rx_bytes_per_second = 1e6;
  add_io(second, gaudi);
  EXPECT_EQ(gaudi.io_received_bytes, 1'005'000u);
  EXPECT_EQ(gaudi.io_transmitted_bytes, 50u);  // no source now: kept, not lost
}

TEST(IoTotals, CountersAddTheirIncreaseAndSurviveAReset) {
  // NVML's NVLink counters (KiB) and AMD's XGMI data per link (KB) add what they counted.
  AcceleratorSample a = at(t0);
  a.nvlink_rx_kib = 100;
  a.nvlink_tx_kib = 50;
  a.xgmi_read_kb = {{0, 10}, {1, 20}};
  add_io(std::nullopt, a);
  EXPECT_EQ(a.io_received_bytes, 0u);  // a counter's value before the agent started is not ours
  AcceleratorSample b = at(t0 + 1s);
  b.nvlink_rx_kib = 300;
  b.nvlink_tx_kib = 60;
  b.xgmi_read_kb = {{0, 15}, {1, 20}, {2, 7}};  // link 2 seen first: its value is its base
  add_io(a, b);
  EXPECT_EQ(b.io_received_bytes, (200u + 5u) * 1024);
  EXPECT_EQ(b.io_transmitted_bytes, 10u * 1024);
  // The driver reloaded: the counter restarted from 0 and counted 40 KiB since.
  AcceleratorSample c = at(t0 + 2s);
  c.nvlink_rx_kib = 40;
  c.nvlink_tx_kib = 60;
  add_io(b, c);
  EXPECT_EQ(c.io_received_bytes, (205u + 40u) * 1024);
  EXPECT_EQ(c.io_transmitted_bytes, 10u * 1024);
  // With NVLink counters, GPM's NVLink rates are the same bytes: not counted twice.
  AcceleratorSample d = at(t0 + 3s);
  d.nvlink_rx_kib = 40;
  d.profiling.nvlink_rx_bytes_per_second = 1e9;
  add_io(c, d);
  EXPECT_EQ(d.io_received_bytes, 245u * 1024);
}

TEST(IoTotals, GarbageRatesClockStepsAndHugeValuesNeverWrapOrFall) {
  AcceleratorSample a = at(t0);
  a.pcie_rx_bytes_per_second = 100;
  add_io(std::nullopt, a);
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity(), 1e30}) {
    AcceleratorSample b = at(t0 + 1s);
    b.pcie_rx_bytes_per_second = bad;
    add_io(a, b);
    EXPECT_EQ(b.io_received_bytes, 0u) << bad;
  }
  // The clock went back: no time between the samples, nothing added; a step a year forward
  // adds nothing either (past the longest --interval).
  AcceleratorSample back = at(t0 - 10s);
  back.pcie_rx_bytes_per_second = 100;
  add_io(a, back);
  EXPECT_EQ(back.io_received_bytes, 0u);
  AcceleratorSample year = at(t0 + std::chrono::hours(24 * 365));
  year.pcie_rx_bytes_per_second = 100;
  add_io(a, year);
  EXPECT_EQ(year.io_received_bytes, 0u);
  // An unreachable device's sample keeps the totals; the next reachable one adds nothing for
  // the time it did not answer.
  AcceleratorSample gone = at(t0 + 5s);
  gone.reachable = false;
  a.io_received_bytes = 777;
  add_io(a, gone);
  EXPECT_EQ(gone.io_received_bytes, 777u);
  AcceleratorSample back_again = at(t0 + 6s);
  back_again.pcie_rx_bytes_per_second = 100;
  add_io(gone, back_again);
  EXPECT_EQ(back_again.io_received_bytes, 777u);
  // Near 2^64 the total stops there.
  AcceleratorSample full = at(t0 + 7s);
  full.nvlink_rx_kib = std::numeric_limits<std::uint64_t>::max();
  AcceleratorSample before = at(t0 + 6s);
  before.nvlink_rx_kib = 0;
  before.io_received_bytes = std::numeric_limits<std::uint64_t>::max() - 5;
  add_io(before, full);
  EXPECT_EQ(full.io_received_bytes, std::numeric_limits<std::uint64_t>::max());
}

}  // namespace
}  // namespace polyaccel
