// deploy/kubernetes installs as operators install it: every overlay renders with `kubectl
// kustomize` (kubectl 1.22, the oldest supported, whose kustomize is v4.2.0, and the kubectl on
// PATH, which embeds v5 when it is current; or $POLYACCEL_KUBECTL alone) with nothing on stderr,
// every rendered object is valid against the Kubernetes OpenAPI schemas and the Prometheus
// Operator's CRDs, the components compose (any compatible pair and a few triples; the
// incompatible ones fail the render, naming the check; DRA in place of the device plugin; the
// least-privilege component without the partition managers), the
// DaemonSet of each variant passes flags the agent takes and mounts what they name, and the alert
// rules and dashboards select the scrape job the Prometheus Operator gives the agent.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "exporter/web_config.h"
#include "kube/nic_resources.h"
#include "share/amd_partition_config.h"
#include "share/time_slicing.h"
#include "support/k8s_schema.h"
#include "support/test_support.h"
#include "support/yaml_json.h"

namespace polyaccel {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using polyaccel::testing::read_text;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::write_text;
using polyaccel::testing::yaml_documents;

const fs::path kDeploy = fs::path(POLYACCEL_SOURCE_DIR) / "deploy";
const fs::path kKube = kDeploy / "kubernetes";
const fs::path kMonitoring = kKube / "overlays/monitoring";
const fs::path kMonitoringTls = kKube / "overlays/monitoring-tls";
const fs::path kDraClaims = kKube / "examples/dra-claims";
const std::vector<std::string> kDashboards = {"polyaccel-fleet.json", "polyaccel-node.json",
                                              "polyaccel-gpu.json"};

// Where scripts/install-deps.sh unpacks kubectl 1.22 (kustomize v4.2.0), the oldest kubectl the
// manifests support (components need kustomize v3.7; Debian 12's kubectl 1.20 embeds v2.0.3),
// beside the kubectl on PATH (current ones embed kustomize v5): every overlay and combination of
// components must render with both, alike.
constexpr const char* kKubectlOldest = "/usr/local/lib/polyaccel-test/kubectl-1.22/kubectl";

// The kubectls to render with: $POLYACCEL_KUBECTL alone when set; else the one on PATH and the
// 1.22 one.
std::vector<std::string> kubectls() {
  if (const char* k = std::getenv("POLYACCEL_KUBECTL"); k && *k) return {k};
  std::vector<std::string> out;
  if (run_command("command -v kubectl >/dev/null").exit_code == 0) out.push_back("kubectl");
  out.push_back(kKubectlOldest);
  return out;
}

// `kubectl kustomize DIR` with each of these kubectls: the rendered objects, which must be the
// same with each, and nothing on stderr (current kustomize warns there of deprecated fields, on
// every render an operator runs). A missing kubectl or a failed render is a failure of the test,
// never a skip.
std::vector<json> render_with(const fs::path& dir, const std::vector<std::string>& with) {
  std::vector<json> first;
  bool have_first = false;
  for (const auto& kubectl : with) {
    TempDir tmp;
    auto r = run_command("'" + kubectl + "' kustomize '" + dir.string() + "' 2>'" +
                         (tmp.path() / "stderr").string() + "'");
    std::string err = read_text(tmp.path() / "stderr");
    if (r.exit_code == 127) {
      ADD_FAILURE() << kubectl << " not found: scripts/install-deps.sh installs it";
      return {};
    }
    EXPECT_EQ(r.exit_code, 0) << kubectl << " kustomize " << dir << ": " << err;
    if (r.exit_code != 0) return {};
    EXPECT_EQ(err, "") << kubectl << " kustomize " << dir << " warns";
    auto objects = yaml_documents(r.output);
    if (!have_first) {
      first = objects;
      have_first = true;
    } else {
      EXPECT_EQ(objects, first) << kubectl << " renders " << dir << " otherwise than "
                                << with.front();
    }
  }
  return first;
}

// With every kubectl, the oldest supported one too: what the manifests ship must render with both.
std::vector<json> render(const fs::path& dir) {
  return render_with(dir, kubectls());
}

// The overlays operators apply, by folder name.
std::vector<std::string> overlays() {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(kKube / "overlays"))
    if (fs::exists(e.path() / "kustomization.yaml")) names.insert(e.path().filename().string());
  return {names.begin(), names.end()};
}

// The examples (deploy/kubernetes/examples/*): kustomizations for workloads, not the install.
std::vector<fs::path> examples() {
  std::set<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(kKube / "examples"))
    if (fs::exists(e.path() / "kustomization.yaml")) dirs.insert(e.path());
  return {dirs.begin(), dirs.end()};
}

// The objects of one kind.
std::vector<json> of_kind(const std::vector<json>& all, const std::string& kind) {
  std::vector<json> out;
  for (const auto& o : all)
    if (o.value("kind", "") == kind) out.push_back(o);
  return out;
}

// The one object of a kind (and name, when given).
json one(const std::vector<json>& all, const std::string& kind, const std::string& name = "") {
  std::vector<json> found;
  for (const auto& o : of_kind(all, kind))
    if (name.empty() || o["metadata"].value("name", "") == name) found.push_back(o);
  EXPECT_EQ(found.size(), 1u) << kind << " " << name;
  return found.empty() ? json::object() : found[0];
}

// Overlays whose render holds the agent (a DaemonSet): the variants. monitoring holds none.
std::vector<std::string> variants() {
  std::vector<std::string> out;
  for (const auto& o : overlays())
    if (o != "monitoring") out.push_back(o);
  return out;
}

const polyaccel::testing::K8sSchema& schema() {
  static const polyaccel::testing::K8sSchema s = [] {
    polyaccel::testing::K8sSchema k({"core-v1-openapi.json", "apps-v1-openapi.json",
                                     "rbac.authorization.k8s.io-v1-openapi.json",
                                     "admissionregistration.k8s.io-v1-openapi.json",
                                     "resource.k8s.io-v1-openapi.json"});
    for (const char* crd : {"servicemonitors", "prometheusrules", "podmonitors"}) {
      auto path = polyaccel::testing::shared_dir() /
                  ("reference/kubernetes/prometheus-operator/monitoring.coreos.com_" +
                   std::string(crd) + ".yaml");
      for (const auto& doc : yaml_documents(read_text(path)))
        k.add_crd(doc);
    }
    return k;
  }();
  return s;
}

// The components (deploy/kubernetes/components/*): the optional parts, combined in a
// kustomization of the operator's own (docs/kubernetes.md, "Combining components").
std::vector<std::string> components() {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(kKube / "components"))
    if (fs::exists(e.path() / "kustomization.yaml")) names.insert(e.path().filename().string());
  return {names.begin(), names.end()};
}

// The fields kustomize v4.2.0 (kubectl 1.22) and v5 both read without a warning: no `bases`, no
// `patchesJson6902` or `patchesStrategicMerge`, no `commonLabels` (v5 warns of each, on every
// render).
const std::set<std::string> kCurrentFields = {
    "apiVersion", "kind",   "resources", "components",         "patches",
    "images",     "labels", "namespace", "configMapGenerator", "generatorOptions"};

TEST(Manifests, KustomizationsUseCurrentFieldsAndListEveryFile) {
  std::vector<fs::path> dirs = {kKube / "base", kKube / "own-node-patch"};
  for (const auto& o : overlays())
    dirs.push_back(kKube / "overlays" / o);
  for (const auto& c : components())
    dirs.push_back(kKube / "components" / c);
  for (const auto& e : examples())
    dirs.push_back(e);
  EXPECT_GE(components().size(), 10u);
  for (const auto& dir : dirs) {
    SCOPED_TRACE(dir.string());
    auto k = YAML::LoadFile((dir / "kustomization.yaml").string());
    const bool component = dir.parent_path() == kKube / "components";
    EXPECT_EQ(k["kind"].as<std::string>(), component ? "Component" : "Kustomization");
    EXPECT_EQ(k["apiVersion"].as<std::string>(),
              component ? "kustomize.config.k8s.io/v1alpha1" : "kustomize.config.k8s.io/v1beta1");
    std::set<std::string> listed;
    for (const auto& kv : k) {
      std::string field = kv.first.as<std::string>();
      EXPECT_TRUE(kCurrentFields.count(field)) << field << " is deprecated or not read by v4.2.0";
    }
    auto directory = [&](const fs::path& other) {
      fs::path d = fs::weakly_canonical(dir / other);
      EXPECT_TRUE(fs::is_regular_file(d / "kustomization.yaml")) << d;
      // A kustomization inside one it includes is a cycle to kustomize.
      auto rel = fs::relative(dir, d).string();
      EXPECT_TRUE(rel.rfind("..", 0) == 0) << dir << " sits inside " << d;
    };
    for (const auto& r : k["resources"]) {
      const std::string name = r.as<std::string>();
      if (fs::is_directory(dir / name)) {
        directory(name);
        continue;
      }
      EXPECT_TRUE(fs::is_regular_file(dir / name)) << name;
      listed.insert(name);
    }
    for (const auto& c : k["components"]) {
      directory(c.as<std::string>());
      EXPECT_EQ(fs::weakly_canonical(dir / c.as<std::string>()).parent_path(),
                fs::weakly_canonical(kKube / "components"));
    }
    for (const auto& p : k["patches"]) {
      EXPECT_TRUE(p["target"].IsMap()) << "a patch names its target";
      if (p["path"]) listed.insert(p["path"].as<std::string>());
    }
    for (const auto& g : k["configMapGenerator"])
      for (const auto& f : g["files"]) {
        std::string file = f.as<std::string>();  // "key=path" names the key
        listed.insert(file.substr(file.find('=') + 1));
      }
    std::set<std::string> present;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      auto ext = e.path().extension();
      if ((ext == ".yaml" || ext == ".json") && e.path().filename() != "kustomization.yaml")
        present.insert(fs::relative(e.path(), dir).string());
    }
    EXPECT_EQ(listed, present);
  }
}

// Each overlay but monitoring (the one that holds no agent) is the base and components, nothing of
// its own: what an overlay does, a kustomization of the operator's own gets by naming the same
// components, with others beside them.
TEST(Manifests, OverlaysAreTheBaseWithComponents) {
  for (const auto& o : overlays()) {
    if (o == "monitoring") continue;
    SCOPED_TRACE(o);
    auto k = YAML::LoadFile((kKube / "overlays" / o / "kustomization.yaml").string());
    ASSERT_EQ(k["resources"].size(), 1u);
    EXPECT_EQ(k["resources"][0].as<std::string>(), "../../base");
    for (const auto& kv : k) {
      const std::string field = kv.first.as<std::string>();
      EXPECT_TRUE(field == "apiVersion" || field == "kind" || field == "resources" ||
                  field == "components")
          << field;
    }
  }
}

