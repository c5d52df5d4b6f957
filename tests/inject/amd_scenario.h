// What the two AMD test libraries (rocm_smi/ and amd_smi/, one machine seen through ROCm SMI and
// through AMD SMI) share in reading their JSON scenarios: key checks, the RAS block and bad page
// names, the metrics table's v1.7 fields, and the steps, whose values carry over from one step to
// the next. Test code only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace polyaccel::inject {

inline void check_keys(const nlohmann::json& j, const std::set<std::string>& allowed,
                       const char* what) {
  for (const auto& [key, value] : j.items()) {
    if (!allowed.count(key)) throw std::runtime_error(std::string(what) + ": unknown key " + key);
  }
}

// A RAS block by name: the same bits in rsmi_gpu_block_t and amdsmi_gpu_block_t.
inline std::uint64_t gpu_block_named(const std::string& name) {
  static const std::map<std::string, std::uint64_t> blocks = {
      {"umc", 1ULL << 0},   {"sdma", 1ULL << 1},     {"gfx", 1ULL << 2},   {"mmhub", 1ULL << 3},
      {"athub", 1ULL << 4}, {"pcie_bif", 1ULL << 5}, {"hdp", 1ULL << 6},   {"xgmi_wafl", 1ULL << 7},
      {"df", 1ULL << 8},    {"smn", 1ULL << 9},      {"sem", 1ULL << 10},  {"mp0", 1ULL << 11},
      {"mp1", 1ULL << 12},  {"fuse", 1ULL << 13},    {"mca", 1ULL << 14},  {"vcn", 1ULL << 15},
      {"jpeg", 1ULL << 16}, {"ih", 1ULL << 17},      {"mpio", 1ULL << 18},
  };
  auto it = blocks.find(name);
  if (it == blocks.end()) throw std::runtime_error("unknown GPU block " + name);
  return it->second;
}

// "bad_pages": [{"address": 4096, "status": "reserved" | "pending" | "unreservable"}], as
// (address, page status): the same numbers in rsmi_ and amdsmi_memory_page_status_t.
inline std::vector<std::pair<std::uint64_t, std::uint32_t>> bad_pages(const nlohmann::json& j) {
  static const std::map<std::string, std::uint32_t> states = {
      {"reserved", 0}, {"pending", 1}, {"unreservable", 2}};
  std::vector<std::pair<std::uint64_t, std::uint32_t>> pages;
  for (const auto& pj : j) {
    check_keys(pj, {"address", "status"}, "bad page");
    auto st = states.find(pj.at("status").get<std::string>());
    if (st == states.end()) throw std::runtime_error("unknown page status");
    pages.emplace_back(pj.at("address").get<std::uint64_t>(), st->second);
  }
  return pages;
}

// Field names for "unsupported", each one of `known`.
inline std::set<std::string> unsupported_list(const nlohmann::json& j,
                                              const std::set<std::string>& known) {
  std::set<std::string> out;
  for (const auto& name : j) {
    if (!known.count(name.get<std::string>())) {
      throw std::runtime_error("unsupported: unknown field " + name.get<std::string>());
    }
    out.insert(name.get<std::string>());
  }
  return out;
}

// Reads "steps": [{"all": values, "devices": {"<bus id>": values}, "events": [...]}]. A step
// lists what changes; every other value stays as in the step before. Gives each device's values
// at every step (values[device][step]) and each step's events. `device_index(bus_id)` finds a
// device, `apply(json, Values&)` applies a step's values, `make_event(json)` reads an event. With
// no steps, one step where nothing was given.
template <class Values, class Event, class DeviceIndex, class Apply, class MakeEvent>
void read_steps(const nlohmann::json& steps, std::size_t device_count, DeviceIndex device_index,
                Apply apply, MakeEvent make_event, std::vector<std::vector<Values>>& values,
                std::vector<std::vector<Event>>& events) {
  values.assign(device_count, {});
  events.clear();
  std::vector<Values> now(device_count);
  for (const auto& sj : steps) {
    check_keys(sj, {"comment", "all", "devices", "events"}, "step");
    for (Values& v : now) {
      if (sj.contains("all")) apply(sj.at("all"), v);
    }
    if (sj.contains("devices")) {
      for (const auto& [bus_id, vj] : sj.at("devices").items()) {
        apply(vj, now[device_index(bus_id)]);
      }
    }
    for (std::size_t i = 0; i < device_count; ++i)
      values[i].push_back(now[i]);
    std::vector<Event> step_events;
    for (const auto& ej : sj.value("events", nlohmann::json::array())) {
      check_keys(ej, {"device", "type", "message"}, "event");
      step_events.push_back(make_event(ej));
    }
    events.push_back(std::move(step_events));
  }
  if (events.empty()) {
    events.emplace_back();
    for (auto& v : values)
      v.emplace_back();
  }
}

