#include "dra/publisher.h"

#include <map>

namespace polyaccel::dra {

namespace {

using json = nlohmann::json;

// What we compare: the spec without the pool's generation and without what the server adds
// (a taint's timeAdded).
json comparable_spec(json spec) {
  if (spec.contains("pool") && spec["pool"].is_object()) spec["pool"].erase("generation");
  if (spec.contains("devices") && spec["devices"].is_array()) {
    for (auto& d : spec["devices"]) {
      if (!d.is_object() || !d.contains("taints") || !d["taints"].is_array()) continue;
      for (auto& t : d["taints"])
        if (t.is_object()) t.erase("timeAdded");
    }
  }
  return spec;
}

std::string list_path(const std::string& driver, const std::string& node) {
  return std::string(kResourceSlicesPath) +
         "?fieldSelector=" + url_encode("spec.nodeName=" + node + ",spec.driver=" + driver);
}

}  // namespace

Error api_error(const std::string& what, const HttpResponse& r) {
  std::string message;
  auto j = json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string())
    message = j["message"].get<std::string>();
  if (message.size() > 300) message.resize(300);
  std::string remedy;
  if (r.status == 403) {
    remedy =
        "grant the agent's service account resourceslices list/create/update/delete and "
        "resourceclaims get (deploy/kubernetes/overlays/dra/rbac.yaml)";
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
  std::string lpath = list_path(pool.driver, pool.node);
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
    const json& spec = item.value("spec", json::object());
    if (spec.value("driver", "") != pool.driver || spec.value("nodeName", "") != pool.node)
      continue;
    std::string name = item.value("metadata", json::object()).value("name", "");
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
           comparable_spec(it->second.value("spec", json::object())) == comparable_spec(d["spec"]);
  }
  SyncResult result;
  if (same) {
    result.generation = max_generation;
    return result;
  }

  // Bounded: generation is an int64 on the server.
  std::int64_t generation = max_generation < (std::int64_t{1} << 62) ? max_generation + 1 : 1;
  result.generation = generation;
  for (auto& d : desired) {
    d["spec"]["pool"]["generation"] = generation;
    std::string name = d["metadata"]["name"].get<std::string>();
    auto it = existing.find(name);
    Result<HttpResponse> r = Error{};
    std::string what;
    const bool update = it != existing.end();
    if (update) {
      d["metadata"]["resourceVersion"] =
          it->second["metadata"].value("resourceVersion", std::string());
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
    if (r->status < 200 || r->status >= 300) return api_error(what, *r);
    ++(update ? result.updated : result.created);
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
  }
  return result;
}

Status SlicePublisher::remove_all(const std::string& driver, const std::string& node) {
  Pool empty{driver, node, {}};
  auto r = sync(empty);
  if (!r) return r.error();
  return Ok{};
}

}  // namespace polyaccel::dra
