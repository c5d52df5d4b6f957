#include "dra/runner.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/agent_parts.h"
#include "core/json.h"
#include "core/log.h"
#include "dra/claim_status.h"
#include "dra/cpu_devices.h"

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
                     std::unique_ptr<kube_api::KubeClient> client)
    : monitor_(monitor), options_(std::move(options)), client_(std::move(client)) {
  if (client_) {
    publisher_ = std::make_unique<SlicePublisher>(*client_);
    if (options_.watch) watch_client_ = std::make_unique<kube_api::KubeClient>(client_->config());
    if (!options_.plugin.lookup) options_.plugin.lookup = api_claim_lookup(*client_);
    if (!options_.plugin.write_status) {
      options_.plugin.write_status = [client = client_.get(), driver = options_.slices.driver](
                                         const ClaimRef& c, const std::vector<nlohmann::json>& e) {
        return write_claim_device_status(*client, c.ns, c.name, c.uid, driver, e);
      };
    }
  }
  if (!options_.plugin.log) options_.plugin.log = options_.log;
  options_.plugin.driver = options_.slices.driver;
  if (!options_.root.empty()) options_.plugin.root = options_.root;
  plugin_ = std::make_unique<DraPlugin>(options_.plugin);
}

DraRunner::~DraRunner() {
  stop();
}

void DraRunner::log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    log_line("polyaccel agent: dra: " + line);
  }
}

Result<Pool> DraRunner::build(const HostModel& model, const AcceleratorSnapshot& snap) const {
  SliceOptions so = options_.slices;
  so.unhealthy = unhealthy_of(snap);
  std::lock_guard<std::mutex> lock(mu_);
  so.unhealthy.insert(withdrawn_.begin(), withdrawn_.end());
  // What the server drops cannot keep devices apart or out: publish only what needs neither.
  so.counters = fields_.counters;
  so.layout = fields_.layout;
  if (!fields_.taints) so.withdraw_unhealthy = true;
  // A NIC published as shared to a server that drops allowMultipleAllocations would be taken
  // whole by its first claim anyway; publish it whole, as it is then.
  if (!fields_.shares) so.nic_shares = 0;
  return build_pool(model, so);
}

PoolHealth DraRunner::health_of(const HostModel& model, const AcceleratorSnapshot& snap) const {
  SliceOptions so = options_.slices;
  so.unhealthy = unhealthy_of(snap);
  std::set<std::string> withdrawn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    withdrawn = withdrawn_;
    so.counters = fields_.counters;
    so.layout = fields_.layout;
    if (!fields_.shares) so.nic_shares = 0;
  }
  so.unhealthy.insert(withdrawn.begin(), withdrawn.end());
  so.withdraw_unhealthy = false;  // the devices a server without taints does not get, too
  PoolHealth out;
  out.pool = so.node;
  auto pool = build_pool(model, so);
  if (!pool) return out;
  for (const auto& slice : pool->slices) {
    for (const auto& d : slice.devices) {
      if (d.kind == DeviceKind::nic || d.kind == DeviceKind::vf) continue;
      if (d.accelerator >= model.accelerators.size()) continue;
      const bool tainted = std::any_of(d.taints.begin(), d.taints.end(),
                                       [](const Taint& t) { return t.key == kUnhealthyTaint; });
      if (!tainted) {
        out.devices[d.name] = {Health::healthy, {}};
        continue;
      }
      const std::string bus = model.accelerators[d.accelerator].pci.address.to_string();
      std::string why;
      if (withdrawn.count(bus)) {
        why = "the partition manager is changing GPU " + bus;
      } else if (const MonitoredDevice* md = snap.device(bus)) {
        why = !md->health.reason.empty() ? md->health.reason
              : !md->listed              ? "the vendor library no longer lists it"
                                         : "";
      }
      out.devices[d.name] = {Health::unhealthy,
                             "GPU " + bus + " is unhealthy" + (why.empty() ? "" : ": " + why)};
    }
  }
  return out;
}

void DraRunner::set_withdrawn(std::set<std::string> bus_ids) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    withdrawn_ = std::move(bus_ids);
  }
  withdrawn_changed_ = true;
}

