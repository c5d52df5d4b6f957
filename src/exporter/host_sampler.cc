#include "exporter/host_sampler.h"

#include <cstdlib>
#include <sstream>

#include "core/file_io.h"
#include "discover/discover.h"

namespace polyaccel::exporter {
namespace {

namespace fs = std::filesystem;

// nodeN/meminfo: "Node 0 MemTotal:       263842612 kB".
std::optional<std::uint64_t> meminfo_bytes(const std::string& text, const std::string& key) {
  size_t pos = text.find(" " + key + ":");
  if (pos == std::string::npos) return std::nullopt;
  const char* start = text.c_str() + pos + key.size() + 2;
  char* end = nullptr;
  unsigned long long kib = std::strtoull(start, &end, 10);
  if (end == start) return std::nullopt;
  return static_cast<std::uint64_t>(kib) * 1024;
}

// nodeN/numastat: "numa_hit 123\nnuma_miss 0\n...".
std::map<std::string, std::uint64_t> parse_numastat(const std::string& text) {
  std::map<std::string, std::uint64_t> out;
  std::istringstream in(text);
  std::string key;
  std::uint64_t value = 0;
  while (in >> key >> value)
    out[key] = value;
  return out;
}

}  // namespace

HostSample read_host_sample(const HostModel& host, const std::string& root) {
  HostSample s;
  s.time = std::chrono::system_clock::now();
  HostModel fresh = host;
  refresh_from_sysfs(fresh, root);
  if (!root.empty()) {
    for (const auto& n : fresh.numa_nodes) {
      fs::path dir =
          fs::path(root) / "sys/devices/system/node" / ("node" + std::to_string(n.os_index));
      NumaNodeSample ns;
      ns.node = n.os_index;
      if (auto text = read_text_file(dir / "meminfo")) {
        ns.memory_total_bytes = meminfo_bytes(*text, "MemTotal");
        ns.memory_free_bytes = meminfo_bytes(*text, "MemFree");
      }
      if (auto text = read_text_file(dir / "numastat")) ns.numastat = parse_numastat(*text);
      s.numa.push_back(std::move(ns));
    }
  }
  s.host = std::make_shared<const HostModel>(std::move(fresh));
  return s;
}

HostSampler::HostSampler(HostModel host, std::string root, std::chrono::milliseconds interval)
    : host_(std::move(host)), root_(std::move(root)), interval_(interval) {
  auto first = std::make_shared<HostSample>();
  first->host = std::make_shared<const HostModel>(host_);
  snapshot_ = std::move(first);
}

HostSampler::~HostSampler() {
  stop();
}

void HostSampler::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { run(); });
}

void HostSampler::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const HostSample> HostSampler::snapshot() const {
  std::lock_guard lock(snapshot_mu_);
  return snapshot_;
}

void HostSampler::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    auto next = std::make_shared<const HostSample>(read_host_sample(host_, root_));
    {
      std::lock_guard swap(snapshot_mu_);
      snapshot_ = std::move(next);
    }
    lock.lock();
    cv_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

}  // namespace polyaccel::exporter
