#include "partition_manager/label_manager.h"

#include "core/agent_parts.h"
#include "core/log.h"
#include "core/strings.h"
#include "partition_manager/mig_apply.h"
#include "partition_manager/node_api.h"

namespace polyaccel {

namespace {

using Clock = std::chrono::steady_clock;

std::string joined(const std::set<std::string>& items) {
  return join(std::vector<std::string>(items.begin(), items.end()), ", ");
}

}  // namespace

PartitionLabelManager::PartitionLabelManager(kube_api::KubeClient& client,
                                             PartitionManagerOptions options,
                                             PartitionManagerHooks hooks)
    : client_(client), options_(std::move(options)), hooks_(std::move(hooks)) {}

PartitionLabelManager::~PartitionLabelManager() {
  stop();
}

void PartitionLabelManager::log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    log_line("polyaccel agent: " + options_.labels.config + ": " + line);
  }
}

void PartitionLabelManager::set_withdrawn(const std::set<std::string>& gpus) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    withdrawn_ = gpus;
  }
  if (hooks_.withdraw) hooks_.withdraw(gpus);
}

Status PartitionLabelManager::published() {
  if (!hooks_.publish) return Ok{};
  auto st = hooks_.publish(options_.publish_wait);
  if (!st) {
    return Error{st.error().code, st.error().input,
                 st.error().problem + " (the GPUs withdrawn now: " + joined(withdrawn()) + ")",
                 st.error().remedy};
  }
  return Ok{};
}

std::set<std::string> PartitionLabelManager::withdrawn() const {
  std::lock_guard<std::mutex> lock(mu_);
  return withdrawn_;
}

PartitionOutcome PartitionLabelManager::last_outcome() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outcome_;
}

bool PartitionLabelManager::step(ApplyStep s) {
  if (hooks_.after_step && !hooks_.after_step(s)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return !stop_;
}

Status PartitionLabelManager::recover() {
  auto record = read_partition_apply_record(options_.state_file);
  if (!record) return record.error();
  record_ = *record;
  if (record_ && (record_->unfinished() || record_->phase == ApplyPhase::failed) &&
      !record_->gpus.empty()) {
    std::set<std::string> gpus(record_->gpus.begin(), record_->gpus.end());
    log("the last apply of " + record_->config + " ended " + to_string(record_->phase) + ": GPUs " +
        joined(gpus) + " stay withdrawn until an apply finishes");
    set_withdrawn(gpus);
    if (auto st = published(); !st) log(st.error().message());
  }
  return Ok{};
}

Status PartitionLabelManager::reconcile_once() {
  auto node = get_node(client_, options_.node);
  if (!node) return node.error();
  const auto* labels = &node->labels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seen_ = *node;
  }
  std::string config, state;
  if (auto it = labels->find(options_.labels.config); it != labels->end()) config = it->second;
  if (auto it = labels->find(options_.labels.state); it != labels->end()) state = it->second;
  if (record_ && record_->unfinished()) {
    // Killed in the middle (or a reset or reboot since): finish with what the label asks now,
    // planned again against what the GPUs have, which completes a half-done change.
    log("resuming the apply of " + record_->config + " (" + to_string(record_->phase) + ")");
    apply(config.empty() ? record_->config : config);
    return Ok{};
  }
  if (config.empty()) return Ok{};
  bool same = record_ && record_->label == options_.labels.config && record_->config == config;
  if (same && record_->phase == ApplyPhase::done && state == options_.labels.success) return Ok{};
  // A failed config is not tried again until the label changes (as mig-manager).
  if (same && record_->phase == ApplyPhase::failed && state == options_.labels.failed) return Ok{};
  apply(config);
  return Ok{};
}

void PartitionLabelManager::finish(PartitionOutcome outcome, PartitionApplyRecord record) {
  if (auto st = write_partition_apply_record(options_.state_file, record); !st)
    log("cannot write the state file: " + st.error().message());
  record_ = record;
  set_withdrawn(std::set<std::string>(record.gpus.begin(), record.gpus.end()));
  // What the GPUs have now is offered before the label says so; a server that does not store
  // it in time does not hold the outcome back (the GPUs changed): the DRA driver keeps trying.
  if (auto st = published(); !st)
    log("the devices as they are now are not published yet: " + st.error().message());
  if (auto st = patch_node_labels(client_, options_.node, {{options_.labels.state, outcome.state}});
      !st) {
    log("cannot set " + options_.labels.state + "=" + outcome.state + ": " + st.error().message());
  }
  const PartitionLabels& l = options_.labels;
  std::string type = outcome.state == l.success ? "Normal" : "Warning";
  std::string reason = l.event_prefix + (outcome.state == l.success     ? "Applied"
                                         : outcome.state == l.rebooting ? "NeedsGpuReset"
                                                                        : "Failed");
  std::string message = l.what + " " + outcome.config + ": ";
  if (outcome.state == l.success) {
    message += outcome.changed_gpus.empty()
                   ? "already in place, no GPU changed"
                   : "applied; GPUs changed: " + join(outcome.changed_gpus, ", ");
  } else {
    message += outcome.reason;
  }
  if (auto st = post_node_event(client_, options_.node, type, reason, message, options_.component);
      !st) {
    log("cannot post an Event: " + st.error().message());
  }
  log(message);
  std::lock_guard<std::mutex> lock(mu_);
  outcome_ = std::move(outcome);
}

