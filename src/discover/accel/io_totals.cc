#include "discover/accel/io_totals.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace polyaccel {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
// 100 TB/s: above any link of any device; a rate past it (or negative, or NaN) is garbage.
constexpr double kMaxRate = 1e14;
constexpr std::chrono::hours kMaxGap{25};

std::uint64_t add(std::uint64_t a, std::uint64_t b) {
  return a > kMax - b ? kMax : a + b;
}

// What a counter counted between two readings: its increase, or all of `now` when it went back
// (reset to 0 since: a driver reload).
std::uint64_t increase(std::uint64_t before, std::uint64_t now) {
  return now >= before ? now - before : now;
}

std::uint64_t kib(std::uint64_t kib) {
  return kib > kMax / 1024 ? kMax : kib * 1024;
}

// One direction's sources in a sample; `have` is false when the sample has none.
struct Direction {
  bool have = false;
  std::uint64_t bytes = 0;  // from counters, since the previous sample
  double rate = 0;          // bytes per second, of the rates
};

void add_counter(Direction& d, const std::optional<std::uint64_t>& before,
                 const std::optional<std::uint64_t>& now) {
  if (!now) return;
  d.have = true;
  if (before) d.bytes = add(d.bytes, kib(increase(*before, *now)));
}

void add_links(Direction& d, const std::vector<std::pair<unsigned, std::uint64_t>>* before,
               const std::vector<std::pair<unsigned, std::uint64_t>>& now) {
  for (const auto& [link, value] : now) {
    std::optional<std::uint64_t> was;
    if (before)
      for (const auto& [l, v] : *before)
        if (l == link) was = v;
    add_counter(d, was, value);
  }
}

void add_rate(Direction& d, const std::optional<double>& rate) {
  if (!rate || !std::isfinite(*rate) || *rate < 0 || *rate > kMaxRate) return;
  d.have = true;
  d.rate += *rate;
}

std::optional<std::uint64_t> total(const Direction& d, const std::optional<std::uint64_t>& before,
                                   double seconds) {
  if (!d.have) return before;  // kept through a sample without sources (unreachable)
  std::uint64_t out = add(before.value_or(0), d.bytes);
  double from_rate = d.rate * seconds;  // <= 1e14 * the seconds between samples
  if (from_rate >= static_cast<double>(kMax)) return kMax;
  return add(out, static_cast<std::uint64_t>(from_rate));
}

}  // namespace

void add_io(const std::optional<AcceleratorSample>& previous, AcceleratorSample& next) {
  const AcceleratorSample* prev = previous ? &*previous : nullptr;
  Direction rx, tx;
  // NVLink: NVML's counters; GPM's rates on a device without them.
  add_counter(rx, prev ? prev->nvlink_rx_kib : std::nullopt, next.nvlink_rx_kib);
  add_counter(tx, prev ? prev->nvlink_tx_kib : std::nullopt, next.nvlink_tx_kib);
  if (!next.nvlink_rx_kib) add_rate(rx, next.profiling.nvlink_rx_bytes_per_second);
  if (!next.nvlink_tx_kib) add_rate(tx, next.profiling.nvlink_tx_bytes_per_second);
  // AMD: XGMI data read (received) and written (transmitted), per link.
  add_links(rx, prev ? &prev->xgmi_read_kb : nullptr, next.xgmi_read_kb);
  add_links(tx, prev ? &prev->xgmi_write_kb : nullptr, next.xgmi_write_kb);
  // PCIe: NVIDIA GPM's rates over the sample interval, HLML's throughput.
  add_rate(rx, next.profiling.pcie_rx_bytes_per_second);
  add_rate(tx, next.profiling.pcie_tx_bytes_per_second);
  add_rate(rx, next.pcie_rx_bytes_per_second);
  add_rate(tx, next.pcie_tx_bytes_per_second);
  // Rates count only between two answered samples, over the time between them. A gap past the
  // longest --interval (24 h) is a clock step or a library that hung: its rates add nothing.
  double seconds = 0;
  if (prev && prev->reachable && next.reachable && next.time > prev->time &&
      next.time - prev->time <= kMaxGap)
    seconds = std::chrono::duration<double>(next.time - prev->time).count();
  next.io_received_bytes = total(rx, prev ? prev->io_received_bytes : std::nullopt, seconds);
  next.io_transmitted_bytes = total(tx, prev ? prev->io_transmitted_bytes : std::nullopt, seconds);
}

}  // namespace polyaccel