TEST(Manifests, EveryOverlayRendersValidObjects) {
  for (const auto& o : overlays()) {
    SCOPED_TRACE(o);
    auto all = render(kKube / "overlays" / o);
    ASSERT_FALSE(all.empty());
    std::set<std::string> ids;
    for (const auto& obj : all) {
      for (const auto& e : schema().validate_object(obj))
        ADD_FAILURE() << e;
      std::string id = obj.value("kind", "") + " " + obj["metadata"].value("namespace", "") + "/" +
                       obj["metadata"].value("name", "");
      EXPECT_TRUE(ids.insert(id).second) << id << " twice";
      // Namespaced objects of ours are in the agent's namespace; the grant to post Events about
      // the Node is in "default", the only namespace where the API server takes them.
      if (obj["metadata"].contains("namespace")) {
        const bool node_events = obj["metadata"].value("name", "") == "polyaccel-node-events";
        EXPECT_EQ(obj["metadata"]["namespace"], node_events ? "default" : "polyaccel-system") << id;
      }
    }
    if (o != "monitoring") {
      // The namespace the agent runs in is part of every variant.
      EXPECT_EQ(one(all, "Namespace")["metadata"]["name"], "polyaccel-system");
    }
  }
}

// What a variant's agent is given: its flags (name -> value), mounts and volumes.
struct Agent {
  json pod, container;
  std::map<std::string, std::string> flags;
  std::vector<std::string> args;
  std::map<std::string, json> volumes;        // by name
  std::map<std::string, std::string> mounts;  // mount path -> volume name
};

Agent agent_of(const json& ds) {
  Agent a;
  a.pod = ds["spec"]["template"]["spec"];
  EXPECT_EQ(a.pod["containers"].size(), 1u);
  a.container = a.pod["containers"][0];
  for (const auto& arg : a.container["args"]) {
    std::string s = arg.get<std::string>();
    a.args.push_back(s);
    auto eq = s.find('=');
    if (s.rfind("--", 0) == 0)
      a.flags[s.substr(0, eq)] = eq == std::string::npos ? "" : s.substr(eq + 1);
  }
  for (const auto& v : a.pod["volumes"])
    EXPECT_TRUE(a.volumes.emplace(v["name"].get<std::string>(), v).second) << v["name"];
  for (const auto& m : a.container["volumeMounts"]) {
    EXPECT_TRUE(a.volumes.count(m["name"].get<std::string>())) << m["name"];
    a.mounts[m["mountPath"].get<std::string>()] = m["name"].get<std::string>();
  }
  return a;
}

// The ConfigMap key a file flag (--sharing-config, --nic-config) reads: its folder is a
// ConfigMap volume of a ConfigMap in the render that holds the file's name.
std::string configmap_file(const std::vector<json>& all, const Agent& a, const std::string& flag) {
  fs::path file = a.flags.at(flag);
  auto m = a.mounts.find(file.parent_path().string());
  if (m == a.mounts.end()) {
    ADD_FAILURE() << flag << ": " << file.parent_path() << " is not mounted";
    return "";
  }
  const json& v = a.volumes.at(m->second);
  if (!v.contains("configMap")) {
    ADD_FAILURE() << flag << ": " << m->second << " is not a ConfigMap volume";
    return "";
  }
  EXPECT_FALSE(v["configMap"].value("optional", false))
      << flag << ": an optional ConfigMap would let the agent start without its file and refuse";
  json cm = one(all, "ConfigMap", v["configMap"]["name"].get<std::string>());
  std::string key = file.filename().string();
  if (!cm["data"].contains(key)) {
    ADD_FAILURE() << flag << ": ConfigMap " << v["configMap"]["name"] << " has no key " << key;
    return "";
  }
  return cm["data"][key].get<std::string>();
}

// The image the base's kustomization sets.
std::string kustomized_image() {
  auto k = YAML::LoadFile((kKube / "base/kustomization.yaml").string());
  return k["images"][0]["newName"].as<std::string>() + ":" +
         k["images"][0]["newTag"].as<std::string>();
}

TEST(Manifests, EveryVariantRunsTheAgentWithFlagsItTakesAndMountsWhatTheyName) {
  auto help = run_command(polyaccel::testing::polyaccel_binary() + " agent --help 2>&1");
  ASSERT_EQ(help.exit_code, 0) << help.output;
  // The image's tag is this build's version: what `make image` builds of it.
  const std::string image = kustomized_image();
  auto version = run_command(polyaccel::testing::polyaccel_binary() + " --version");
  EXPECT_THAT(version.output,
              ::testing::StartsWith("polyaccel " + image.substr(image.rfind(':') + 1) + " "));
  // The directories the agent is told of, and the host paths they are.
  const std::set<std::string> dir_flags = {"--kubelet-dir", "--nfd-features-dir",
                                           "--dra-plugins-dir", "--dra-registry-dir", "--cdi-dir"};
  for (const auto& variant : variants()) {
    SCOPED_TRACE(variant);
    auto all = render(kKube / "overlays" / variant);
    ASSERT_FALSE(all.empty());
    json ds = one(all, "DaemonSet");
    Agent a = agent_of(ds);
    ASSERT_FALSE(a.args.empty());
    EXPECT_EQ(a.args[0], "agent");
    EXPECT_EQ(a.container["command"], json::array({"/usr/bin/polyaccel"}));
    EXPECT_EQ(a.container["image"], image);
    // Every flag is one `polyaccel agent` takes, and none is given twice.
    EXPECT_EQ(a.flags.size() + 1, a.args.size()) << "a flag given twice, or a bare argument";
    for (const auto& [flag, value] : a.flags)
      EXPECT_NE(help.output.find(flag + " "), std::string::npos)
          << flag << " is not an agent option";
    for (const auto& [flag, value] : a.flags) {
      if (!dir_flags.count(flag) || value.empty()) continue;
      ASSERT_TRUE(a.mounts.count(value)) << flag << "=" << value << " is not mounted";
      EXPECT_EQ(a.volumes[a.mounts[value]]["hostPath"]["path"], value) << flag;
    }
    // One allocator per device: the device plugin's directory in every variant but DRA's, which
    // turns the plugin off (the agent refuses --dra with a --kubelet-dir).
    ASSERT_TRUE(a.flags.count("--kubelet-dir"));
    EXPECT_EQ(a.flags["--kubelet-dir"].empty(), a.flags.count("--dra") > 0);
    if (a.flags.count("--sharing-config")) {
      auto text = configmap_file(all, a, "--sharing-config");
      auto cfg = parse_sharing_config(text, variant + " sharing config");
      ASSERT_TRUE(cfg) << cfg.error().message();
      EXPECT_EQ(cfg->strategy, SharingStrategy::time_slicing);
    }
    if (a.flags.count("--nic-config")) {
      auto cfg = parse_nic_config(configmap_file(all, a, "--nic-config"), variant + " NIC config");
      ASSERT_TRUE(cfg) << cfg.error().message();
      EXPECT_FALSE(cfg->pools.empty());
    }
    // The DRA driver's API access: a token and the grants of its ClusterRoleBinding.
    if (a.flags.count("--dra")) {
      EXPECT_EQ(a.pod["automountServiceAccountToken"], true);
      auto binding = one(all, "ClusterRoleBinding", "polyaccel-dra");
      EXPECT_EQ(binding["subjects"][0]["name"], a.pod["serviceAccountName"]);
      EXPECT_FALSE(of_kind(all, "DeviceClass").empty());
    } else if (a.flags.count("--mig-manager") || a.flags.count("--amd-partition-manager")) {
      EXPECT_EQ(a.pod["automountServiceAccountToken"], true);
    } else {
      EXPECT_EQ(a.pod["automountServiceAccountToken"], false);
      EXPECT_TRUE(of_kind(all, "ClusterRoleBinding").empty());
    }
    // The objects the DaemonSet names exist, and the selectors agree.
    auto sa = one(all, "ServiceAccount");
    EXPECT_EQ(a.pod["serviceAccountName"], sa["metadata"]["name"]);
    auto labels = ds["spec"]["template"]["metadata"]["labels"];
    for (const auto& [k, v] : ds["spec"]["selector"]["matchLabels"].items())
      EXPECT_EQ(labels[k], v) << k;
    auto svc = one(all, "Service");
    for (const auto& [k, v] : svc["spec"]["selector"].items())
      EXPECT_EQ(labels[k], v) << k;
    // The metrics port: the container's, the Service's target, where the agent listens.
    std::string port_name = a.container["ports"][0]["name"].get<std::string>();
    EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"], port_name);
    EXPECT_NE(help.output.find(":" + a.container["ports"][0]["containerPort"].dump()),
              std::string::npos);
    // ConfigMaps reach the agent as volumes, which kubelet fetches: no Role for the agent but the
    // partition manager's, which reads its layouts through the API (least privilege;
    // tests/dra/api_server_test.cc and MigManagerGrantsOnlyWhatItUses check grants against use).
    for (const auto& kind : {"Role", "RoleBinding"}) {
      for (const auto& object : of_kind(all, kind))
        EXPECT_TRUE(object["metadata"]["name"] == "polyaccel-mig-manager" ||
                    object["metadata"]["name"] == "polyaccel-partition-manager" ||
                    object["metadata"]["name"] == "polyaccel-node-events")
            << kind << " " << object["metadata"]["name"];
    }
  }
}

// Where scripts/install-deps.sh installs npm's @bufbuild/cel, the CEL evaluator the admission
// policy's expressions are run with.
constexpr const char* kCelModules = "/usr/local/lib/polyaccel-test/cel/node_modules";

