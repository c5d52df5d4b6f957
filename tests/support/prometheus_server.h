// What the tests that run agents under a real Prometheus server share (prometheus_test,
// vendor_dashboards_test): a free loopback port, a process in the background (background.h), the
// port an agent says it listens on, and Debian's Prometheus scraping a list of targets every
// second. Header-only, as test_support.h.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/background.h"
#include "support/test_support.h"

namespace polyaccel::testing {

// A loopback TCP port free at the time of the call.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

// The port an agent started with --listen 127.0.0.1:0 logs ("on port N"), waiting up to 10 s;
// throws "<what>agent did not start: <its log>" when it does not say.
inline int agent_port(const Background& agent, const std::string& what = "") {
  std::smatch m;
  std::string log;
  const std::regex port_line("on port ([0-9]+)");
  for (int i = 0; i < 400 && !std::regex_search(log = agent.log(), m, port_line); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  if (m.empty()) throw std::runtime_error(what + "agent did not start: " + log);
  return std::stoi(m[1]);
}

// An instant query to the Prometheus server on loopback `port` (the query text goes through a
// file in `dir`, so no quoting is needed): the result vector, or an empty one when Prometheus is
// not ready or refuses the query.
inline nlohmann::json prometheus_query(int port, const std::filesystem::path& dir,
                                       const std::string& promql) {
  std::filesystem::path q = dir / "query.txt";
  std::ofstream(q) << promql;
  auto r = run_command("curl -sS --max-time 20 -G --data-urlencode query@'" + q.string() +
                       "' http://127.0.0.1:" + std::to_string(port) + "/api/v1/query 2>/dev/null");
  nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return nlohmann::json::array();
  return j["data"]["result"];
}

// Debian's Prometheus server on a free loopback port, scraping `targets` (loopback ports) every
// second as job `job`, its configuration, data and log in `dir`.
class PrometheusProcess {
 public:
  PrometheusProcess(const std::filesystem::path& dir, const std::string& job,
                    const std::vector<int>& targets)
      : port_(free_port()) {
    std::filesystem::path config = dir / "prometheus.yml";
    std::string list;
    for (int t : targets)
      list += (list.empty() ? "" : ", ") + std::string("'127.0.0.1:") + std::to_string(t) + "'";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                             "scrape_configs:\n  - job_name: "
                          << job << "\n    static_configs:\n      - targets: [" << list << "]\n";
    process_ = std::make_unique<Background>(
        "exec prometheus --config.file='" + config.string() + "' --storage.tsdb.path='" +
            (dir / "tsdb").string() + "' --web.listen-address=127.0.0.1:" + std::to_string(port_) +
            " --log.level=warn",
        dir / "prometheus.log");
  }
  int port() const { return port_; }
  std::string log() const { return process_->log(); }

 private:
  int port_;
  std::unique_ptr<Background> process_;
};

}  // namespace polyaccel::testing