Status DraRunner::publish_now(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::uint64_t asked = ++publishes_asked_;
  if (published_cv_.wait_for(lock, timeout,
                             [&] { return publishes_stored_ >= asked || stopping_; }) &&
      !stopping_)
    return Ok{};
  return Error{ErrorCode::io, "ResourceSlices of pool " + options_.slices.node,
               stopping_
                   ? "the DRA driver stopped before the API server stored them"
                   : "not stored by the API server within " + std::to_string(timeout.count()) +
                         " ms" + (last_sync_error_.empty() ? "" : ": " + last_sync_error_),
               "the DRA driver keeps publishing them; check the API server and its RBAC"};
}

Pool DraRunner::pool() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_;
}

DraStatus DraRunner::status() const {
  DraStatus s;
  // Read before mu_: the plugin has a lock of its own.
  std::vector<HeldDevices> held;
  for (const auto& c : plugin_->prepared()) {
    HeldDevices h{c.ns, c.name, {}};
    for (const auto& d : c.devices) {
      h.devices.push_back(d.device);
      // A MIG instance made for this claim is known by the UUID it was given.
      if (d.created_mig) s.device_ids[d.device].push_back(d.created_mig->uuid);
    }
    held.push_back(std::move(h));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.server_keeps_counters = fields_.counters;
    s.server_keeps_taints = fields_.taints;
    s.server_fields_known = fields_known_;
    s.devices = pool_.device_count();
    s.driver = pool_.driver;
    s.pool = pool_.node;
    if (auto snap = monitor_.snapshot(); snap && snap->host) {
      cpu_holdings(*snap->host, pool_, held, s.claim_holdings, s.free_cpus);
      monitored_ids(*snap->host, pool_, s.device_ids);
    }
  }
  s.syncs = syncs_;
  s.api_writes = api_writes();
  s.restores = restores_;
  s.sync_errors = sync_errors_;
  s.watching = watching_;
  return s;
}

bool DraRunner::note_fields(const ServerFields& fields, const char* how) {
  ServerFields old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = fields_;
    fields_ = fields;
    fields_known_ = true;
  }
  if (old.counters != fields.counters) {
    log(fields.counters
            ? std::string("the API server keeps sharedCounters and consumesCounters again (") +
                  how + "): publishing MIG placements and counters"
            : std::string("the API server drops sharedCounters and consumesCounters (") + how +
                  "; feature gate DRAPartitionableDevices off): publishing only whole GPUs and "
                  "existing MIG instances, which cannot be over-committed without them");
  }
  if (old.taints != fields.taints) {
    log(fields.taints ? std::string("the API server keeps device taints again (") + how +
                            "): unhealthy devices are tainted"
                      : std::string("the API server drops device taints (") + how +
                            "; feature gate DRADeviceTaints off): unhealthy devices are withdrawn "
                            "instead");
  }
  if (old.shares != fields.shares && options_.slices.nic_shares > 0) {
    log(fields.shares ? std::string("the API server keeps allowMultipleAllocations again (") + how +
                            "): RDMA NICs are shared"
                      : std::string("the API server drops allowMultipleAllocations (") + how +
                            "; feature gate DRAConsumableCapacity off): RDMA NICs are published "
                            "whole, one claim each");
  }
  if (old.layout != fields.layout) {
    log(fields.layout == CounterLayout::own_slices
            ? std::string("the API server takes counter sets only in slices of their own (") + how +
                  "; Kubernetes 1.35 and later): publishing them apart from the devices"
            : std::string("the API server takes counter sets only beside the devices that "
                          "consume them (") +
                  how + "; Kubernetes 1.34): publishing each with its devices");
  }
  return !(old == fields);
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
  plugin_->set_health(health_of(model, *snap));
  Status st = plugin_->start(
      model, *pool,
      read_cdi_host(model, options_.root, options_.driver_root, options_.host_driver_root));
  if (!st) return st;
  // The follower starts from this very snapshot: from a newer one it would take a change made
  // meanwhile (an XID) for what was published, and never publish it.
  follower_ = std::thread([this, snap] { run_part("dra-follower", [&] { follow(snap); }); });
  if (watch_client_)
    watcher_ = std::thread([this] { run_part("dra-slice-watch", [this] { watch_slices(); }); });
  return Ok{};
}

