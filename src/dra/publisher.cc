#include "dra/publisher.h"

#include <map>

#include "core/json.h"

namespace polyaccel::dra {

namespace {

using json = nlohmann::json;

// What we compare: the spec without the pool's generation and without what the server adds
// (a taint's timeAdded; 1.34 reads a slice without devices back with "devices": null).
json comparable_spec(json spec) {
  if (spec.contains("pool") && spec["pool"].is_object()) spec["pool"].erase("generation");
  for (const char* list : {"devices", "sharedCounters"})
    if (spec.contains(list) && (spec[list].is_null() || spec[list].empty())) spec.erase(list);
  if (spec.contains("devices") && spec["devices"].is_array()) {
    for (auto& d : spec["devices"]) {
      if (!d.is_object() || !d.contains("taints") || !d["taints"].is_array()) continue;
      for (auto& t : d["taints"])
        if (t.is_object()) t.erase("timeAdded");
    }
  }
  return spec;
}

// The spec without the fields feature gates guard (what a server with them off keeps).
json without_gated_fields(json spec) {
  spec.erase("sharedCounters");
  if (spec.contains("devices") && spec["devices"].is_array()) {
    for (auto& d : spec["devices"]) {
      if (!d.is_object()) continue;
      d.erase("consumesCounters");
      d.erase("taints");
      d.erase("allowMultipleAllocations");
      if (d.contains("capacity") && d["capacity"].is_object())
        for (auto& [name, c] : d["capacity"].items())
          if (c.is_object()) c.erase("requestPolicy");
    }
  }
  return spec;
}

size_t set_count(const json& spec) {
  return spec.contains("sharedCounters") && spec["sharedCounters"].is_array()
             ? spec["sharedCounters"].size()
             : 0;
}

bool has_counters(const json& spec) {
  if (set_count(spec) > 0) return true;
  for (const auto& d : json_array(spec, "devices"))
    if (d.is_object() && d.contains("consumesCounters") && !d["consumesCounters"].empty())
      return true;
  return false;
}

size_t taint_count(const json& spec) {
  size_t n = 0;
  for (const auto& d : json_array(spec, "devices"))
    if (d.is_object() && d.contains("taints") && d["taints"].is_array()) n += d["taints"].size();
  return n;
}

// Devices that allow multiple allocations, and capacities with a requestPolicy.
size_t sharing_count(const json& spec) {
  size_t n = 0;
  for (const auto& d : json_array(spec, "devices")) {
    if (!d.is_object()) continue;
    if (json_bool(d, "allowMultipleAllocations", false)) ++n;
    if (!d.contains("capacity") || !d["capacity"].is_object()) continue;
    for (const auto& [name, c] : d["capacity"].items())
      if (c.is_object() && c.contains("requestPolicy")) ++n;
  }
  return n;
}

size_t consumer_count(const json& spec) {
  size_t n = 0;
  for (const auto& d : json_array(spec, "devices"))
    if (d.is_object() && d.contains("consumesCounters") && d["consumesCounters"].is_array())
      n += d["consumesCounters"].size();
  return n;
}

// What `stored` (the server's object) kept of the gated fields `sent` (our spec) has: a field
// once seen dropped stays dropped for the sync.
void note_stored(const json& sent, const json& stored, std::optional<bool>& counters,
                 std::optional<bool>& taints, std::optional<bool>& shares) {
  if (!stored.is_object()) return;
  const json& s = json_object(stored, "spec");
  if (has_counters(sent)) {
    bool kept = set_count(s) == set_count(sent) && consumer_count(s) == consumer_count(sent);
    counters = counters.value_or(true) && kept;
  }
  if (taint_count(sent) > 0) taints = taints.value_or(true) && taint_count(s) == taint_count(sent);
  if (sharing_count(sent) > 0)
    shares = shares.value_or(true) && sharing_count(s) == sharing_count(sent);
}

const char* const kOnlyOneOf = "only one of `sharedCounters` or `devices` is allowed";
const char* const kMustReference =
    "must reference a counterSet defined in the ResourceSlice sharedCounters";

}  // namespace

std::optional<CounterLayout> layout_required_by(const kube_api::HttpResponse& r) {
  if (r.status != 422) return std::nullopt;
  auto j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("message") || !j["message"].is_string()) return std::nullopt;
  const std::string message = j["message"].get<std::string>();
  if (message.find(kOnlyOneOf) != std::string::npos) return CounterLayout::own_slices;
  if (message.find(kMustReference) != std::string::npos) return CounterLayout::with_devices;
  return std::nullopt;
}

std::string pool_slices_path(const std::string& driver, const std::string& node) {
  return std::string(kResourceSlicesPath) + "?fieldSelector=" +
         kube_api::url_encode("spec.nodeName=" + node + ",spec.driver=" + driver);
}