// A ResourceSlice request as the API server hands it to admission: the user (a service account
// token bound to a pod on `token_node`, or none; `with_extra` false: a user with no `extra` at
// all, as kube-apiserver 1.34.9 hands a token without pod claims), the operation and the objects.
json admission_request(const std::string& user, const std::string& token_node,
                       const std::string& operation, const std::string& new_node,
                       const std::string& old_node, bool with_extra = true) {
  json extra = json::object();
  if (!token_node.empty()) extra["authentication.kubernetes.io/node-name"] = {token_node};
  auto slice = [](const std::string& node) -> json {
    json spec = {{"driver", "polyaccel.io"}, {"pool", {{"name", "p"}, {"generation", 1}}}};
    if (node == "*")
      spec["allNodes"] = true;
    else
      spec["nodeName"] = node;
    return {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceSlice"},
            {"metadata", {{"name", "s"}}},
            {"spec", spec}};
  };
  json user_info = {{"username", user}};
  if (with_extra) user_info["extra"] = extra;
  return {{"request", {{"operation", operation}, {"userInfo", user_info}}},
          {"object", new_node.empty() ? json(nullptr) : slice(new_node)},
          {"oldObject", old_node.empty() ? json(nullptr) : slice(old_node)}};
}

// Node-scoped writes (issue 29): the DRA overlays ship a ValidatingAdmissionPolicy and its
// binding, valid by the admissionregistration.k8s.io/v1 schema (EveryOverlayRendersValidObjects),
// whose CEL, run by a real CEL implementation, lets the agent write its own node's ResourceSlices
// and no other's.
TEST(Manifests, DraAdmissionPolicyKeepsEachAgentToItsOwnNode) {
  for (const std::string variant : {"dra"}) {
    SCOPED_TRACE(variant);
    auto all = render(kKube / "overlays" / variant);
    ASSERT_FALSE(all.empty());
    json policy = one(all, "ValidatingAdmissionPolicy");
    json binding = one(all, "ValidatingAdmissionPolicyBinding");
    EXPECT_EQ(binding["spec"]["policyName"], policy["metadata"]["name"]);
    EXPECT_EQ(binding["spec"]["validationActions"], json::array({"Deny"}));
    EXPECT_EQ(policy["spec"]["failurePolicy"], "Fail");
    const json& rule = policy["spec"]["matchConstraints"]["resourceRules"][0];
    EXPECT_EQ(rule["resources"], json::array({"resourceslices"}));
    EXPECT_EQ(rule["operations"], json::array({"CREATE", "UPDATE", "DELETE"}));
    // The user it is about is the DaemonSet's service account.
    json sa = one(all, "ServiceAccount");
    const std::string agent =
        "system:serviceaccount:" + sa["metadata"]["namespace"].get<std::string>() + ":" +
        sa["metadata"]["name"].get<std::string>();
    EXPECT_EQ(one(all, "DaemonSet")["spec"]["template"]["spec"]["serviceAccountName"],
              sa["metadata"]["name"]);

    struct Case {
      const char* what;
      json request;
      bool allowed;
      const char* message;  // in a denial
    };
    const std::string admin = "kubernetes-admin";
    const std::vector<Case> cases = {
        {"create on its own node", admission_request(agent, "node-1", "CREATE", "node-1", ""), true,
         ""},
        {"create on another node", admission_request(agent, "node-1", "CREATE", "node-2", ""),
         false, "may not write ResourceSlices of node 'node-2'"},
        {"update of its own", admission_request(agent, "node-1", "UPDATE", "node-1", "node-1"),
         true, ""},
        {"update of another node's",
         admission_request(agent, "node-1", "UPDATE", "node-2", "node-2"), false, "node 'node-2'"},
        {"taking another node's slice over",
         admission_request(agent, "node-1", "UPDATE", "node-1", "node-2"), false, "node 'node-2'"},
        {"giving its slice away", admission_request(agent, "node-1", "UPDATE", "node-2", "node-1"),
         false, "node 'node-2'"},
        {"delete of its own", admission_request(agent, "node-1", "DELETE", "", "node-1"), true, ""},
        {"delete of another node's", admission_request(agent, "node-1", "DELETE", "", "node-2"),
         false, "node 'node-2'"},
        {"a slice for all nodes", admission_request(agent, "node-1", "CREATE", "*", ""), false,
         "without a nodeName"},
        {"a token bound to no node", admission_request(agent, "", "CREATE", "node-1", ""), false,
         "names no node"},
        // Refused by the policy's own rule, not by an evaluation error ("no such key: extra")
        // that only failurePolicy: Fail turns into a denial (issue 40, 9).
        {"a user with no extra at all", admission_request(agent, "", "CREATE", "node-1", "", false),
         false, "names no node"},
        {"another user with no extra at all",
         admission_request(admin, "", "CREATE", "node-2", "", false), true, ""},
        {"another user", admission_request(admin, "", "CREATE", "node-2", ""), true, ""},
    };
    TempDir tmp;
    json requests = json::array();
    for (const auto& c : cases)
      requests.push_back(c.request);
    write_text(tmp.path() / "policy.json", policy.dump());
    write_text(tmp.path() / "requests.json", requests.dump());
    auto r = run_command(
        "NODE_PATH=" + std::string(kCelModules) + " node '" +
        (fs::path(POLYACCEL_SOURCE_DIR) / "tests/deploy/admission_policy_eval.cjs").string() +
        "' '" + (tmp.path() / "policy.json").string() + "' '" +
        (tmp.path() / "requests.json").string() + "' 2>&1");
    ASSERT_EQ(r.exit_code, 0) << "node with @bufbuild/cel (scripts/install-deps.sh): " << r.output;
    json results = json::parse(r.output);
    ASSERT_EQ(results.size(), cases.size()) << r.output;
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(cases[i].what);
      EXPECT_EQ(results[i]["allowed"], cases[i].allowed) << results[i].dump();
      if (!cases[i].allowed) {
        EXPECT_THAT(results[i].value("message", ""), ::testing::HasSubstr(cases[i].message));
      }
    }
    EXPECT_EQ(results.back()["matched"], false) << "other users are not this policy's concern";
  }
  // Without the DRA driver there are no API writes and no policy.
  EXPECT_TRUE(
      of_kind(render(kKube / "overlays/device-plugin"), "ValidatingAdmissionPolicy").empty());
}

// Events about the agent's Node: create in "default" only, where the API server takes an Event
// about a cluster-scoped object (anywhere else it answers 422), bound to the agent's account.
void expect_node_events_grant(const std::vector<json>& all) {
  json role = one(all, "Role", "polyaccel-node-events");
  EXPECT_EQ(role["metadata"]["namespace"], "default");
  EXPECT_EQ(role["rules"], json::parse(R"([
      {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}])"));
  json binding = one(all, "RoleBinding", "polyaccel-node-events");
  EXPECT_EQ(binding["metadata"]["namespace"], "default");
  EXPECT_EQ(binding["roleRef"]["name"], "polyaccel-node-events");
  EXPECT_EQ(binding["subjects"][0]["name"], "polyaccel-agent");
  EXPECT_EQ(binding["subjects"][0]["namespace"], "polyaccel-system");
}

// The partition manager's grants, least privilege: Nodes get and patch, its one ConfigMap get,
// Events create in "default"; pods/eviction create only where --partition-evict-pods is given.
TEST(Manifests, MigManagerGrantsOnlyWhatItUses) {
  auto rules_of = [](const std::vector<json>& all, const std::string& kind,
                     const std::string& name) { return one(all, kind, name)["rules"]; };
  for (const std::string variant : {"mig-manager", "mig-manager-evict"}) {
    SCOPED_TRACE(variant);
    auto all = render(kKube / "overlays" / variant);
    Agent a = agent_of(one(all, "DaemonSet"));
    EXPECT_TRUE(a.flags.count("--mig-manager"));
    EXPECT_EQ(a.flags["--mig-config-map"], "polyaccel-system/default-mig-parted-config");
    auto cm = one(all, "ConfigMap", "default-mig-parted-config");
    EXPECT_EQ(cm["metadata"]["namespace"], "polyaccel-system");
    EXPECT_EQ(cm["data"]["config.yaml"],
              read_text(kKube / "components/mig-manager/config-default.yaml"));
    EXPECT_EQ(
        rules_of(all, "ClusterRole", "polyaccel-mig-manager"),
        json::parse(
            R"([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "patch"]}])"));
    EXPECT_EQ(rules_of(all, "Role", "polyaccel-mig-manager"), json::parse(R"([
        {"apiGroups": [""], "resources": ["configmaps"],
         "resourceNames": ["default-mig-parted-config"], "verbs": ["get"]}])"));
    expect_node_events_grant(all);
    bool evicts = a.flags.count("--partition-evict-pods") > 0;
    EXPECT_EQ(evicts, variant == "mig-manager-evict");
    EXPECT_EQ(of_kind(all, "ClusterRole").size(), evicts ? 2u : 1u);
    if (evicts) {
      EXPECT_EQ(
          rules_of(all, "ClusterRole", "polyaccel-evict-pods"),
          json::parse(
              R"([{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}])"));
    }
    // The state survives restarts on the host; the lock is the host's `mig apply` lock.
    ASSERT_TRUE(a.mounts.count("/var/lib/polyaccel"));
    EXPECT_EQ(a.volumes[a.mounts["/var/lib/polyaccel"]]["hostPath"]["path"], "/var/lib/polyaccel");
    ASSERT_TRUE(a.mounts.count("/run/lock"));
  }
}