void DraRunner::follow(std::shared_ptr<const AcceleratorSnapshot> start_snapshot) {
  std::uint64_t generation = start_snapshot->generation;
  const HostModel* host = nullptr;
  std::set<std::string> unhealthy;
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto next_sync = now();
  auto next_recheck = now();  // before the first publication
  auto backoff = std::chrono::milliseconds(1000);
  std::string last_error, last_probe_error;
  size_t published_slices = 0;  // by the last successful sync
  std::shared_ptr<const AcceleratorSnapshot> keep = std::move(start_snapshot);
  host = keep->host.get();
  unhealthy = unhealthy_of(*keep);
  std::string layouts = mig_layouts(*keep);
  // The pool of `keep` with what the server keeps now; the plugin gets it when it changed.
  auto rebuild = [&] {
    HostModel model = model_with_current_mig(*keep);
    auto pool = build(model, *keep);
    if (!pool) {
      log("devices: " + pool.error().message());
      return;
    }
    bool changed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      changed = published(*pool) != published(pool_);
      pool_ = *pool;
    }
    plugin_->set_health(health_of(model, *keep));
    if (changed) {
      plugin_->set_devices(
          model, *pool,
          read_cdi_host(model, options_.root, options_.driver_root, options_.host_driver_root));
      next_sync = now();
    }
  };
  std::uint64_t asked_taken = 0;  // the publish_now asks the pool being published includes
  auto tell_stored = [&] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      publishes_stored_ = std::max(publishes_stored_, asked_taken);
    }
    published_cv_.notify_all();
  };
  while (!stopping_) {
    auto snap = monitor_.wait_newer(generation, std::chrono::milliseconds(50));
    bool withdrawn_changed = withdrawn_changed_.exchange(false);
    std::uint64_t asked;
    {
      std::lock_guard<std::mutex> lock(mu_);
      asked = publishes_asked_;
    }
    if (asked > asked_taken && snap->ready) {
      // publish_now: the newest snapshot, rebuilt and published whatever changed.
      generation = snap->generation;
      host = snap->host.get();
      unhealthy = unhealthy_of(*snap);
      layouts = mig_layouts(*snap);
      keep = snap;
      rebuild();
      asked_taken = asked;
      next_sync = now();
      if (!publisher_) tell_stored();
    } else if ((snap->generation != generation || withdrawn_changed) && snap->ready) {
      generation = snap->generation;
      auto now_unhealthy = unhealthy_of(*snap);
      auto now_layouts = mig_layouts(*snap);
      if (snap->host.get() != host || now_unhealthy != unhealthy || now_layouts != layouts ||
          withdrawn_changed) {
        host = snap->host.get();
        unhealthy = now_unhealthy;
        layouts = now_layouts;
        keep = snap;
        rebuild();
      }
    }
    if (!publisher_) continue;
    if (now() >= next_recheck) {
      // A dry run: the only way to see that the server keeps a field we do not send now.
      auto fields = publisher_->probe(options_.slices.driver, options_.slices.node);
      if (fields) {
        if (note_fields(*fields, "a dry-run create")) rebuild();
        last_probe_error.clear();
      } else if (fields.error().message() != last_probe_error) {
        last_probe_error = fields.error().message();
        log("asking the API server which fields it keeps (a dry-run create): " + last_probe_error +
            "; going by the slices it stores");
      }
      next_recheck = now() + options_.recheck;
    }
    if (resync_now_.exchange(false)) next_sync = now();
    if (now() < next_sync) continue;
    Pool p = pool();
    auto r = publisher_->sync(p);
    if (r) {
      ++syncs_;
      // Slices of a pool we had published made again: someone else deleted them.
      if (r->created > 0 && published_slices > 0 && p.slices.size() <= published_slices)
        ++restores_;
      published_slices = p.slices.size();
      if (r->writes() > 0 || !last_error.empty()) {
        log("ResourceSlices of pool " + p.node + ": generation " + std::to_string(r->generation) +
            ", " + std::to_string(r->created) + " created, " + std::to_string(r->updated) +
            " updated, " + std::to_string(r->deleted) + " deleted");
      }
      last_error.clear();
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_sync_error_.clear();
      }
      tell_stored();
      backoff = std::chrono::milliseconds(1000);
      next_sync = now() + options_.resync;
      // What the server stored can only say a field is dropped: a field we do not send shows
      // nothing, and an update keeps what the old object had even with the gate off.
      ServerFields seen;
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen = fields_;
      }
      if (r->counters_kept == false) seen.counters = false;
      if (r->taints_kept == false) seen.taints = false;
      if (r->shares_kept == false) seen.shares = false;
      if (note_fields(seen, "the slices it stored")) rebuild();
    } else {
      ++sync_errors_;
      // A persistent failure is logged once, then only when it changes.
      std::string e = r.error().message();
      if (e != last_error) log("publishing ResourceSlices: " + e);
      last_error = e;
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_sync_error_ = e;
      }
      next_sync = now() + backoff;
      backoff = std::min(backoff * 2, options_.max_backoff);
      // A write refused for where its counter sets are (the server's 422 says which layout it
      // takes; the dry run may have been refused): the pool in that layout, published at once.
      if (auto layout = publisher_->take_layout_wanted()) {
        ServerFields seen;
        {
          std::lock_guard<std::mutex> lock(mu_);
          seen = fields_;
        }
        seen.layout = *layout;
        if (note_fields(seen, "a write it refused")) rebuild();
      }
    }
  }
}