// A step's "metrics": the gpu_metrics v1.7 fields both libraries return in the same table, with
// the list lengths the table has room for. Throws on an unknown key or a list too long.
inline const nlohmann::json& checked_metrics(const nlohmann::json& j) {
  check_keys(
      j,
      {"accumulation_counter", "residency_acc", "xgmi_read_kb", "xgmi_write_kb",
       "pcie_bandwidth_acc_gbs", "vram_max_bandwidth_gbs", "vcn_busy", "jpeg_busy", "xcc_count"},
      "metrics");
  const std::pair<const char*, std::size_t> lists[] = {{"residency_acc", 5},
                                                       {"xgmi_read_kb", 8},
                                                       {"xgmi_write_kb", 8},
                                                       {"vcn_busy", 4},
                                                       {"jpeg_busy", 40}};
  for (const auto& [key, max] : lists) {
    if (j.value(key, nlohmann::json::array()).size() > max) {
      throw std::runtime_error(std::string("metrics: too many ") + key);
    }
  }
  if (j.value("xcc_count", 0) > 8) throw std::runtime_error("metrics: xcc_count is 8 at most");
  return j;
}

// Where a v1.7 table holds the fields of checked_metrics(): each test library gives the offsets
// from its own library's header, so neither borrows the other's (or polyaccel's) declarations.
struct MetricsV17Offsets {
  std::size_t pcie_bandwidth_acc, xgmi_read, xgmi_write, accumulation_counter, residencies,
      num_partition, xcp0_gfx_busy, xcp0_vcn_busy, xcp0_jpeg_busy, vram_max_bandwidth,
      xcp_size;  // one xcp_stats entry: partition k's are xcp_size * k further on
};

// Writes a step's "metrics" into the v1.7 table at `raw` (already all ones, "not available"),
// with what the step gives: one XCP per compute partition of the GPU (`partition_busy`, each
// partition's GFX activity at this step, in the partitions' order: one in SPX), as the driver
// fills them. The GPU's "xcc_count" XCCs are shared evenly among the partitions (an MI300X's
// 8: 4 each in DPX), partition k's in xcp_stats[k], each as busy as its partition: a uniform
// load, as the per-XCC figures of a partition average to its activity. VCN and JPEG busy are
// partition 0's.
inline void put_metrics_v17(unsigned char* raw, const nlohmann::json& mj,
                            const std::vector<std::optional<std::uint32_t>>& partition_busy,
                            const MetricsV17Offsets& at) {
  auto put = [&](std::size_t offset, auto value) {
    std::memcpy(raw + offset, &value, sizeof value);
  };
  auto put_list = [&](const char* key, std::size_t offset, auto zero) {
    std::size_t k = 0;
    for (const auto& x : mj.value(key, nlohmann::json::array()))
      put(offset + k++ * sizeof zero, static_cast<decltype(zero)>(x.get<std::uint64_t>()));
  };
  if (mj.contains("accumulation_counter")) {
    put(at.accumulation_counter, mj.at("accumulation_counter").get<std::uint64_t>());
  }
  put_list("residency_acc", at.residencies, std::uint64_t{});
  put_list("xgmi_read_kb", at.xgmi_read, std::uint64_t{});
  put_list("xgmi_write_kb", at.xgmi_write, std::uint64_t{});
  if (mj.contains("pcie_bandwidth_acc_gbs")) {
    put(at.pcie_bandwidth_acc, mj.at("pcie_bandwidth_acc_gbs").get<std::uint64_t>());
  }
  if (mj.contains("vram_max_bandwidth_gbs")) {
    put(at.vram_max_bandwidth, mj.at("vram_max_bandwidth_gbs").get<std::uint64_t>());
  }
  const std::size_t partitions = std::clamp<std::size_t>(partition_busy.size(), 1, 8);
  put(at.num_partition, static_cast<std::uint16_t>(partitions));
  const std::size_t xcc_each = mj.value("xcc_count", std::size_t{0}) / partitions;
  for (std::size_t p = 0; p < partitions && p < partition_busy.size(); ++p) {
    for (std::size_t k = 0; k < xcc_each && partition_busy[p]; ++k)
      put(at.xcp0_gfx_busy + at.xcp_size * p + 4 * k, *partition_busy[p]);
  }
  put_list("vcn_busy", at.xcp0_vcn_busy, std::uint16_t{});
  put_list("jpeg_busy", at.xcp0_jpeg_busy, std::uint16_t{});
}

}  // namespace polyaccel::inject
