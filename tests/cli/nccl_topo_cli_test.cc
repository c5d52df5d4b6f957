// `polyaccel nccl-topo` as a user runs it: stdout, --output-file FILE (well-formed for xmllint),
// --json.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

using polyaccel::testing::kXe8640;

TEST(NcclTopoCli, WritesTheFileAtomicallyAndSaysHowToUseIt) {
  TempDir tmp;
  const auto file = tmp.path() / "topo.xml";
  const std::string topo = " --topology " + topology_fixture(kXe8640).string();
  auto r =
      run_command(polyaccel_binary() + " nccl-topo" + topo + " --output-file " + file.string());
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("NCCL_TOPO_FILE=" + file.string()), std::string::npos);
  EXPECT_EQ(run_command("xmllint --noout " + file.string() + " 2>&1").exit_code, 0);
  std::stringstream content;
  content << std::ifstream(file).rdbuf();
  auto stdout_run = run_command(polyaccel_binary() + " nccl-topo" + topo);
  EXPECT_EQ(stdout_run.output, content.str());
  auto j = nlohmann::json::parse(
      run_command(polyaccel_binary() + " nccl-topo --json --gdr on" + topo).output);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_NE(j["xml"].get<std::string>().find("gdr=\"1\""), std::string::npos);
  r = run_command(polyaccel_binary() + " nccl-topo --gdr maybe" + topo + " 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  r = run_command(polyaccel_binary() + " nccl-topo" + topo +
                  " --output-file /nonexistent/dir/t.xml 2>&1");
  EXPECT_EQ(r.exit_code, 2);
}

TEST(NcclTopoCli, GuestFileFromACommittedPlacementAndItsDomainXml) {
  TempDir tmp;
  const std::string topo = " --topology " + topology_fixture(kXe8640).string();
  const std::string state = " --state " + (tmp.path() / "s.json").string();
  const auto domain = tmp.path() / "vm1.xml";
  auto r = run_command(polyaccel_binary() + " place" + topo + state +
                       " --vcpus 16 --memory 8GiB --spec hw:cpu_policy=dedicated"
                       " --pci-alias gpu=10de:2330:required --spec pci_passthrough:alias=gpu:1"
                       " --commit --name vm1 --libvirt > " +
                       domain.string());
  ASSERT_EQ(r.exit_code, 0);
  r = run_command(polyaccel_binary() + " nccl-topo" + topo + state + " --placement vm1 --libvirt " +
                  domain.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("<cpu numaid=\"0\" affinity=\"0000ffff\""), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("<gpu dev=\"0\""), std::string::npos);
  const auto file = tmp.path() / "guest-topo.xml";
  { std::ofstream(file) << r.output; }
  EXPECT_EQ(run_command("xmllint --noout " + file.string() + " 2>&1").exit_code, 0);
  r = run_command(polyaccel_binary() + " nccl-topo" + topo + state + " --placement vm2 --libvirt " +
                  domain.string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("vm2"), std::string::npos);
  r = run_command(polyaccel_binary() + " nccl-topo" + topo + " --libvirt " + domain.string() +
                  " 2>&1");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace polyaccel