void DraRunner::watch_slices() {
  const std::string path =
      pool_slices_path(options_.slices.driver, options_.slices.node) +
      "&watch=1&timeoutSeconds=" + std::to_string(options_.watch_timeout.count());
  auto backoff = std::chrono::milliseconds(1000);
  std::string last_error;
  bool first = true;
  while (!stopping_) {
    // What happened between two watches is not seen: the follower lists once more.
    if (!first) resync_now_ = true;
    first = false;
    watching_ = true;
    std::string ended;  // an ERROR event's message
    auto r = watch_client_->watch(
        path,
        [this, &ended](const std::string& line) {
          auto event = nlohmann::json::parse(line, nullptr, false);
          std::string type = json_string(event, "type");
          // ADDED at the start are the slices that exist; MODIFIED and ADDED later are ours or
          // the pool's next generation. A delete that is not ours (the kubelet's wipe) is put
          // back; one that is ours finds nothing to do.
          if (type == "DELETED") resync_now_ = true;
          if (type != "ERROR") return true;
          // 410 Gone and the like: watch again (after the backoff, should it repeat).
          ended =
              "the server ended the watch: " + json_string(json_object(event, "object"), "message");
          return false;
        },
        [this] { return !stopping_.load(); }, options_.watch_timeout + std::chrono::seconds(30));
    watching_ = false;
    if (stopping_) break;
    std::string e = ended;
    if (!r) {
      e = r.error().message();
    } else if (r->status != 200) {
      e = api_error("watch " + path, *r).message();
    }
    if (e.empty()) {
      last_error.clear();
      backoff = std::chrono::milliseconds(1000);
      continue;
    }
    if (e != last_error) log("watching ResourceSlices: " + e + "; retrying");
    last_error = e;
    // Whatever ended the watch, what it would have shown is listed now, and again at every
    // retry: a server whose watch cache lags ("Too large resource version", "too old resource
    // version") may end watch after watch, and a delete must not wait for one to hold. Such an
    // ERROR event is the server's lag, not ours: retried within 2 s, not the full backoff a
    // transport or HTTP error gets.
    resync_now_ = true;
    const auto limit = ended.empty() ? options_.max_backoff : std::chrono::milliseconds(2000);
    for (auto until = std::chrono::steady_clock::now() + std::min(backoff, limit);
         !stopping_ && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void DraRunner::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  published_cv_.notify_all();                  // a publish_now returns
  if (client_) client_->cancel();              // an API server that hangs must not hold the stop
  if (watch_client_) watch_client_->cancel();  // nor an open watch
  if (follower_.joinable()) follower_.join();
  if (watcher_.joinable()) watcher_.join();
  if (plugin_) plugin_->stop();
}

}  // namespace polyaccel::dra
