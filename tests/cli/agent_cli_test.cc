// `polyaccel agent` as a user starts it: bad options give one line naming the option and exit 2;
// --once prints one scrape of a captured host; SIGTERM stops a serving agent with exit 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <thread>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::read_text;
using polyaccel::testing::run_command;
using ::testing::HasSubstr;

using polyaccel::testing::kXe8640;

// The command line; its stderr goes with its stdout (to `output` when given).
std::string agent(const std::string& args, const std::string& output = "") {
  return polyaccel_binary() + " agent --topology " +
         polyaccel::testing::topology_fixture(kXe8640).string() + " --pod-resources-socket '' " +
         args + (output.empty() ? "" : " > '" + output + "'") + " 2>&1";
}

TEST(AgentCli, BadOptionsAreOneLineAndExitTwo) {
  for (const auto& [args, word] : std::vector<std::pair<std::string, std::string>>{
           {"--interval 0", "--interval 0"},
           {"--interval ten", "--interval ten"},
           {"--compat dcgm,nvidia", "'nvidia'"},
           {"--listen 256.1.1.1:99999", "--listen 256.1.1.1:99999"},
           {"--health-config /nonexistent/h.yaml", "/nonexistent/h.yaml"},
           {"--audit-interval soon", "--audit-interval soon"},
           // zero is not "never": that is `off`, which the message names
           {"--audit-interval 0", "--audit-interval off to run no audit"},
           {"--audit-interval 0ms", "--audit-interval off to run no audit"},
           {"--host-root /nonexistent/root", "--host-root /nonexistent/root"}}) {
    auto r = run_command(agent(args));
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(word)) << args;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

TEST(AgentCli, OnceOnACapturedHostPrintsOneScrape) {
  auto r = run_command(agent("--once --compat none"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("polyaccel_build_info{version="));
  // An XML capture has no vendor library and no sysfs to read: the PCIe links of hwloc only.
  EXPECT_THAT(r.output, HasSubstr("polyaccel_accelerator_monitor_ready 1"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("DCGM_FI_DEV")));
}

TEST(AgentCli, ServesUntilSigterm) {
  polyaccel::testing::TempDir tmp;
  auto log = tmp.path() / "agent.log";
  auto r = run_command("(" + agent("--listen 127.0.0.1:0 --interval 100ms", log.string()) +
                       "; echo exit=$? >> '" + log.string() + "') > /dev/null 2>&1 & echo $!");
  std::string stop = "pkill -TERM -P " + std::to_string(std::atoi(r.output.c_str()));
  // Stops the agent even when an assertion below ends the test early.
  struct Guard {
    std::string command;
    ~Guard() { run_command(command); }
  } guard{stop};
  std::string text;
  std::smatch port;
  for (int i = 0; i < 400; ++i) {
    text = read_text(log);
    if (std::regex_search(text, port, std::regex("on port ([0-9]+)"))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_FALSE(port.empty()) << text;
  auto health =
      run_command("curl -sS --max-time 10 http://127.0.0.1:" + port[1].str() + "/healthz");
  EXPECT_THAT(health.output, ::testing::StartsWith("ok"));
  // Only the DRA driver talks to the API server: libcurl, and the TLS, LDAP and Kerberos
  // libraries it pulls in, are not loaded by an agent without --dra (kube_api/client.cc opens it on
  // first use).
  auto maps =
      run_command("cat /proc/$(pgrep -P " + std::to_string(std::atoi(r.output.c_str())) + ")/maps");
  EXPECT_THAT(maps.output, HasSubstr("libhwloc"));
  EXPECT_THAT(maps.output, ::testing::Not(HasSubstr("libcurl")));
  // The agent is the only child of the subshell whose pid we have.
  run_command(stop);
  for (int i = 0; i < 400 && text.find("exit=") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    text = read_text(log);
  }
  EXPECT_THAT(text, HasSubstr("SIGTERM, stopping"));
  EXPECT_THAT(text, HasSubstr("exit=0"));
}

}  // namespace
}  // namespace polyaccel