Error api_error(const std::string& what, const kube_api::HttpResponse& r) {
  std::string message;
  auto j = json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string())
    message = j["message"].get<std::string>();
  if (message.size() > 300) message.resize(300);
  std::string remedy;
  if (r.status == 403) {
    remedy =
        "grant the agent's service account resourceslices list/watch/create/update/delete and "
        "resourceclaims get (deploy/kubernetes/components/dra/rbac.yaml)";
  } else if (r.status == 401) {
    remedy = r.credential.empty() ? "the request carried no credential: give a token or client "
                                    "certificate in the kubeconfig, or run in a pod"
                                  : "the API server does not accept " + r.credential;
  } else if (r.status == 404) {
    remedy = "does the API server serve resource.k8s.io/v1 (Kubernetes 1.34+)?";
  }
  return Error{r.status == 403 || r.status == 401 ? ErrorCode::unsupported : ErrorCode::io, what,
               "HTTP " + std::to_string(r.status) + (message.empty() ? "" : ": " + message),
               remedy};
}

Result<SyncResult> SlicePublisher::sync(const Pool& pool) {
  for (int attempt = 0;; ++attempt) {
    bool conflict = false;
    auto r = sync_once(pool, conflict);
    if (r || !conflict || attempt >= 4) return r;
  }
}

Result<SyncResult> SlicePublisher::sync_once(const Pool& pool, bool& conflict) {
  std::string lpath = pool_slices_path(pool.driver, pool.node);
  auto listed = client_.request("GET", lpath);
  if (!listed) return listed.error();
  if (listed->status != 200) return api_error("GET " + lpath, *listed);
  json list = json::parse(listed->body, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array())
    return Error{ErrorCode::io, "GET " + lpath, "the answer is not a ResourceSliceList", {}};

  // What the server has, by name: only ours (the field selector may be ignored by a proxy).
  std::map<std::string, json> existing;
  std::int64_t max_generation = 0;
  bool one_generation = true;
  std::optional<std::int64_t> seen_generation;
  for (const auto& item : list["items"]) {
    if (!item.is_object()) continue;
    const json& spec = json_object(item, "spec");
    if (json_string(spec, "driver") != pool.driver || json_string(spec, "nodeName") != pool.node)
      continue;
    std::string name = json_string(json_object(item, "metadata"), "name");
    if (name.empty()) continue;
    std::int64_t g = 0;
    if (spec.contains("pool") && spec["pool"].is_object() && spec["pool"].contains("generation") &&
        spec["pool"]["generation"].is_number_integer())
      g = spec["pool"]["generation"].get<std::int64_t>();
    max_generation = std::max(max_generation, g);
    if (seen_generation && *seen_generation != g) one_generation = false;
    seen_generation = g;
    existing[name] = item;
  }

  // Unchanged: the same names, each spec equal but for the generation, one generation.
  std::vector<json> desired;
  for (size_t i = 0; i < pool.slices.size(); ++i)
    desired.push_back(slice_json(pool, i, max_generation));
  bool same = one_generation && existing.size() == desired.size();
  for (const auto& d : desired) {
    if (!same) break;
    auto it = existing.find(d["metadata"]["name"].get<std::string>());
    same = it != existing.end() &&
           comparable_spec(json_object(it->second, "spec")) == comparable_spec(d["spec"]);
  }
  SyncResult result;
  if (same) {
    result.generation = max_generation;
    auto& written = last_generation_[pool.driver + "/" + pool.node];
    written = std::max(written, max_generation);
    return result;
  }
  // A slice stored as we last wrote it but for gated fields: what the server kept of them shows
  // in the list, against what we sent then (the pool may want more now: a new taint).
  for (const auto& [name, item] : existing) {
    auto sent = sent_.find(name);
    if (sent == sent_.end()) continue;
    const json& stored = json_object(item, "spec");
    const json stored_generation = json_object(stored, "pool").value("generation", json());
    if (!stored_generation.is_number_integer() ||
        stored_generation != json_object(sent->second, "pool").value("generation", json()))
      continue;
    if (comparable_spec(without_gated_fields(stored)) ==
        comparable_spec(without_gated_fields(sent->second)))
      note_stored(sent->second, item, result.counters_kept, result.taints_kept, result.shares_kept);
  }

  // Bounded: generation is an int64 on the server.
  // Past what the server has and what we wrote before: after a wipe (nothing listed) the pool
  // still moves on, so no reader takes the new slices for the old ones.
  std::int64_t& written = last_generation_[pool.driver + "/" + pool.node];
  std::int64_t last = std::max(max_generation, written);
  std::int64_t generation = last < (std::int64_t{1} << 62) ? last + 1 : 1;
  result.generation = generation;
  for (auto& d : desired) {
    d["spec"]["pool"]["generation"] = generation;
    std::string name = d["metadata"]["name"].get<std::string>();
    auto it = existing.find(name);
    Result<kube_api::HttpResponse> r = Error{};
    std::string what;
    const bool update = it != existing.end();
    if (update) {
      d["metadata"]["resourceVersion"] =
          json_string(json_object(it->second, "metadata"), "resourceVersion");
      what = "PUT " + std::string(kResourceSlicesPath) + "/" + name;
      r = client_.request("PUT", std::string(kResourceSlicesPath) + "/" + name,
                          d.dump(-1, ' ', false, json::error_handler_t::replace));
      existing.erase(it);
    } else {
      what = "POST " + std::string(kResourceSlicesPath);
      r = client_.request("POST", kResourceSlicesPath,
                          d.dump(-1, ' ', false, json::error_handler_t::replace));
    }
    if (!r) return r.error();
    if (r->status == 409) {
      conflict = true;
      return api_error(what, *r);
    }
    if (r->status < 200 || r->status >= 300) {
      if (auto wanted = layout_required_by(*r)) layout_wanted_ = wanted;
      return api_error(what, *r);
    }
    ++(update ? result.updated : result.created);
    sent_[name] = d["spec"];
    // The answer is the object as stored: the read-back of what the server kept.
    note_stored(d["spec"], json::parse(r->body, nullptr, false), result.counters_kept,
                result.taints_kept, result.shares_kept);
  }
  for (const auto& [name, item] : existing) {
    std::string path = std::string(kResourceSlicesPath) + "/" + name;
    auto r = client_.request("DELETE", path);
    if (!r) return r.error();
    if (r->status == 404) continue;
    if (r->status == 409) {
      conflict = true;
      return api_error("DELETE " + path, *r);
    }
    if (r->status < 200 || r->status >= 300) return api_error("DELETE " + path, *r);
    ++result.deleted;
    sent_.erase(name);
  }
  written = generation;
  return result;
}