// issue 40 (9): the partition managers' `nodes: patch` grant comes with a ValidatingAdmissionPolicy
// whose CEL, run by a real CEL implementation, lets the agent patch its own Node and no other.
TEST(Manifests, PartitionManagersPatchOnlyTheirOwnNode) {
  for (const std::string variant : {"mig-manager", "mig-manager-evict", "amd-partition-manager"}) {
    SCOPED_TRACE(variant);
    auto all = render(kKube / "overlays" / variant);
    json policy = one(all, "ValidatingAdmissionPolicy");
    json binding = one(all, "ValidatingAdmissionPolicyBinding");
    EXPECT_EQ(binding["spec"]["policyName"], policy["metadata"]["name"]);
    EXPECT_EQ(binding["spec"]["validationActions"], json::array({"Deny"}));
    EXPECT_EQ(policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"],
              json::array({"nodes"}));
    json sa = one(all, "ServiceAccount");
    const std::string agent =
        "system:serviceaccount:" + sa["metadata"]["namespace"].get<std::string>() + ":" +
        sa["metadata"]["name"].get<std::string>();
    auto patch = [](const std::string& user, const std::string& token_node, bool with_extra,
                    const std::string& node) {
      json user_info = {{"username", user}};
      if (with_extra) {
        user_info["extra"] = json::object();
        if (!token_node.empty())
          user_info["extra"]["authentication.kubernetes.io/node-name"] = {token_node};
      }
      json object = {{"kind", "Node"}, {"metadata", {{"name", node}}}};
      return json{{"request", {{"operation", "UPDATE"}, {"userInfo", user_info}}},
                  {"object", object},
                  {"oldObject", object}};
    };
    struct Case {
      const char* what;
      json request;
      bool allowed;
      const char* message;
    };
    const std::vector<Case> cases = {
        {"its own node", patch(agent, "node-1", true, "node-1"), true, ""},
        {"another node", patch(agent, "node-1", true, "node-2"), false,
         "on node 'node-1' may not patch node 'node-2'"},
        {"a token bound to no node", patch(agent, "", true, "node-1"), false, "names no node"},
        {"a user with no extra at all", patch(agent, "", false, "node-1"), false, "names no node"},
        {"another user", patch("system:node:node-2", "", false, "node-1"), true, ""},
    };
    TempDir tmp;
    json requests = json::array();
    for (const auto& c : cases)
      requests.push_back(c.request);
    write_text(tmp.path() / "policy.json", policy.dump());
    write_text(tmp.path() / "requests.json", requests.dump());
    auto r = run_command(
        "NODE_PATH=" + std::string(kCelModules) + " node '" +
        (fs::path(POLYACCEL_SOURCE_DIR) / "tests/deploy/admission_policy_eval.cjs").string() +
        "' '" + (tmp.path() / "policy.json").string() + "' '" +
        (tmp.path() / "requests.json").string() + "' 2>&1");
    ASSERT_EQ(r.exit_code, 0) << "node with @bufbuild/cel (scripts/install-deps.sh): " << r.output;
    json results = json::parse(r.output);
    ASSERT_EQ(results.size(), cases.size()) << r.output;
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(cases[i].what);
      EXPECT_EQ(results[i]["allowed"], cases[i].allowed) << results[i].dump();
      if (!cases[i].allowed) {
        EXPECT_THAT(results[i].value("message", ""), ::testing::HasSubstr(cases[i].message));
      }
    }
    EXPECT_EQ(results.back()["matched"], false) << "other users are not this policy's concern";
  }
}

// The AMD partition manager's overlay: the same least privilege, its one ConfigMap of DCM profiles
// (config-manager-config, config.json), which the agent's own parser reads and whose every
// profile fits an 8-GPU node, as DCM checks it.
TEST(Manifests, AmdPartitionManagerGrantsOnlyWhatItUses) {
  auto all = render(kKube / "overlays/amd-partition-manager");
  ASSERT_FALSE(all.empty());
  Agent a = agent_of(one(all, "DaemonSet"));
  EXPECT_TRUE(a.flags.count("--amd-partition-manager"));
  EXPECT_FALSE(a.flags.count("--mig-manager"));
  EXPECT_EQ(a.flags["--amd-config-map"], "polyaccel-system/config-manager-config");
  EXPECT_EQ(
      one(all, "ClusterRole", "polyaccel-partition-manager")["rules"],
      json::parse(
          R"([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "patch"]}])"));
  EXPECT_EQ(one(all, "Role", "polyaccel-partition-manager")["rules"], json::parse(R"([
      {"apiGroups": [""], "resources": ["configmaps"],
       "resourceNames": ["config-manager-config"], "verbs": ["get"]}])"));
  expect_node_events_grant(all);
  auto cm = one(all, "ConfigMap", "config-manager-config");
  EXPECT_EQ(cm["metadata"]["namespace"], "polyaccel-system");
  auto config = parse_amd_partition_config(cm["data"]["config.json"].get<std::string>(),
                                           "config-manager-config/config.json");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->profiles.size(), 5u);
  for (const auto& [name, profile] : config->profiles) {
    auto targets = select_amd_partition_profile(*config, name, 8);
    EXPECT_TRUE(targets) << name << ": " << targets.error().message();
  }
  ASSERT_TRUE(a.mounts.count("/var/lib/polyaccel"));
  ASSERT_TRUE(a.mounts.count("/run/lock"));
}

// Whether `name` is a Kubernetes extended resource name (k8s.io/apimachinery's
// IsQualifiedName on it and on "requests." + it, a domain outside kubernetes.io, as
// IsExtendedResourceName and DeviceClass validation demand).
bool is_extended_resource_name(const std::string& name) {
  static const std::regex qualified(
      R"(^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)"
      R"(([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$)");
  std::smatch m;
  if (!std::regex_match(name, m, qualified)) return false;
  const std::string domain = m[1], rest = m[5];
  if (domain.size() > 253 || rest.size() > 63) return false;
  if (domain == "kubernetes.io" || domain.ends_with(".kubernetes.io")) return false;
  return domain.find('.') != std::string::npos;
}

// Extended resources through DRA (DRAExtendedResource): a DeviceClass for each name the device
// plugin offers (nvidia.com/gpu, amd.com/gpu, habana.ai/gaudi), each name claimed by one class
// only (the scheduler takes the class created last when two claim a name), each selecting whole
// devices of its vendor and nothing else (no MIG device, partition, NIC). Valid by the schemas of
// the API servers that keep the field (1.36, beta) and of those that know it as alpha (the older
// schema; 1.34 and 1.35 with the gate off drop it: the class, without it, is still valid).
// The claim templates (issue 39: GPU + NIC + cores + memory on one NUMA node, a whole node with
// its GPU, a linked pair with two nodes' CPUs, for NVIDIA, AMD and Gaudi) are examples of their
// own (examples/dra-claims, issue 42): valid, without a namespace (the one they are applied to
// decides), naming the overlay's classes, and their constraints name their own requests. What
// the scheduler makes of them on a captured machine: tests/dra/cpu_devices_test.cc.
TEST(Manifests, DraClaimTemplatesNameTheOverlaysClassesAndRequests) {
  auto all = render(kKube / "overlays/dra");
  ASSERT_FALSE(all.empty());
  EXPECT_TRUE(of_kind(all, "ResourceClaimTemplate").empty()) << "examples are not installed";
  std::set<std::string> classes;
  for (const auto& c : of_kind(all, "DeviceClass"))
    classes.insert(c["metadata"]["name"].get<std::string>());
  for (const char* cpu : {"cpu.polyaccel.io", "cpu-numa.polyaccel.io", "memory.polyaccel.io"})
    EXPECT_TRUE(classes.count(cpu)) << cpu;
  auto claims = render(kDraClaims);
  ASSERT_FALSE(claims.empty());
  std::set<std::string> templates;
  for (const auto& t : claims) {
    const std::string name = t["metadata"]["name"];
    SCOPED_TRACE(name);
    EXPECT_EQ(t["kind"], "ResourceClaimTemplate");
    for (const auto& e : schema().validate_object(t))
      ADD_FAILURE() << e;
    EXPECT_FALSE(t["metadata"].contains("namespace")) << t["metadata"]["namespace"];
    templates.insert(name);
    const auto& devices = t["spec"]["spec"]["devices"];
    std::set<std::string> requests;
    for (const auto& r : devices["requests"]) {
      requests.insert(r["name"].get<std::string>());
      EXPECT_TRUE(classes.count(r["exactly"]["deviceClassName"].get<std::string>()));
    }
    for (const auto& c : devices.value("constraints", nlohmann::json::array()))
      for (const auto& r : c.value("requests", nlohmann::json::array()))
        EXPECT_TRUE(requests.count(r.get<std::string>())) << r;
  }
  for (const char* t :
       {"one-gpu", "mig-3g", "two-gpus-nvlink", "gpu-with-nic-same-numa",
        "gpu-with-nic-same-pcie-root", "rdma-nic-share", "gpu-nic-cores-same-numa",
        "amd-gpu-nic-cores-same-numa", "gaudi-nic-cores-same-numa", "numa-node-with-gpu",
        "nvlink-pair-with-numa-nodes", "amd-xgmi-pair-with-numa-nodes"})
    EXPECT_TRUE(templates.count(t)) << t;
}

// Cluster-scoped kinds: the only objects that may have no namespace.
const std::set<std::string> kClusterScoped = {"Namespace",
                                              "ClusterRole",
                                              "ClusterRoleBinding",
                                              "DeviceClass",
                                              "ValidatingAdmissionPolicy",
                                              "ValidatingAdmissionPolicyBinding",
                                              "RuntimeClass",
                                              "CustomResourceDefinition",
                                              "PriorityClass"};

// An install puts nothing into `default` (issue 42, 7): what an operator applies lands in the
// agent's namespace or is cluster-scoped, and no namespaced object lacks a namespace (it would
// go to whatever namespace kubectl's context names). One exception, named: the partition
// managers' grant to create Events about their Node, which the API server takes only in
// `default` (a cluster-scoped object's Events live there; expect_node_events_grant checks that
// it grants nothing else).
TEST(Manifests, NoOverlayPutsAnObjectInDefaultOrLeavesItsNamespaceOut) {
  for (const auto& o : overlays()) {
    SCOPED_TRACE(o);
    auto all = render(kKube / "overlays" / o);
    ASSERT_FALSE(all.empty());
    for (const auto& obj : all) {
      const std::string kind = obj.value("kind", "");
      const json& meta = obj["metadata"];
      const std::string id = kind + " " + meta.value("name", "");
      if (kClusterScoped.count(kind)) {
        EXPECT_FALSE(meta.contains("namespace")) << id << " is cluster-scoped";
        continue;
      }
      ASSERT_TRUE(meta.contains("namespace")) << id << " has no namespace";
      const bool node_events = (kind == "Role" || kind == "RoleBinding") &&
                               meta.value("name", "") == "polyaccel-node-events";
      if (!node_events) {
        EXPECT_NE(meta["namespace"], "default") << id;
      }
    }
  }
}

