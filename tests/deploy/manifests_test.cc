// deploy/kubernetes/ holds together: every file is listed by the kustomization and parses, the
// DaemonSet's ServiceAccount, ConfigMap, ports and mounts name objects that exist, the sharing
// config it mounts is one the agent accepts, and the flags it passes are paths it mounts.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "share/time_slicing.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

namespace fs = std::filesystem;
const fs::path kDir = fs::path(POLYACCEL_SOURCE_DIR) / "deploy/kubernetes";

// Every document of every manifest, by kind.
std::multimap<std::string, YAML::Node> load_all() {
  std::multimap<std::string, YAML::Node> out;
  for (const auto& e : fs::directory_iterator(kDir)) {
    if (e.path().extension() != ".yaml" || e.path().filename() == "kustomization.yaml") continue;
    for (const auto& doc : YAML::LoadAllFromFile(e.path().string())) {
      EXPECT_TRUE(doc["kind"]) << e.path();
      out.emplace(doc["kind"].as<std::string>(), doc);
    }
  }
  return out;
}

YAML::Node one(const std::multimap<std::string, YAML::Node>& all, const std::string& kind) {
  EXPECT_EQ(all.count(kind), 1u) << kind;
  auto it = all.find(kind);
  return it == all.end() ? YAML::Node() : it->second;
}

TEST(Manifests, KustomizationListsEveryFile) {
  auto k = YAML::LoadFile((kDir / "kustomization.yaml").string());
  std::set<std::string> listed;
  for (const auto& r : k["resources"])
    listed.insert(r.as<std::string>());
  std::set<std::string> present;
  for (const auto& e : fs::directory_iterator(kDir)) {
    if (e.path().extension() == ".yaml" && e.path().filename() != "kustomization.yaml")
      present.insert(e.path().filename().string());
  }
  EXPECT_EQ(listed, present);
}

TEST(Manifests, DaemonSetNamesWhatExists) {
  auto all = load_all();
  auto ds = one(all, "DaemonSet");
  auto sa = one(all, "ServiceAccount");
  auto cm = one(all, "ConfigMap");
  auto svc = one(all, "Service");
  auto sm = one(all, "ServiceMonitor");
  auto ns = one(all, "Namespace")["metadata"]["name"].as<std::string>();
  for (const auto& [kind, doc] : all) {
    if (kind != "Namespace") {
      EXPECT_EQ(doc["metadata"]["namespace"].as<std::string>(), ns) << kind;
    }
  }
  auto pod = ds["spec"]["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"].as<std::string>(), sa["metadata"]["name"].as<std::string>());
  // The selector, the pod's labels and the Service's selector agree.
  auto labels = ds["spec"]["template"]["metadata"]["labels"];
  for (const auto& kv : ds["spec"]["selector"]["matchLabels"])
    EXPECT_EQ(labels[kv.first.as<std::string>()].as<std::string>(), kv.second.as<std::string>());
  for (const auto& kv : svc["spec"]["selector"])
    EXPECT_EQ(labels[kv.first.as<std::string>()].as<std::string>(), kv.second.as<std::string>());
  for (const auto& kv : sm["spec"]["selector"]["matchLabels"])
    EXPECT_EQ(svc["metadata"]["labels"][kv.first.as<std::string>()].as<std::string>(),
              kv.second.as<std::string>());

  ASSERT_EQ(pod["containers"].size(), 1u);
  auto c = pod["containers"][0];
  std::map<std::string, std::string> args;
  for (const auto& a : c["args"]) {
    std::string s = a.as<std::string>();
    auto eq = s.find('=');
    if (eq != std::string::npos) args[s.substr(0, eq)] = s.substr(eq + 1);
  }
  std::map<std::string, YAML::Node> volumes;
  for (const auto& v : pod["volumes"])
    volumes[v["name"].as<std::string>()] = YAML::Node(v);
  std::map<std::string, std::string> mounts;  // mount path -> volume
  for (const auto& m : c["volumeMounts"]) {
    ASSERT_TRUE(volumes.count(m["name"].as<std::string>())) << m["name"];
    mounts[m["mountPath"].as<std::string>()] = m["name"].as<std::string>();
  }
  // The directories passed as flags are mounted from the host.
  for (const char* flag : {"--kubelet-dir", "--nfd-features-dir"}) {
    ASSERT_TRUE(args.count(flag)) << flag;
    ASSERT_TRUE(mounts.count(args[flag])) << args[flag];
    auto v = volumes[mounts[args[flag]]];
    EXPECT_EQ(v["hostPath"]["path"].as<std::string>(), args[flag]);
  }
  // The sharing config is the ConfigMap's key, mounted where the flag points.
  ASSERT_TRUE(args.count("--sharing-config"));
  fs::path sharing = args["--sharing-config"];
  ASSERT_TRUE(mounts.count(sharing.parent_path().string()));
  auto v = volumes[mounts[sharing.parent_path().string()]];
  EXPECT_EQ(v["configMap"]["name"].as<std::string>(), cm["metadata"]["name"].as<std::string>());
  auto text = cm["data"][sharing.filename().string()];
  ASSERT_TRUE(text) << sharing.filename();
  auto cfg = parse_sharing_config(text.as<std::string>(), "configmap-sharing.yaml");
  ASSERT_TRUE(cfg) << cfg.error().message();
  EXPECT_EQ(cfg->strategy, SharingStrategy::time_slicing);
  // The metrics port: container, Service and ServiceMonitor.
  std::string port_name = c["ports"][0]["name"].as<std::string>();
  EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"].as<std::string>(), port_name);
  EXPECT_EQ(sm["spec"]["endpoints"][0]["port"].as<std::string>(),
            svc["spec"]["ports"][0]["name"].as<std::string>());
  // Every flag is one `polyaccel agent` takes.
  auto help = polyaccel::testing::run_command(polyaccel::testing::polyaccel_binary() +
                                              " agent --help 2>&1");
  for (const auto& [flag, value] : args) {
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag << " is not an agent option";
  }
  // The container listens where the agent does by default.
  EXPECT_NE(help.output.find(":" + c["ports"][0]["containerPort"].as<std::string>()),
            std::string::npos);
  // The RBAC grant is on that ConfigMap only.
  auto role = one(all, "Role");
  EXPECT_EQ(role["rules"][0]["resourceNames"][0].as<std::string>(),
            cm["metadata"]["name"].as<std::string>());
}

}  // namespace
}  // namespace polyaccel