Result<ServerFields> SlicePublisher::probe(const std::string& driver, const std::string& node) {
  // Which layout: the version's validation says, not its number (a distribution may carry
  // another rule than its version suggests, and the dry run asks the very server, its admission
  // included). The layout of 1.35 and later first; only 1.34's own 422 makes a second request.
  const json counters = {{"c", {{"value", "1"}}}};
  json device = {
      {"name", "probe"},
      {"consumesCounters", json::array({{{"counterSet", "probe"}, {"counters", counters}}})},
      {"taints",
       json::array({{{"key", kUnhealthyTaint}, {"value", "probe"}, {"effect", "NoSchedule"}}})},
      {"allowMultipleAllocations", true},
      {"capacity",
       {{kSharesCapacity,
         {{"value", "2"},
          {"requestPolicy",
           {{"default", "1"}, {"validRange", {{"min", "1"}, {"max", "2"}, {"step", "1"}}}}}}}}}};
  json spec;
  spec["driver"] = driver;
  spec["nodeName"] = node;
  spec["pool"] = {{"name", node}, {"generation", 0}, {"resourceSliceCount", 2}};
  spec["devices"] = json::array({device});
  std::string name = slice_name(Pool{driver, node, {}}, 0);
  name = name.substr(0, name.size() - 1) + "probe";  // "<node>-polyaccel-probe", never stored
  const std::string path = std::string(kResourceSlicesPath) + "?dryRun=All";
  ServerFields fields;
  Result<kube_api::HttpResponse> r = Error{};
  for (CounterLayout layout : {CounterLayout::own_slices, CounterLayout::with_devices}) {
    fields.layout = layout;
    if (layout == CounterLayout::with_devices) {
      spec["pool"]["resourceSliceCount"] = 1;
      spec["sharedCounters"] = json::array({{{"name", "probe"}, {"counters", counters}}});
    }
    json slice = {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceSlice"},
                  {"metadata", {{"name", name}}},
                  {"spec", spec}};
    r = client_.request("POST", path, slice.dump());
    if (!r) return r.error();
    if (layout_required_by(*r) != CounterLayout::with_devices) break;
  }
  if (r->status < 200 || r->status >= 300) return api_error("POST " + path, *r);
  json stored = json::parse(r->body, nullptr, false);
  if (!stored.is_object() || !stored.contains("spec"))
    return Error{ErrorCode::io, "POST " + path, "the answer is not a ResourceSlice", {}};
  std::optional<bool> kept_counters, kept_taints, kept_shares;
  note_stored(spec, stored, kept_counters, kept_taints, kept_shares);
  fields.counters = kept_counters.value_or(true);
  fields.taints = kept_taints.value_or(true);
  fields.shares = kept_shares.value_or(true);
  return fields;
}

Status SlicePublisher::remove_all(const std::string& driver, const std::string& node) {
  Pool empty{driver, node, {}};
  auto r = sync(empty);
  if (!r) return r.error();
  return Ok{};
}

}  // namespace polyaccel::dra
