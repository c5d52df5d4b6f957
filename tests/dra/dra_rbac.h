// The RBAC side of the DRA tests: what the API server's authorizer checks for a request, and what
// the DRA overlay's RBAC grants the agent (api_server_test.cc, claim_status_test.cc).
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace polyaccel::dra {

namespace rbac_fs = std::filesystem;

// What the API server's authorizer checks for a request: (apiGroup, resource, verb).
using RbacAttributes = std::tuple<std::string, std::string, std::string>;

inline RbacAttributes rbac_attributes(const std::string& method, const std::string& target) {
  const std::string path = target.substr(0, target.find('?'));
  const std::string query =
      target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1);
  std::vector<std::string> parts;
  for (size_t start = 1; start <= path.size();) {
    size_t slash = path.find('/', start);
    parts.push_back(
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  // /api/v1/... (the core group) or /apis/GROUP/VERSION/...; then namespaces/NS/ when namespaced.
  size_t i = parts.at(0) == "api" ? 2 : 3;
  std::string group = parts.at(0) == "api" ? "" : parts.at(1);
  if (parts.size() > i + 2 && parts[i] == "namespaces") i += 2;
  // A subresource (resourceclaims/<name>/status) is authorized as "resourceclaims/status".
  const std::string resource = parts.at(i) + (parts.size() > i + 2 ? "/" + parts[i + 2] : "");
  const bool named = parts.size() > i + 1;
  std::string verb;
  if (method == "GET")
    verb = named ? "get"
           : (query.find("watch=true") != std::string::npos ||
              query.find("watch=1") != std::string::npos)
               ? "watch"
               : "list";
  else if (method == "POST")
    verb = "create";
  else if (method == "PUT")
    verb = "update";
  else if (method == "PATCH")
    verb = "patch";
  else if (method == "DELETE")
    verb = named ? "delete" : "deletecollection";
  return {group, resource, verb};
}

// Every (apiGroup, resource, verb) the RBAC of the DRA component (and the base it builds on)
// grants the agent's service account, from each Role and ClusterRole bound to it. The partition
// manager's overlays grant what it asks (tests/partition_manager, tests/deploy).
inline std::set<RbacAttributes> granted_to_agent() {
  const rbac_fs::path kube = rbac_fs::path(POLYACCEL_SOURCE_DIR) / "deploy/kubernetes";
  std::vector<YAML::Node> docs;
  for (const auto& e : rbac_fs::recursive_directory_iterator(kube)) {
    if (e.path().extension() != ".yaml" || e.path().filename() == "kustomization.yaml") continue;
    const std::string dir = e.path().parent_path().lexically_relative(kube).string();
    if (dir != "base" && dir.rfind("components/dra", 0) != 0) continue;
    for (const auto& d : YAML::LoadAllFromFile(e.path().string()))
      if (d.IsMap() && d["kind"]) docs.push_back(d);
  }
  std::set<std::string> bound;  // "Role name" or "ClusterRole name"
  for (const auto& d : docs) {
    const std::string kind = d["kind"].as<std::string>();
    if (kind != "RoleBinding" && kind != "ClusterRoleBinding") continue;
    for (const auto& s : d["subjects"])
      if (s["kind"].as<std::string>() == "ServiceAccount" &&
          s["name"].as<std::string>() == "polyaccel-agent")
        bound.insert(d["roleRef"]["kind"].as<std::string>() + " " +
                     d["roleRef"]["name"].as<std::string>());
  }
  std::set<RbacAttributes> grants;
  for (const auto& d : docs) {
    const std::string kind = d["kind"].as<std::string>();
    if ((kind != "Role" && kind != "ClusterRole") ||
        !bound.count(kind + " " + d["metadata"]["name"].as<std::string>()))
      continue;
    for (const auto& rule : d["rules"]) {
      // A rule limited to resourceNames grants "resource[name]" (the fake API server's way).
      std::vector<std::string> names;
      for (const auto& n : rule["resourceNames"])
        names.push_back("[" + n.as<std::string>() + "]");
      if (names.empty()) names.push_back("");
      for (const auto& g : rule["apiGroups"])
        for (const auto& r : rule["resources"])
          for (const auto& v : rule["verbs"])
            for (const auto& n : names)
              grants.insert({g.as<std::string>(), r.as<std::string>() + n, v.as<std::string>()});
    }
  }
  return grants;
}

// The grants as the fake API server's claim_rbac holds them: "group resource verb".
inline std::set<std::string> granted_to_agent_lines() {
  std::set<std::string> out;
  for (const auto& [g, r, v] : granted_to_agent())
    out.insert(g + " " + r + " " + v);
  return out;
}

}  // namespace polyaccel::dra