void PartitionLabelManager::apply(const std::string& config) {
  const Clock::time_point started = Clock::now();
  Clock::duration waited{0};
  const PartitionLabels& l = options_.labels;
  PartitionOutcome outcome;
  outcome.config = config;
  // GPUs an earlier apply left half-configured stay withdrawn until this one succeeds.
  std::set<std::string> left_withdrawn;
  if (record_ && (record_->unfinished() || record_->phase == ApplyPhase::failed))
    left_withdrawn.insert(record_->gpus.begin(), record_->gpus.end());
  PartitionApplyRecord record{l.config, config, ApplyPhase::failed, {}, {}};
  auto abandon = [&] {
    outcome.abandoned = true;
    std::lock_guard<std::mutex> lock(mu_);
    outcome_ = outcome;
  };
  // Fails the apply; `keep_withdrawn`: the GPUs that stay withdrawn (changed half way).
  auto fail = [&](const std::string& reason, const std::set<std::string>& keep_withdrawn) {
    outcome.state = l.failed;
    outcome.reason = reason;
    outcome.apply_time = Clock::now() - started - waited;
    record.phase = ApplyPhase::failed;
    record.reason = reason;
    record.gpus.assign(keep_withdrawn.begin(), keep_withdrawn.end());
    finish(outcome, record);
  };

  if (auto st = patch_node_labels(client_, options_.node, {{l.state, l.pending}}); !st) {
    log("cannot set " + l.state + "=" + l.pending + ": " + st.error().message());
    return;  // the next look tries again
  }
  if (!step(ApplyStep::pending_set)) return abandon();

  // The ConfigMap, read once for this apply, and the plan against what the GPUs have now.
  std::string source = "ConfigMap " + options_.config_map_namespace + "/" + options_.config_map;
  auto text = get_config_map_key(client_, options_.config_map_namespace, options_.config_map,
                                 options_.config_map_key);
  if (!text) return fail(text.error().message(), left_withdrawn);
  std::unique_ptr<PartitionWorkflow> workflow = hooks_.workflow ? hooks_.workflow() : nullptr;
  if (!workflow) return fail("no partition workflow", left_withdrawn);
  auto changes = workflow->plan(*text, source + " " + options_.config_map_key, config);
  if (!changes) return fail(changes.error().message(), left_withdrawn);
  std::set<std::string> changing;
  for (const auto& c : *changes)
    changing.insert(c.bus_id);
  outcome.changed_gpus.assign(changing.begin(), changing.end());

  // Stop advertising the GPUs that change; the others keep serving.
  std::set<std::string> withdrawn = changing;
  withdrawn.insert(left_withdrawn.begin(), left_withdrawn.end());
  record.phase = ApplyPhase::withdrawn;
  record.gpus.assign(withdrawn.begin(), withdrawn.end());
  if (!changes->empty()) {
    if (auto st = write_partition_apply_record(options_.state_file, record); !st)
      return fail("cannot write the state file: " + st.error().message(), left_withdrawn);
    record_ = record;
    set_withdrawn(withdrawn);
    // No GPU changes while the API server may still offer it: unconfirmed, nothing is changed.
    if (auto st = published(); !st)
      return fail("cannot withdraw the GPUs " + joined(changing) +
                      " from the published devices before changing them: " + st.error().message() +
                      "; nothing was changed",
                  left_withdrawn);
  }
  if (!step(ApplyStep::gpus_withdrawn)) return abandon();

  // Wait for the pods that hold them to end (or evict them).
  std::vector<std::string> ids;
  for (const auto& c : *changes) {
    ids.push_back(c.bus_id);
    ids.insert(ids.end(), c.device_ids.begin(), c.device_ids.end());
    if (hooks_.device_ids) {
      for (auto& id : hooks_.device_ids(c.bus_id))
        ids.push_back(std::move(id));
    }
  }
  const Clock::time_point wait_start = Clock::now();
  std::set<std::string> evicted;
  while (!changes->empty() && hooks_.pods) {
    std::vector<PodRef> holders = hooks_.pods().pods_of(ids);
    if (holders.empty()) break;
    std::vector<std::string> names;
    for (const auto& p : holders) {
      std::string name = p.pod_namespace + "/" + p.pod;
      names.push_back(name);
      if (options_.evict_pods && !evicted.count(name)) {
        auto done = evict_pod(client_, p.pod_namespace, p.pod);
        if (!done) {
          log("eviction of " + name + ": " + done.error().message());
        } else if (*done) {
          evicted.insert(name);
          log("evicted pod " + name);
        }
      }
    }
    if (Clock::now() - wait_start > options_.pod_wait) {
      waited = Clock::now() - wait_start;
      return fail("pods still hold the GPUs " + joined(changing) + " after " +
                      std::to_string(options_.pod_wait.count()) + " ms: " + join(names, ", ") +
                      (options_.evict_pods ? "" : " (evict them, or turn the eviction policy on)"),
                  left_withdrawn);
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, options_.pod_check, [&] { return stop_; })) {
      lock.unlock();
      return abandon();  // the agent stops: the state file says where it was
    }
  }
  waited = Clock::now() - wait_start;
  if (!step(ApplyStep::pods_gone)) return abandon();

  // Apply under `mig apply`'s lock, GPU by GPU.
  std::vector<std::string> reset_needed;
  if (!changes->empty()) {
    record.phase = ApplyPhase::applying;
    if (auto st = write_partition_apply_record(options_.state_file, record); !st)
      return fail("cannot write the state file: " + st.error().message(), left_withdrawn);
    record_ = record;
    MigApplyLock lock;
    if (auto st = lock.acquire(); !st) return fail(st.error().message(), left_withdrawn);
    for (std::size_t i = 0; i < changes->size(); ++i) {
      auto done = workflow->apply(i);
      if (!done) return fail(done.error().message(), withdrawn);
      if (!*done) reset_needed.push_back((*changes)[i].bus_id);
      if (!step(ApplyStep::gpu_applied)) return abandon();
    }
  }
  if (!reset_needed.empty()) {
    // mig-manager's choice: a mode change the driver holds until a GPU reset is reported as
    // `rebooting`; the GPUs stay withdrawn and the apply finishes when the agent starts again.
    outcome.state = l.rebooting;
    outcome.reason = "the change waits for a GPU reset or a reboot of " + join(reset_needed, ", ") +
                     "; the apply finishes when the agent starts again";
    outcome.apply_time = Clock::now() - started - waited;
    record.phase = ApplyPhase::rebooting;
    finish(outcome, record);
    return;
  }
  if (auto st = workflow->verify(); !st)
    return fail("after the apply: " + st.error().message(), withdrawn);
  if (!step(ApplyStep::verified)) return abandon();
  outcome.state = l.success;
  outcome.apply_time = Clock::now() - started - waited;
  record.phase = ApplyPhase::done;
  record.gpus.clear();
  finish(outcome, record);
}