TEST(Manifests, DraDeviceClassesOfferTheDevicePluginsResourceNames) {
  auto all = render(kKube / "overlays/dra");
  ASSERT_FALSE(all.empty());
  const polyaccel::testing::K8sSchema v136({"v1.36/resource.k8s.io-v1-openapi.json"});
  const polyaccel::testing::K8sSchema older({"resource.k8s.io-v1-openapi.json"});
  const std::map<std::string, std::pair<std::string, std::string>> want = {
      {"nvidia.com/gpu", {"gpu", "nvidia"}},
      {"amd.com/gpu", {"gpu", "amd"}},
      {"habana.ai/gaudi", {"hpu", "intel-gaudi"}}};
  std::map<std::string, std::vector<std::string>> classes_of;  // name -> classes
  for (const auto& c : of_kind(all, "DeviceClass")) {
    const std::string name = c["metadata"]["name"];
    SCOPED_TRACE(name);
    for (const auto* schema : {&v136, &older}) {
      for (const auto& e : schema->validate_object(c))
        ADD_FAILURE() << e;
      json dropped = c;
      dropped["spec"].erase("extendedResourceName");
      for (const auto& e : schema->validate_object(dropped))
        ADD_FAILURE() << "without extendedResourceName: " << e;
    }
    if (!c["spec"].contains("extendedResourceName")) continue;
    const std::string resource = c["spec"]["extendedResourceName"];
    EXPECT_TRUE(is_extended_resource_name(resource)) << resource;
    classes_of[resource].push_back(name);
    ASSERT_TRUE(want.count(resource)) << resource;
    const auto& [type, vendor] = want.at(resource);
    ASSERT_EQ(c["spec"]["selectors"].size(), 1u);
    const std::string cel = c["spec"]["selectors"][0]["cel"]["expression"];
    EXPECT_THAT(cel, ::testing::HasSubstr(R"(device.driver == "polyaccel.io")"));
    EXPECT_THAT(
        cel, ::testing::HasSubstr(R"(device.attributes["polyaccel.io"].type == ")" + type + "\""));
    EXPECT_THAT(cel, ::testing::HasSubstr(R"(device.attributes["polyaccel.io"].vendor == ")" +
                                          vendor + "\""));
    EXPECT_THAT(cel, ::testing::Not(::testing::HasSubstr("mig")));
    EXPECT_THAT(cel, ::testing::Not(::testing::HasSubstr("||"))) << "one kind of device only";
  }
  for (const auto& [resource, wanted] : want) {
    ASSERT_EQ(classes_of[resource].size(), 1u) << resource << ": one class a name, cluster-wide";
  }
  // Nothing else under deploy/ claims a name (another class would take the pods' requests).
  for (const auto& e : fs::recursive_directory_iterator(kDeploy)) {
    if (!e.is_regular_file() || e.path() == kKube / "components/dra/deviceclasses.yaml") continue;
    EXPECT_EQ(read_text(e.path()).find("extendedResourceName"), std::string::npos) << e.path();
  }
}

// The DRA overlay serves the node's devices through DRA only, installs the static hook at the
// host path its specs name, and the agent refuses the two allocators together, naming the flags.
TEST(Manifests, DraOverlayIsTheNodesOnlyAllocatorAndInstallsTheStaticHook) {
  auto all = render(kKube / "overlays/dra");
  ASSERT_FALSE(all.empty());
  Agent a = agent_of(one(all, "DaemonSet"));
  EXPECT_TRUE(a.flags.count("--dra"));
  EXPECT_EQ(a.flags["--kubelet-dir"], "");
  EXPECT_FALSE(a.flags.count("--node-cdi-specs")) << "a spec per claim, not the node's";
  for (const char* flag : {"--nfd-features-dir", "--cdi-dir"})
    EXPECT_TRUE(a.flags.count(flag)) << flag;
  const std::string hook = a.flags["--cdi-hook-path"];
  EXPECT_EQ(fs::path(hook).filename(), "polyaccel-cdi-hook");
  ASSERT_TRUE(a.mounts.count(fs::path(hook).parent_path().string()));
  EXPECT_EQ(a.volumes[a.mounts[fs::path(hook).parent_path().string()]]["hostPath"]["path"],
            fs::path(hook).parent_path().string());
  polyaccel::testing::TempDir d;
  auto both = run_command(polyaccel::testing::polyaccel_binary() + " agent --dra --kubelet-dir '" +
                          d.path().string() + "' --topology '" +
                          polyaccel::testing::xe8640_topology() + "' 2>&1");
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_NE(both.output.find("--dra with --kubelet-dir " + d.path().string()), std::string::npos)
      << both.output;
  EXPECT_NE(both.output.find("--kubelet-dir ''"), std::string::npos) << both.output;
}

// The device plugin's variants write the node's CDI specs with the driver from the host's root
// and the hook at a host path (a node with CDI and no NVIDIA container runtime, Guest.node-*).
TEST(Manifests, DevicePluginWritesTheNodeCdiSpecsWithTheHostsDriver) {
  for (const char* variant : {"device-plugin", "rdma", "time-slicing", "mig-manager"}) {
    SCOPED_TRACE(variant);
    auto all = render(kKube / "overlays" / variant);
    ASSERT_FALSE(all.empty());
    Agent a = agent_of(one(all, "DaemonSet"));
    EXPECT_TRUE(a.flags.count("--node-cdi-specs"));
    EXPECT_NE(a.flags["--kubelet-dir"], "");
    for (const auto& [flag, host_path] : std::vector<std::pair<std::string, std::string>>{
             {"--cdi-dir", ""}, {"--driver-root", "/"}}) {
      const std::string dir = a.flags[flag];
      ASSERT_TRUE(a.mounts.count(dir)) << flag << " " << dir;
      EXPECT_EQ(a.volumes[a.mounts[dir]]["hostPath"]["path"], host_path.empty() ? dir : host_path)
          << flag;
    }
    const std::string hook = a.flags["--cdi-hook-path"];
    const std::string hook_dir = fs::path(hook).parent_path().string();
    ASSERT_TRUE(a.mounts.count(hook_dir)) << hook;
    EXPECT_EQ(a.volumes[a.mounts[hook_dir]]["hostPath"]["path"], hook_dir);
  }
}

// Whether a node with these labels satisfies a required nodeAffinity, as kube-scheduler reads
// it: the nodeSelectorTerms are ORed, the matchExpressions of a term ANDed, and a term without
// expressions matches no node. Only the operators the manifests may use are known; any other
// fails the test rather than guessing.
bool node_selected(const json& affinity, const std::map<std::string, std::string>& labels) {
  const json& required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  for (const auto& term : required["nodeSelectorTerms"]) {
    EXPECT_FALSE(term.contains("matchFields")) << "this matcher reads labels only";
    const json expressions = term.value("matchExpressions", json::array());
    bool all = !expressions.empty();
    for (const auto& e : expressions) {
      const std::string key = e["key"], op = e["operator"];
      auto it = labels.find(key);
      const json values = e.value("values", json::array());
      auto in_values = [&] {
        return it != labels.end() &&
               std::find(values.begin(), values.end(), it->second) != values.end();
      };
      bool ok = false;
      if (op == "In")
        ok = in_values();
      else if (op == "NotIn")
        ok = !in_values();
      else if (op == "Exists")
        ok = it != labels.end();
      else if (op == "DoesNotExist")
        ok = it == labels.end();
      else
        ADD_FAILURE() << "operator " << op << " of " << key << " is not evaluated here";
      all = all && ok;
    }
    if (all) return true;
  }
  return false;
}

// NFD labels a node's PCI devices by its deviceLabelFields: [class, vendor] by default
// (pci-0302_10de.present), [vendor] in the GPU Operator's NFD (pci-10de.present). Every variant's
// agent runs on an NVIDIA, AMD or Gaudi node labelled either way, and on no node whose only
// devices are others' (a Mellanox NIC, 15b3; a BMC's ASPEED display, 1a03). No overlay may narrow
// the base's affinity to one form.
TEST(Manifests, EveryVariantRunsOnAcceleratorNodesOfEitherNfdLabelForm) {
  const std::string f = "feature.node.kubernetes.io/";
  using Labels = std::map<std::string, std::string>;
  const Labels common = {{"kubernetes.io/os", "linux"}, {"kubernetes.io/arch", "amd64"}};
  const std::vector<std::pair<std::string, Labels>> selected = {
      {"NVIDIA H100, class_vendor", {{f + "pci-0302_10de.present", "true"}}},
      {"NVIDIA L40S, class_vendor", {{f + "pci-0300_10de.present", "true"}}},
      {"AMD MI250, class_vendor", {{f + "pci-0380_1002.present", "true"}}},
      {"AMD MI300X, class_vendor", {{f + "pci-1200_1002.present", "true"}}},
      {"Gaudi 2, class_vendor", {{f + "pci-1200_1da3.present", "true"}}},
      {"NVIDIA with ConnectX, class_vendor",
       {{f + "pci-0302_10de.present", "true"}, {f + "pci-0200_15b3.present", "true"}}},
      {"NVIDIA, GPU Operator's vendor", {{f + "pci-10de.present", "true"}}},
      {"AMD, vendor", {{f + "pci-1002.present", "true"}}},
      {"Gaudi, vendor", {{f + "pci-1da3.present", "true"}}},
      {"NVIDIA with ConnectX, vendor",
       {{f + "pci-10de.present", "true"}, {f + "pci-15b3.present", "true"}}},
  };
  const std::vector<std::pair<std::string, Labels>> not_selected = {
      {"no NFD labels", {}},
      {"Mellanox NIC, class_vendor", {{f + "pci-0200_15b3.present", "true"}}},
      {"Mellanox NIC, vendor", {{f + "pci-15b3.present", "true"}}},
      {"BMC display, class_vendor", {{f + "pci-0300_1a03.present", "true"}}},
      {"BMC display, vendor", {{f + "pci-1a03.present", "true"}}},
      {"NVIDIA label not true", {{f + "pci-10de.present", "false"}}},
  };
  for (const auto& variant : variants()) {
    SCOPED_TRACE(variant);
    auto all = render(kKube / "overlays" / variant);
    ASSERT_FALSE(all.empty());
    const json affinity = one(all, "DaemonSet")["spec"]["template"]["spec"]["affinity"];
    for (auto [name, labels] : selected) {
      labels.insert(common.begin(), common.end());
      EXPECT_TRUE(node_selected(affinity, labels)) << name;
    }
    for (auto [name, labels] : not_selected) {
      labels.insert(common.begin(), common.end());
      EXPECT_FALSE(node_selected(affinity, labels)) << name;
    }
  }
}

// The scrape job the Prometheus Operator gives a ServiceMonitor's targets: the value of the
// Service's label that spec.jobLabel names, else the Service's name.
std::string operator_job(const json& service_monitor, const json& service) {
  std::string label = service_monitor["spec"].value("jobLabel", "");
  const json labels = service["metadata"].value("labels", json::object());
  if (!label.empty() && labels.contains(label)) return labels[label].get<std::string>();
  return service["metadata"]["name"].get<std::string>();
}

