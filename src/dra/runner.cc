#include "dra/runner.h"

#include <iostream>

namespace polyaccel::dra {

namespace {

std::set<std::string> unhealthy_of(const AcceleratorSnapshot& s) {
  std::set<std::string> out;
  for (const auto& d : s.devices)
    if (!d.health.healthy || !d.listed) out.insert(d.pci_bus_id);
  return out;
}

std::vector<nlohmann::json> published(const Pool& p) {
  std::vector<nlohmann::json> out;
  for (size_t i = 0; i < p.slices.size(); ++i)
    out.push_back(slice_json(p, i, 0));
  return out;
}

}  // namespace

DraRunner::DraRunner(const AcceleratorMonitor& monitor, DraRunnerOptions options,
                     std::unique_ptr<KubeClient> client)
    : monitor_(monitor), options_(std::move(options)), client_(std::move(client)) {
  if (client_) {
    publisher_ = std::make_unique<SlicePublisher>(*client_);
    if (!options_.plugin.lookup) options_.plugin.lookup = api_claim_lookup(*client_);
  }
  if (!options_.plugin.log) options_.plugin.log = options_.log;
  options_.plugin.driver = options_.slices.driver;
  plugin_ = std::make_unique<DraPlugin>(options_.plugin);
}

DraRunner::~DraRunner() {
  stop();
}

void DraRunner::log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << "polyaccel agent: dra: " << line << "\n";
  }
}

Result<Pool> DraRunner::build(const HostModel& model, const AcceleratorSnapshot& snap) const {
  SliceOptions so = options_.slices;
  so.unhealthy = unhealthy_of(snap);
  {
    std::lock_guard<std::mutex> lock(mu_);
    so.unhealthy.insert(withdrawn_.begin(), withdrawn_.end());
  }
  return build_pool(model, so);
}

void DraRunner::set_withdrawn(std::set<std::string> bus_ids) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    withdrawn_ = std::move(bus_ids);
  }
  withdrawn_changed_ = true;
}

Pool DraRunner::pool() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_;
}

Status DraRunner::start(std::chrono::milliseconds ready_timeout) {
  auto deadline = std::chrono::steady_clock::now() + ready_timeout;
  auto snap = monitor_.snapshot();
  while (!snap->ready && std::chrono::steady_clock::now() < deadline)
    snap = monitor_.wait_newer(snap->generation, std::chrono::milliseconds(200));
  if (!snap->ready) {
    return Error{ErrorCode::internal,
                 "accelerator monitor",
                 "did not finish opening the vendor libraries in time",
                 {}};
  }
  HostModel model = model_with_current_mig(*snap);
  auto pool = build(model, *snap);
  if (!pool) return pool.error();
  {
    std::lock_guard<std::mutex> lock(mu_);
    pool_ = *pool;
  }
  Status st = plugin_->start(
      model, *pool,
      read_cdi_host(model, options_.root, options_.driver_root, options_.host_driver_root));
  if (!st) return st;
  follower_ = std::thread([this, g = snap->generation] { follow(g); });
  return Ok{};
}

void DraRunner::follow(std::uint64_t generation) {
  const HostModel* host = nullptr;
  std::set<std::string> unhealthy;
  auto next_sync = std::chrono::steady_clock::now();
  auto backoff = std::chrono::milliseconds(1000);
  std::string last_error;
  std::shared_ptr<const AcceleratorSnapshot> keep = monitor_.snapshot();
  host = keep->host.get();
  unhealthy = unhealthy_of(*keep);
  std::string layouts = mig_layouts(*keep);
  while (!stopping_) {
    auto snap = monitor_.wait_newer(generation, std::chrono::milliseconds(200));
    bool withdrawn_changed = withdrawn_changed_.exchange(false);
    if ((snap->generation != generation || withdrawn_changed) && snap->ready) {
      generation = snap->generation;
      auto now_unhealthy = unhealthy_of(*snap);
      auto now_layouts = mig_layouts(*snap);
      if (snap->host.get() != host || now_unhealthy != unhealthy || now_layouts != layouts ||
          withdrawn_changed) {
        host = snap->host.get();
        unhealthy = now_unhealthy;
        layouts = now_layouts;
        keep = snap;
        HostModel model = model_with_current_mig(*snap);
        auto pool = build(model, *snap);
        if (!pool) {
          log("devices: " + pool.error().message());
        } else {
          bool changed;
          {
            std::lock_guard<std::mutex> lock(mu_);
            changed = published(*pool) != published(pool_);
            pool_ = *pool;
          }
          if (changed) {
            plugin_->set_devices(model, *pool,
                                 read_cdi_host(model, options_.root, options_.driver_root,
                                               options_.host_driver_root));
            next_sync = std::chrono::steady_clock::now();
          }
        }
      }
    }
    if (!publisher_ || std::chrono::steady_clock::now() < next_sync) continue;
    Pool p = pool();
    auto r = publisher_->sync(p);
    if (r) {
      ++syncs_;
      if (r->writes() > 0 || !last_error.empty()) {
        log("ResourceSlices of pool " + p.node + ": generation " + std::to_string(r->generation) +
            ", " + std::to_string(r->created) + " created, " + std::to_string(r->updated) +
            " updated, " + std::to_string(r->deleted) + " deleted");
      }
      last_error.clear();
      backoff = std::chrono::milliseconds(1000);
      next_sync = std::chrono::steady_clock::now() + options_.resync;
    } else {
      // A persistent failure is logged once, then only when it changes.
      std::string e = r.error().message();
      if (e != last_error) log("publishing ResourceSlices: " + e);
      last_error = e;
      next_sync = std::chrono::steady_clock::now() + backoff;
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
  }
}

void DraRunner::stop() {
  stopping_ = true;
  if (client_) client_->cancel();  // an API server that hangs must not hold the stop
  if (follower_.joinable()) follower_.join();
  if (plugin_) plugin_->stop();
}

}  // namespace polyaccel::dra