bool PartitionLabelManager::wait(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, d, [&] { return stop_; });
}

bool PartitionLabelManager::stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

void PartitionLabelManager::run() {
  const std::chrono::milliseconds first_retry(1000);
  std::chrono::milliseconds retry = first_retry;
  unsigned failed_watches = 0;  // in a row
  std::string last_error;
  while (!stopping()) {
    if (auto st = reconcile_once(); !st) {
      log(st.error().message());
      if (wait(retry)) return;
      retry = std::min(retry * 2, options_.recheck);
      continue;
    }
    retry = first_retry;
    if (!options_.watch) {
      if (wait(options_.recheck)) return;
      continue;
    }
    // Watch from what the GET saw; a change of either label ends the watch and is looked at
    // with a GET (the watch's object is not trusted alone: the GET also sees what changed while
    // no watch was open). The server ends the watch after `recheck`: a slow re-check should a
    // watch miss something.
    NodeLabels seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen = seen_;
    }
    auto label_of = [](const NodeLabels& n, const std::string& key) {
      auto it = n.labels.find(key);
      return it == n.labels.end() ? std::string() : it->second;
    };
    bool changed = false;
    const auto began = std::chrono::steady_clock::now();
    auto st = watch_node(
        *watch_client_, options_.node, seen.resource_version,
        std::chrono::duration_cast<std::chrono::seconds>(options_.recheck),
        [&](const NodeLabels& now) {
          changed =
              label_of(now, options_.labels.config) != label_of(seen, options_.labels.config) ||
              label_of(now, options_.labels.state) != label_of(seen, options_.labels.state);
          return !changed;
        },
        [this] { return !stopping(); });
    if (st || changed) {
      failed_watches = 0;
      last_error.clear();
      // A watch that a server or a proxy ends at once, again and again, must not turn into a
      // loop of GETs: at most one look a second without a change.
      if (!changed && std::chrono::steady_clock::now() - began < first_retry && wait(first_retry))
        return;
      continue;
    }
    if (stopping()) return;
    // Dropped, 410 Gone, refused: the Node is read again at once (what changed meanwhile is
    // not known), then watched from there; a watch that keeps failing is retried less often,
    // down to one look every `recheck` (RBAC without watch: polling).
    std::string e = st.error().message();
    if (e != last_error) log("watching the Node: " + e + "; reading it again");
    last_error = e;
    if (++failed_watches > 1) {
      auto backoff =
          std::min(first_retry * (1u << std::min(failed_watches - 2, 8u)), options_.recheck);
      if (wait(backoff)) return;
    }
  }
}

void PartitionLabelManager::start() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = false;
  // A watch of its own: an open watch holds its client's one connection for minutes.
  watch_client_ = std::make_unique<kube_api::KubeClient>(client_.config());
  thread_ = std::thread([this] { run_part("partition-manager", [this] { run(); }); });
}

void PartitionLabelManager::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (watch_client_) watch_client_->cancel();  // an open watch ends now, not within a second
  if (thread_.joinable()) thread_.join();
}

}  // namespace polyaccel