// Every job selector of a PromQL expression: {op, value}.
std::vector<std::pair<std::string, std::string>> job_selectors(const std::string& expr) {
  static const std::regex re(R"re(\bjob\s*(=~|!~|!=|=)\s*"([^"]*)")re");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), re); it != std::sregex_iterator();
       ++it)
    out.emplace_back((*it)[1], (*it)[2]);
  return out;
}

// The PromQL of alert rule groups, and of a dashboard's panels.
void rule_exprs(const json& groups, std::vector<std::string>& out) {
  for (const auto& g : groups)
    for (const auto& r : g["rules"])
      out.push_back(r["expr"].get<std::string>());
}
void dashboard_exprs(const json& d, std::vector<std::string>& out) {
  for (const auto& p : d.value("panels", json::array()))
    for (const auto& t : p.value("targets", json::array()))
      out.push_back(t.value("expr", ""));
  for (const auto& v : d["templating"]["list"])
    if (v["query"].is_string()) out.push_back(v["query"].get<std::string>());
}

TEST(Manifests, MonitoringSelectsTheJobTheOperatorGives) {
  // The job, from a rendered variant with monitoring beside it (both render the Service once).
  TempDir tmp;
  polyaccel::testing::write_text(
      tmp.path() / "kustomization.yaml",
      "resources:\n  - " + fs::relative(kKube / "overlays/device-plugin", tmp.path()).string() +
          "\n  - " + fs::relative(kMonitoring, tmp.path()).string() + "\n");
  auto all = render(tmp.path());
  ASSERT_FALSE(all.empty());
  auto sm = one(all, "ServiceMonitor");
  auto svc = one(all, "Service");
  std::string job = operator_job(sm, svc);
  // The ServiceMonitor finds the Service and its port.
  for (const auto& [k, v] : sm["spec"]["selector"]["matchLabels"].items())
    EXPECT_EQ(svc["metadata"]["labels"][k], v) << k;
  EXPECT_EQ(sm["spec"]["endpoints"][0]["port"], svc["spec"]["ports"][0]["name"]);
  EXPECT_EQ(sm["spec"]["namespaceSelector"]["matchNames"][0], svc["metadata"]["namespace"]);

  std::map<std::string, std::vector<std::string>> exprs;  // where -> PromQL
  rule_exprs(one(all, "PrometheusRule")["spec"]["groups"], exprs["PrometheusRule"]);
  rule_exprs(yaml_documents(read_text(kDeploy / "prometheus/polyaccel-alerts.yml"))[0]["groups"],
             exprs["polyaccel-alerts.yml"]);
  for (const auto& name : kDashboards)
    dashboard_exprs(json::parse(read_text(kDeploy / "grafana" / name)), exprs[name]);
  for (const auto& cm : of_kind(all, "ConfigMap"))
    for (const auto& [key, text] : cm["data"].items())
      if (key.ends_with(".json"))
        dashboard_exprs(json::parse(text.get<std::string>()), exprs["ConfigMap " + key]);
  // The promtool unit test's input series are what that job scrapes.
  auto unit = yaml_documents(read_text(kDeploy / "prometheus/tests/polyaccel-alerts.test.yml"))[0];
  for (const auto& t : unit["tests"])
    for (const auto& s : t["input_series"])
      exprs["polyaccel-alerts.test.yml"].push_back(s["series"].get<std::string>());

  size_t selectors = 0;
  for (const auto& [where, list] : exprs) {
    EXPECT_FALSE(list.empty()) << where;
    for (const auto& e : list) {
      for (const auto& [op, value] : job_selectors(e)) {
        ++selectors;
        EXPECT_EQ(op, "=") << where << ": " << e;
        EXPECT_EQ(value, job) << where << ": " << e;
      }
    }
  }
  // up{job=...} in the rules, their copy, their test, the fleet dashboard and its copy.
  EXPECT_GE(selectors, 5u);
}

TEST(Manifests, MonitoringHoldsTheAlertRulesAndDashboards) {
  auto all = render(kMonitoring);
  ASSERT_FALSE(all.empty());
  EXPECT_TRUE(of_kind(all, "DaemonSet").empty()) << "monitoring is added beside a variant";
  // The PrometheusRule holds exactly the groups of deploy/prometheus/polyaccel-alerts.yml.
  auto alerts = yaml_documents(read_text(kDeploy / "prometheus/polyaccel-alerts.yml"));
  ASSERT_EQ(alerts.size(), 1u);
  auto rule = one(all, "PrometheusRule");
  const json& groups = rule["spec"]["groups"];
  const json& want = alerts[0]["groups"];
  EXPECT_EQ(rule["spec"].size(), 1u);
  ASSERT_EQ(groups.size(), want.size()) << "run deploy/kubernetes/overlays/monitoring/sync.py";
  for (size_t g = 0; g < want.size(); ++g) {
    EXPECT_EQ(groups[g]["name"], want[g]["name"]);
    ASSERT_EQ(groups[g]["rules"].size(), want[g]["rules"].size()) << want[g]["name"];
    for (size_t r = 0; r < want[g]["rules"].size(); ++r)
      EXPECT_EQ(groups[g]["rules"][r], want[g]["rules"][r])
          << "run deploy/kubernetes/overlays/monitoring/sync.py";
  }
  EXPECT_TRUE(rule["spec"] == alerts[0]);
  // One ConfigMap per dashboard, for Grafana's sidecar, equal to deploy/grafana's.
  std::set<std::string> seen;
  for (const auto& cm : of_kind(all, "ConfigMap")) {
    EXPECT_EQ(cm["metadata"]["labels"]["grafana_dashboard"], "1") << cm["metadata"]["name"];
    ASSERT_EQ(cm["data"].size(), 1u);
    auto [key, text] = *cm["data"].items().begin();
    seen.insert(key);
    EXPECT_TRUE(json::parse(text.get<std::string>()) ==
                json::parse(read_text(kDeploy / "grafana" / key)))
        << key
        << " differs from deploy/grafana's: run deploy/kubernetes/overlays/monitoring/sync.py";
  }
  EXPECT_EQ(seen, std::set<std::string>(kDashboards.begin(), kDashboards.end()));
}

// kube-prometheus-stack's Prometheus selects ServiceMonitors and PrometheusRules by the label
// `release: <its Helm release>`. The label is one line of the operator's own kustomization
// (docs/install.md shows it verbatim), a patch of the monitoring.coreos.com objects only, so no
// other object changes: a `release` label on the DaemonSet's selector or pod template would make
// the next apply fail (a DaemonSet's selector is immutable) or roll every agent.
const std::string kReleaseLabelLine =
    R"(patches: [{target: {group: monitoring.coreos.com}, patch: '[{"op": "add", "path": )"
    R"("/metadata/labels/release", "value": "kube-prometheus-stack"}]'}])";
// Objects by kind, namespace and name.
std::map<std::string, json> by_id(const std::vector<json>& all) {
  std::map<std::string, json> out;
  for (const auto& o : all)
    out[o.value("kind", "") + " " + o["metadata"].value("namespace", "") + "/" +
        o["metadata"].value("name", "")] = o;
  return out;
}

// `with` (the render with the release label) is `without` but for the label on the
// ServiceMonitor and the PrometheusRule.
void expect_release_label_only_on_monitoring(const std::vector<json>& with,
                                             const std::vector<json>& without) {
  ASSERT_FALSE(with.empty());
  ASSERT_FALSE(without.empty());
  auto after = by_id(with), before = by_id(without);
  ASSERT_EQ(after.size(), before.size());
  size_t labelled = 0;
  for (const auto& [id, obj] : after) {
    SCOPED_TRACE(id);
    ASSERT_TRUE(before.count(id));
    json want = before.at(id);
    const std::string kind = obj["kind"];
    if (kind == "ServiceMonitor" || kind == "PrometheusRule") {
      EXPECT_EQ(obj["metadata"]["labels"]["release"], "kube-prometheus-stack");
      want["metadata"]["labels"]["release"] = "kube-prometheus-stack";
      ++labelled;
    }
    // Not EXPECT_EQ: a difference would print both objects whole (dashboards included).
    EXPECT_TRUE(obj == want) << "only the ServiceMonitor and the PrometheusRule change";
    if (kind == "DaemonSet") {
      EXPECT_FALSE(obj["spec"]["selector"]["matchLabels"].contains("release"));
      EXPECT_FALSE(obj["spec"]["template"]["metadata"]["labels"].contains("release"));
      EXPECT_EQ(obj["spec"]["selector"], before.at(id)["spec"]["selector"]);
    }
  }
  EXPECT_EQ(labelled, 2u);
}

TEST(Manifests, ReleaseLabelIsOneLineForTheServiceMonitorAndPrometheusRule) {
  EXPECT_NE(read_text(fs::path(POLYACCEL_SOURCE_DIR) / "docs/install.md").find(kReleaseLabelLine),
            std::string::npos)
      << "docs/install.md shows the line the test applies";
  // monitoring-tls alone; monitoring beside a variant, as docs/install.md composes them.
  const std::vector<std::vector<fs::path>> installs = {
      {kMonitoringTls},
      {kKube / "overlays/device-plugin", kMonitoring},
      {kKube / "overlays/dra", kMonitoring}};
  for (const auto& install : installs) {
    SCOPED_TRACE(install.back().string());
    TempDir plain, one_line;
    auto list = [&](const TempDir& from) {
      std::string out;
      for (const auto& dir : install)
        out += "  - " + fs::relative(dir, from.path()).string() + "\n";
      return out;
    };
    write_text(plain.path() / "kustomization.yaml", "resources:\n" + list(plain));
    write_text(one_line.path() / "kustomization.yaml",
               "resources:\n" + list(one_line) + kReleaseLabelLine + "\n");
    expect_release_label_only_on_monitoring(render(one_line.path()), render(plain.path()));
  }
}

TEST(Manifests, MonitoringComposesWithEveryVariant) {
  for (const auto& variant : variants()) {
    SCOPED_TRACE(variant);
    if (variant == "monitoring-tls") continue;  // holds monitoring already
    TempDir tmp;
    polyaccel::testing::write_text(
        tmp.path() / "kustomization.yaml",
        "resources:\n  - " + fs::relative(kKube / "overlays" / variant, tmp.path()).string() +
            "\n  - " + fs::relative(kMonitoring, tmp.path()).string() + "\n");
    auto all = render(tmp.path());
    ASSERT_FALSE(all.empty());
    EXPECT_EQ(of_kind(all, "DaemonSet").size(), 1u);
    EXPECT_EQ(of_kind(all, "ServiceMonitor").size(), 1u);
    EXPECT_EQ(of_kind(all, "PrometheusRule").size(), 1u);
  }
}

// A kustomization of the base and these components (in this order), written to `dir`, as an
// operator writes one (docs/kubernetes.md, "Combining components").
void write_combination(const TempDir& dir, const std::vector<std::string>& parts) {
  std::string k =
      "resources:\n  - " + fs::relative(kKube / "base", dir.path()).string() + "\ncomponents:\n";
  for (const auto& c : parts)
    k += "  - " + fs::relative(kKube / "components" / c, dir.path()).string() + "\n";
  write_text(dir.path() / "kustomization.yaml", k);
}

// The names in a list of the agent's container (args, env, volumeMounts) or pod (volumes).
std::multiset<std::string> names_of(const json& list) {
  std::multiset<std::string> out;
  for (const auto& e : list)
    out.insert(e.is_string() ? e.get<std::string>() : e.value("name", ""));
  return out;
}

// What `with` adds to or takes from `without`, an entry of either a list of the DaemonSet: "+arg"
// and "-arg", "+volume name", ...
std::set<std::string> daemonset_change(const json& with, const json& without) {
  std::set<std::string> out;
  auto lists = [](const json& ds) {
    const json& pod = ds["spec"]["template"]["spec"];
    const json& c = pod["containers"][0];
    return std::map<std::string, std::multiset<std::string>>{
        {"arg ", names_of(c.value("args", json::array()))},
        {"env ", names_of(c.value("env", json::array()))},
        {"mount ", names_of(c.value("volumeMounts", json::array()))},
        {"volume ", names_of(pod.value("volumes", json::array()))}};
  };
  auto a = lists(with), b = lists(without);
  for (const auto& [what, names] : a) {
    for (const auto& n : names)
      if (!b[what].count(n)) out.insert("+" + what + n);
    for (const auto& n : b[what])
      if (!names.count(n)) out.insert("-" + what + n);
  }
  for (const char* field : {"runtimeClassName", "automountServiceAccountToken"})
    if (with["spec"]["template"]["spec"].value(field, json()) !=
        without["spec"]["template"]["spec"].value(field, json()))
      out.insert(std::string("+") + field);
  const json& a_sc = with["spec"]["template"]["spec"]["containers"][0]["securityContext"];
  const json& b_sc = without["spec"]["template"]["spec"]["containers"][0]["securityContext"];
  if (a_sc.value("privileged", true) != b_sc.value("privileged", true)) out.insert("+unprivileged");
  return out;
}

// Components that need another listed before them.
const std::map<std::string, std::string> kNeeds = {{"mig-manager-evict", "mig-manager"}};

// Pairs that must not render together, in either order, and what the failed render says.
struct Conflict {
  std::string a, b, says;
};
const std::vector<Conflict> kConflicts = {
    // One allocator per device: rdma and time-slicing are the device plugin's.
    {"dra", "rdma", "testing value /spec/template/spec/containers/0/args/"},
    {"dra", "time-slicing", "testing value /spec/template/spec/containers/0/args/"},
    // One partition manager per agent (both keep its nodes: patch to its own Node).
    {"mig-manager", "amd-partition-manager", "already registered id"},
    {"mig-manager-evict", "amd-partition-manager", "already registered id"},
    // monitoring-tls holds monitoring.
    {"monitoring", "monitoring-tls", "already registered id"},
    // The partition managers stay privileged (NVML's MIG changes make /dev/nvidia-caps nodes;
    // AMD's partitions are sysfs writes): least-privilege checks for the base's securityContext,
    // they check for privileged.
    {"least-privilege", "mig-manager",
     "testing value /spec/template/spec/containers/0/securityContext"},
    {"least-privilege", "mig-manager-evict",
     "testing value /spec/template/spec/containers/0/securityContext"},
    {"least-privilege", "amd-partition-manager",
     "testing value /spec/template/spec/containers/0/securityContext"}};

bool conflict(const std::string& a, const std::string& b) {
  for (const auto& c : kConflicts)
    if ((c.a == a && c.b == b) || (c.a == b && c.b == a)) return true;
  return false;
}

// The order docs/kubernetes.md gives: gpu-operator-driver first (it tests the base's flags by
// position), then the rest as listed.
std::vector<std::string> in_order(std::vector<std::string> parts) {
  std::vector<std::string> out;
  for (const auto& first : {"gpu-operator-driver", "dra"})
    if (auto it = std::find(parts.begin(), parts.end(), first); it != parts.end()) {
      out.push_back(*it);
      parts.erase(it);
    }
  for (const auto& p : parts) {
    if (kNeeds.count(p) && std::find(out.begin(), out.end(), kNeeds.at(p)) == out.end() &&
        std::find(parts.begin(), parts.end(), kNeeds.at(p)) == parts.end())
      out.push_back(kNeeds.at(p));
  }
  for (const auto& p : parts)
    if (!kNeeds.count(p)) out.push_back(p);
  for (const auto& p : parts)
    if (kNeeds.count(p)) out.push_back(p);
  return out;
}

// Every pair of components that may go together, and a few larger sets, render with each kubectl,
// with nothing on stderr, into valid objects, each once; the combination holds every object each
// part holds alone (the same object, but the DaemonSet), and its DaemonSet has every change each
// part makes alone to the base's (flags, env, mounts, volumes, runtime class). The issue: dra
// with monitoring-tls, rdma with time-slicing failed with `already registered id: Namespace`.
// Every compatible pair and a few larger sets, in two halves (SHARD 0 and 1): ctest gives each
// test 300 s, and all of them with both kubectls take 130 s on an idle 2-core machine.
void components_compose(size_t shard) {
  const auto all_components = components();
  const auto base = render(kKube / "base");
  ASSERT_FALSE(base.empty());
  const json base_ds = one(base, "DaemonSet");
  std::map<std::string, std::vector<json>> alone;
  auto render_parts = [&](const std::vector<std::string>& parts) {
    TempDir tmp;
    write_combination(tmp, parts);
    return render(tmp.path());
  };
  for (const auto& c : all_components) {
    alone[c] = render_parts(in_order({c}));
    for (const auto& obj : alone[c])
      for (const auto& e : schema().validate_object(obj))
        ADD_FAILURE() << c << ": " << e;
  }
  std::vector<std::vector<std::string>> sets;
  for (size_t i = 0; i < all_components.size(); ++i)
    for (size_t j = i + 1; j < all_components.size(); ++j) {
      const auto& a = all_components[i];
      const auto& b = all_components[j];
      if (conflict(a, b) || (kNeeds.count(a) && conflict(kNeeds.at(a), b)) ||
          (kNeeds.count(b) && conflict(kNeeds.at(b), a)))
        continue;
      sets.push_back({a, b});
    }
  EXPECT_GE(sets.size(), 30u);
  sets.push_back({"gpu-operator-driver", "dra", "runtime-class-nvidia", "monitoring-tls"});
  sets.push_back(
      {"gpu-operator-driver", "mig-manager-evict", "time-slicing", "rdma", "monitoring"});
  sets.push_back({"amd-partition-manager", "runtime-class-nvidia", "rdma", "monitoring-tls"});
  sets.push_back(
      {"gpu-operator-driver", "dra", "least-privilege", "runtime-class-nvidia", "monitoring-tls"});
  sets.push_back({"least-privilege", "time-slicing", "rdma", "gpu-operator-driver", "monitoring"});
  for (size_t k = 0; k < sets.size(); ++k) {
    if (k % 2 != shard) continue;
    const auto& set = sets[k];
    const auto parts = in_order(set);
    std::string name;
    for (const auto& p : parts)
      name += p + " ";
    SCOPED_TRACE(name);
    auto all = render_parts(parts);
    ASSERT_FALSE(all.empty());
    auto ids = by_id(all);
    EXPECT_EQ(ids.size(), all.size()) << "an object twice";
    const json ds = one(all, "DaemonSet");
    // The other objects are those of the parts alone (below), checked against the schemas there.
    for (const auto& e : schema().validate_object(ds))
      ADD_FAILURE() << e;
    // Each env variable, volume and mount once (an API server warns of a second NODE_NAME; a
    // second volume of a name is invalid).
    const json& pod = ds["spec"]["template"]["spec"];
    for (const auto& list :
         {pod["containers"][0]["env"], pod["containers"][0]["volumeMounts"], pod["volumes"]}) {
      const auto names = names_of(list);
      for (const auto& n : names)
        EXPECT_EQ(names.count(n), 1u) << n;
    }
    const auto change = daemonset_change(ds, base_ds);
    for (const auto& p : set) {
      SCOPED_TRACE(p);
      for (const auto& [id, obj] : by_id(alone[p])) {
        ASSERT_TRUE(ids.count(id)) << id;
        if (obj["kind"] != "DaemonSet") {
          EXPECT_TRUE(ids.at(id) == obj) << id << " differs from " << p << "'s alone";
        }
      }
      for (const auto& c : daemonset_change(one(alone[p], "DaemonSet"), base_ds))
        EXPECT_TRUE(change.count(c)) << c;
    }
  }
}

TEST(Manifests, ComponentsComposeFirstHalf) {
  components_compose(0);
}

TEST(Manifests, ComponentsComposeSecondHalf) {
  components_compose(1);
}

// The pairs that must not go together fail the render, in either order and with each kubectl,
// saying why (the test op that failed, or the object registered twice): never an agent that
// would serve the same GPUs twice or run two partition managers.
TEST(Manifests, ConflictingComponentsFailToRender) {
  for (const auto& c : kConflicts) {
    for (const auto& parts : std::vector<std::vector<std::string>>{{c.a, c.b}, {c.b, c.a}}) {
      SCOPED_TRACE(parts[0] + " " + parts[1]);
      std::vector<std::string> listed;
      for (const auto& p : parts) {
        if (kNeeds.count(p)) listed.push_back(kNeeds.at(p));
        listed.push_back(p);
      }
      TempDir tmp;
      write_combination(tmp, listed);
      for (const auto& kubectl : kubectls()) {
        auto r = run_command("'" + kubectl + "' kustomize '" + tmp.path().string() + "' 2>&1");
        EXPECT_NE(r.exit_code, 0) << kubectl << ": " << r.output;
        EXPECT_THAT(r.output, ::testing::HasSubstr(c.says)) << kubectl;
      }
    }
  }
  // gpu-operator-driver tests the base's flags by position: after dra (which takes one out of the
  // args), the render fails rather than patch another flag.
  TempDir tmp;
  write_combination(tmp, {"dra", "gpu-operator-driver"});
  for (const auto& kubectl : kubectls()) {
    auto r = run_command("'" + kubectl + "' kustomize '" + tmp.path().string() + "' 2>&1");
    EXPECT_NE(r.exit_code, 0) << kubectl << ": " << r.output;
    EXPECT_THAT(r.output, ::testing::HasSubstr("components/gpu-operator-driver': testing value "
                                               "/spec/template/spec/containers/0/args/6"));
  }
}

// runtime-class-nvidia: the pod runs under the RuntimeClass nvidia, as NVIDIA's device plugin chart
// has it (k3s, RKE2: the NVIDIA runtime is a handler that is not the default), nothing else
// changes. gpu-operator-driver: NVML and the CDI specs' libraries from the GPU Operator's driver
// container (/run/nvidia/driver on the host, under the base's /host mount), with DRA too.
TEST(Manifests, RuntimeClassAndGpuOperatorDriverComponents) {
  const json base_ds = one(render(kKube / "base"), "DaemonSet");
  {
    TempDir tmp;
    write_combination(tmp, {"runtime-class-nvidia"});
    const json ds = one(render(tmp.path()), "DaemonSet");
    EXPECT_EQ(ds["spec"]["template"]["spec"].value("runtimeClassName", ""), "nvidia");
    json want = base_ds;
    want["spec"]["template"]["spec"]["runtimeClassName"] = "nvidia";
    EXPECT_TRUE(ds == want) << "only the runtime class changes";
  }
  for (const auto& parts :
       std::vector<std::vector<std::string>>{{"gpu-operator-driver"},
                                             {"gpu-operator-driver", "dra"},
                                             {"gpu-operator-driver", "time-slicing"}}) {
    SCOPED_TRACE(parts.back());
    TempDir tmp;
    write_combination(tmp, parts);
    const json ds = one(render(tmp.path()), "DaemonSet");
    const auto args = names_of(ds["spec"]["template"]["spec"]["containers"][0]["args"]);
    EXPECT_TRUE(args.count("--driver-root=/host/run/nvidia/driver"));
    EXPECT_TRUE(args.count("--host-driver-root=/run/nvidia/driver"));
    EXPECT_FALSE(args.count("--driver-root=/host"));
    EXPECT_FALSE(args.count("--host-driver-root=/"));
    // The host's root is what the base mounts at /host, so /host/run/nvidia/driver is the host's.
    bool host_root = false;
    for (const auto& v : ds["spec"]["template"]["spec"]["volumes"])
      if (v["name"] == "host-root") host_root = v["hostPath"]["path"] == "/";
    EXPECT_TRUE(host_root);
  }
}

// least-privilege (issue 42 item 5): on nodes whose runtime injects the GPUs, the agent runs with
// NVIDIA's device plugin's securityContext and more (drop ALL, no escalation, read-only root,
// seccomp RuntimeDefault, uid 0 said), without the host's /dev, and nothing else of the base
// changes; with dra (whole GPUs) the same. Every overlay as shipped stays privileged (AMD, Gaudi
// and CDI-only nodes need it), the partition managers too, and the namespace admits privileged
// pods: hostPath volumes are forbidden by the Pod Security Standards' baseline level already.
TEST(Manifests, LeastPrivilegeComponentTakesEveryPrivilegeAwayAndTheDevMount) {
  const json base_ds = one(render(kKube / "base"), "DaemonSet");
  const json least = {{"privileged", false},
                      {"allowPrivilegeEscalation", false},
                      {"capabilities", {{"drop", {"ALL"}}}},
                      {"readOnlyRootFilesystem", true},
                      {"runAsUser", 0},
                      {"runAsNonRoot", false},
                      {"seccompProfile", {{"type", "RuntimeDefault"}}}};
  for (const auto& parts : std::vector<std::vector<std::string>>{
           {"least-privilege"}, {"dra", "least-privilege"}, {"least-privilege", "dra"}}) {
    SCOPED_TRACE(parts.front() + " " + parts.back());
    TempDir tmp;
    write_combination(tmp, parts);
    const json ds = one(render(tmp.path()), "DaemonSet");
    const json& pod = ds["spec"]["template"]["spec"];
    EXPECT_EQ(pod["containers"][0]["securityContext"], least);
    for (const auto& m : pod["containers"][0]["volumeMounts"])
      EXPECT_FALSE(m["mountPath"] == "/dev" || m["name"] == "dev") << m;
    for (const auto& v : pod["volumes"])
      EXPECT_FALSE(v["name"] == "dev" ||
                   v.value("hostPath", json::object()).value("path", "") == "/dev")
          << v;
    for (const char* key : {"hostPID", "hostIPC", "hostNetwork"})
      EXPECT_FALSE(pod.value(key, false)) << key;
    if (parts.size() == 1) {
      json want = base_ds;
      json& c = want["spec"]["template"]["spec"]["containers"][0];
      c["securityContext"] = least;
      auto drop_dev = [](json& list) {
        json kept = json::array();
        for (const auto& e : list)
          if (e["name"] != "dev") kept.push_back(e);
        list = kept;
      };
      drop_dev(c["volumeMounts"]);
      drop_dev(want["spec"]["template"]["spec"]["volumes"]);
      EXPECT_TRUE(ds == want) << "only the securityContext and the /dev mount change";
    }
  }
  for (const auto& o : overlays()) {
    auto all = render(kKube / "overlays" / o);
    for (const auto& ds : of_kind(all, "DaemonSet"))
      EXPECT_TRUE(ds["spec"]["template"]["spec"]["containers"][0]["securityContext"].value(
          "privileged", false))
          << o << ": as shipped, every overlay runs on every node kind";
  }
  const json ns = one(render(kKube / "base"), "Namespace");
  EXPECT_EQ(ns["metadata"]["labels"].value("pod-security.kubernetes.io/enforce", ""), "privileged");
}

// monitoring-tls: the agent reads a web config (exporter-toolkit's format, checked by the
// agent's own parser) from a Secret volume; its certificate and key are files of the TLS Secret's
// volume; kubelet's probe speaks HTTPS to a path the config lets in without a password; and the
// ServiceMonitor scrapes https with that Secret's CA and basic auth from a Secret.
TEST(Manifests, MonitoringTlsTurnsOnTlsAndBasicAuthOnBothSides) {
  auto all = render(kMonitoringTls);
  ASSERT_FALSE(all.empty());
  Agent a = agent_of(one(all, "DaemonSet"));
  ASSERT_TRUE(a.flags.count("--web-config-file"));
  fs::path web = a.flags.at("--web-config-file");
  // The Secret volume that holds the file: the key is the file's name.
  auto secret_of = [&](const fs::path& file) -> json {
    auto m = a.mounts.find(file.parent_path().string());
    if (m == a.mounts.end()) {
      ADD_FAILURE() << file << " is not in a mounted folder";
      return json::object();
    }
    const json& volume = a.volumes[m->second];
    EXPECT_TRUE(volume.contains("secret")) << file << ": not a Secret volume";
    return one(all, "Secret", volume["secret"].value("secretName", ""));
  };
  json config_secret = secret_of(web);
  ASSERT_TRUE(config_secret["stringData"].contains(web.filename().string()));
  std::string text = config_secret["stringData"][web.filename().string()];
  auto config = polyaccel::exporter::parse_web_config(text, web.string());
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_TRUE(config->tls);
  EXPECT_FALSE(config->basic_auth_users.empty());
  // The certificate and key: files of the TLS Secret's volume, which this render does not hold
  // (cert-manager or the operator makes it); the ServiceMonitor trusts that Secret's CA.
  for (const std::string& file : {config->tls_server.cert_file, config->tls_server.key_file}) {
    auto m = a.mounts.find(fs::path(file).parent_path().string());
    ASSERT_NE(m, a.mounts.end()) << file << " is not mounted";
    EXPECT_EQ(a.volumes[m->second]["secret"]["secretName"], "polyaccel-agent-tls") << file;
  }
  EXPECT_EQ(fs::path(config->tls_server.cert_file).filename(), "tls.crt");
  EXPECT_EQ(fs::path(config->tls_server.key_file).filename(), "tls.key");
  // kubelet's probe: HTTPS, to a path without basic auth.
  const json& probe = a.container["livenessProbe"]["httpGet"];
  EXPECT_EQ(probe["scheme"], "HTTPS");
  EXPECT_THAT(config->auth_excluded_paths, ::testing::Contains(probe["path"].get<std::string>()));
  // Prometheus' side.
  json endpoint = one(all, "ServiceMonitor")["spec"]["endpoints"][0];
  EXPECT_EQ(endpoint["scheme"], "https");
  EXPECT_EQ(endpoint["tlsConfig"]["ca"]["secret"]["name"], "polyaccel-agent-tls");
  EXPECT_EQ(endpoint["tlsConfig"]["ca"]["secret"]["key"], "ca.crt");
  EXPECT_EQ(endpoint["tlsConfig"]["serverName"],
            one(all, "Service")["metadata"]["name"].get<std::string>() + ".polyaccel-system.svc");
  EXPECT_EQ(endpoint["basicAuth"]["username"]["name"], endpoint["basicAuth"]["password"]["name"]);
  EXPECT_EQ(endpoint["basicAuth"]["password"]["key"], "password");
  // Nothing of monitoring is lost or doubled.
  EXPECT_EQ(of_kind(all, "PrometheusRule").size(), 1u);
  EXPECT_EQ(of_kind(all, "ServiceMonitor").size(), 1u);
}

// Every unit of deploy/systemd keeps systemd's exposure score (`systemd-analyze security`: 0 is
// safest, 9.0 up "UNSAFE") below 6.0: a root unit with no hardening scores 9.6. Offline on the
// unit files (systemd 252, Debian 12); a missing systemd-analyze fails the test.
TEST(SystemdUnits, EveryUnitIsHardened) {
  std::vector<fs::path> units;
  for (const auto& e : fs::directory_iterator(kDeploy / "systemd"))
    units.push_back(e.path());
  ASSERT_GE(units.size(), 2u);
  for (const auto& file : units) {
    const std::string unit = file.filename().string();
    auto r = run_command("systemd-analyze security --offline=yes --no-pager '" + file.string() +
                         "' 2>&1");
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(r.output, m, std::regex("Overall exposure level for [^:]+: ([0-9.]+)")))
        << unit << ": " << r.output;
    EXPECT_LT(std::stod(m[1].str()), 6.0) << unit << ": " << r.output;
  }
}

}  // namespace
}  // namespace polyaccel
