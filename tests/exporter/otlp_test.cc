// The agent's OTLP/HTTP push (--otlp-endpoint; src/cli/agent_otlp.h, src/exporter/otlp.h):
// agents on the test NVML library (8×H100, and 8×H200 with 19 MIG instances) push to an
// OTLP/HTTP receiver the test runs on loopback. Each request is decoded twice: with our
// generated messages, and by protoc against OpenTelemetry's own published .proto files (the
// opentelemetry-proto package of Debian forky, unpacked by scripts/install-deps.sh), so that a
// wrong field number or type shows as an unknown field or a wrong value. The values are the
// scenario's; a receiver that answers 503 gets the push retried, with the failure logged, while
// /metrics keeps answering. Bad flag values exit 2.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"
#include "support/fake_pod_resources.h"
#include "support/prometheus_server.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using namespace std::chrono_literals;
using polyaccel::testing::Background;
using polyaccel::testing::run_command;
namespace fs = std::filesystem;
namespace otlp = opentelemetry::proto;

// Where install-deps.sh unpacks forky's opentelemetry-proto (the published definitions).
const fs::path kUpstreamProtos = "/usr/local/lib/polyaccel-test/opentelemetry-proto/usr/include";

struct Received {
  std::string request_line, content_type, body;
};

// A minimal OTLP/HTTP receiver: one request per connection, answered with `status` (200, or what
// the test sets), every request kept.
class Receiver {
 public:
  Receiver() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] { serve(); });
  }
  ~Receiver() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  void set_status(int status) { status_ = status; }
  std::vector<Received> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void serve() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string data;
      char buf[65536];
      std::size_t head_end = std::string::npos, length = 0;
      for (;;) {
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        data.append(buf, static_cast<std::size_t>(n));
        if (head_end == std::string::npos &&
            (head_end = data.find("\r\n\r\n")) != std::string::npos) {
          std::smatch m;
          std::string head = data.substr(0, head_end);
          if (std::regex_search(head, m, std::regex("[Cc]ontent-[Ll]ength: *([0-9]+)")))
            length = std::stoul(m[1]);
        }
        if (head_end != std::string::npos && data.size() >= head_end + 4 + length) break;
      }
      if (head_end != std::string::npos) {
        Received r;
        std::string head = data.substr(0, head_end);
        r.request_line = head.substr(0, head.find("\r\n"));
        std::smatch m;
        if (std::regex_search(head, m, std::regex("[Cc]ontent-[Tt]ype: *([^\r]*)")))
          r.content_type = m[1];
        r.body = data.substr(head_end + 4, length);
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(std::move(r));
      }
      int status = status_;
      std::string answer = "HTTP/1.1 " + std::to_string(status) +
                           (status == 200 ? " OK" : " Service Unavailable") +
                           "\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n"
                           "Connection: close\r\n\r\n";
      (void)!::write(c, answer.data(), answer.size());
      ::close(c);
    }
  }
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> status_{200};
  std::mutex mu_;
  std::vector<Received> requests_;
  std::thread thread_;
};

// An agent on the test NVML library at the scenario's `step` (4: its last), pushing every 500 ms.
std::string agent_command(const std::string& scenario, int receiver_port,
                          const std::string& extra = "", int step = 4) {
  return "NODE_NAME=node-7 NVML_INJECT_STEP=" + std::to_string(step) +
         " POLYACCEL_HLML_LIB=/nonexistent "
         "POLYACCEL_ROCM_SMI_LIB=/nonexistent "
         "POLYACCEL_AMD_SMI_LIB=/nonexistent POLYACCEL_NVML_LIB=" +
         std::string(INJECT_DIR) + "/nvml/libnvidia-ml.so.1 NVML_INJECT_SCENARIO=" + SCENARIO_DIR +
         "/nvml/scenarios/" + scenario + " exec '" + polyaccel::testing::polyaccel_binary() +
         "' agent --accel-backends on --interval 250ms --listen 127.0.0.1:0 --hostname node-7 "
         "--pod-resources-socket '' --kubelet-dir '' --state '' --otlp-endpoint "
         "http://127.0.0.1:" +
         std::to_string(receiver_port) + "/ --otlp-interval 500ms " + extra;
}

using Request = otlp::collector::metrics::v1::ExportMetricsServiceRequest;

std::map<std::string, std::string> attributes(
    const google::protobuf::RepeatedPtrField<otlp::common::v1::KeyValue>& kvs) {
  std::map<std::string, std::string> out;
  for (const auto& kv : kvs)
    out[kv.key()] = kv.value().string_value();
  return out;
}

const otlp::metrics::v1::Metric* find_metric(const Request& r, const std::string& name) {
  for (const auto& m : r.resource_metrics(0).scope_metrics(0).metrics())
    if (m.name() == name) return &m;
  return nullptr;
}

// The point of `metric` whose attributes include all of `want`; null when none.
const otlp::metrics::v1::NumberDataPoint* find_point(
    const otlp::metrics::v1::Metric& metric, const std::map<std::string, std::string>& want) {
  const auto& points = metric.has_sum() ? metric.sum().data_points() : metric.gauge().data_points();
  for (const auto& p : points) {
    auto a = attributes(p.attributes());
    bool all = true;
    for (const auto& [k, v] : want)
      all = all && a.count(k) && a[k] == v;
    if (all) return &p;
  }
  return nullptr;
}

// Waits (up to 30 s) for a request that `accept` takes; the last request otherwise.
Request wait_for(Receiver& receiver, const std::function<bool(const Request&)>& accept,
                 Received* raw = nullptr) {
  Request last;
  for (auto deadline = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(100ms)) {
    auto all = receiver.requests();
    if (all.empty()) continue;
    if (!last.ParseFromString(all.back().body)) continue;
    if (raw) *raw = all.back();
    if (accept(last)) return last;
  }
  return last;
}

const std::string kGpu0 = "GPU-5b2e7a1c-3f0d-8e94-61c2-0a7d4f9b1e21";

TEST(OtlpPush, HgxH100ValuesUnitsAndInstrumentsArriveAsTheConventionsSay) {
  polyaccel::testing::TempDir tmp;
  Receiver receiver;
  Background agent(agent_command("hgx-8xh100.json", receiver.port()), tmp.path() / "agent.log");
  Received raw;
  // Step 4: GPU 0 at 36 °C, 73.12 W, 4249114 J, 3 corrected ECC errors.
  Request r = wait_for(
      receiver,
      [](const Request& q) {
        if (q.resource_metrics_size() != 1 || q.resource_metrics(0).scope_metrics_size() != 1)
          return false;
        const auto* energy = find_metric(q, "hw.energy");
        const auto* p = energy ? find_point(*energy, {{"hw.id", kGpu0}}) : nullptr;
        return p && p->as_double() == 4249114.0;
      },
      &raw);
  ASSERT_EQ(r.resource_metrics_size(), 1) << agent.log();
  EXPECT_EQ(raw.request_line, "POST /v1/metrics HTTP/1.1");
  EXPECT_EQ(raw.content_type, "application/x-protobuf");
  auto resource = attributes(r.resource_metrics(0).resource().attributes());
  EXPECT_EQ(resource["service.name"], "polyaccel");
  EXPECT_EQ(resource["host.name"], "node-7");
  EXPECT_EQ(resource["k8s.node.name"], "node-7");

  struct Expected {
    std::string name, unit;
    enum { gauge, monotonic, up_down } kind;
  };
  for (const Expected& e :
       std::vector<Expected>{{"hw.gpu.utilization", "1", Expected::gauge},
                             {"hw.gpu.memory.usage", "By", Expected::up_down},
                             {"hw.gpu.memory.limit", "By", Expected::up_down},
                             {"hw.gpu.memory.utilization", "1", Expected::gauge},
                             {"hw.errors", "{error}", Expected::monotonic},
                             {"hw.status", "1", Expected::up_down},
                             {"hw.power", "W", Expected::gauge},
                             {"hw.energy", "J", Expected::monotonic},
                             {"hw.gpu.io", "By", Expected::monotonic},
                             {"hw.temperature", "Cel", Expected::gauge}}) {
    SCOPED_TRACE(e.name);
    const auto* m = find_metric(r, e.name);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->unit(), e.unit);
    if (e.kind == Expected::gauge) {
      EXPECT_TRUE(m->has_gauge());
    } else {
      ASSERT_TRUE(m->has_sum());
      EXPECT_EQ(m->sum().aggregation_temporality(),
                otlp::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
      EXPECT_EQ(m->sum().is_monotonic(), e.kind == Expected::monotonic);
      for (const auto& p : m->sum().data_points()) {
        EXPECT_GT(p.start_time_unix_nano(), 0u);
        EXPECT_LE(p.start_time_unix_nano(), p.time_unix_nano());
      }
    }
  }
  const std::map<std::string, std::string> gpu0 = {{"hw.id", kGpu0},
                                                   {"hw.type", "gpu"},
                                                   {"hw.vendor", "NVIDIA"},
                                                   {"hw.model", "NVIDIA H100 80GB HBM3"}};
  auto value = [&](const std::string& name, std::map<std::string, std::string> more) {
    more.insert(gpu0.begin(), gpu0.end());
    const auto* m = find_metric(r, name);
    const auto* p = m ? find_point(*m, more) : nullptr;
    return p ? p->as_double() : -1.0;
  };
  // A temperature sensor is a component of its own whose parent is the GPU.
  auto sensor = [&](const std::string& location) {
    const auto* m = find_metric(r, "hw.temperature");
    const auto* p =
        m ? find_point(*m, {{"hw.parent", kGpu0}, {"hw.sensor_location", location}}) : nullptr;
    return p ? std::pair(attributes(p->attributes()), p->as_double())
             : std::pair(std::map<std::string, std::string>{}, -1.0);
  };
  EXPECT_DOUBLE_EQ(sensor("gpu").second, 36);
  EXPECT_DOUBLE_EQ(sensor("memory").second, 44);
  EXPECT_EQ(sensor("gpu").first["hw.type"], "temperature");
  EXPECT_EQ(sensor("gpu").first["hw.id"], kGpu0 + ":temperature:gpu");
  EXPECT_GE(value("hw.gpu.io", {{"network.io.direction", "receive"}}), 0);
  EXPECT_GE(value("hw.gpu.io", {{"network.io.direction", "transmit"}}), 0);
  EXPECT_DOUBLE_EQ(value("hw.power", {}), 73.12);
  EXPECT_DOUBLE_EQ(value("hw.gpu.memory.limit", {}), 81559.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(value("hw.gpu.memory.usage", {}), 0);
  EXPECT_DOUBLE_EQ(value("hw.gpu.utilization", {{"hw.gpu.task", "general"}}), 0);
  EXPECT_DOUBLE_EQ(value("hw.errors", {{"error.type", "ecc_corrected"}}), 3);
  EXPECT_DOUBLE_EQ(value("hw.status", {{"hw.state", "ok"}}), 1);
  EXPECT_DOUBLE_EQ(value("hw.status", {{"hw.state", "failed"}}), 0);
  // Eight GPUs, each with its own hw.id.
  std::set<std::string> ids;
  for (const auto& p : find_metric(r, "hw.power")->gauge().data_points())
    ids.insert(attributes(p.attributes())["hw.id"]);
  EXPECT_EQ(ids.size(), 8u);

  // OpenTelemetry's own definitions read the same bytes: no unknown field, the same names.
  if (!fs::exists(kUpstreamProtos))
    GTEST_FAIL() << kUpstreamProtos << " missing: run scripts/install-deps.sh";
  fs::path body = tmp.path() / "request.bin";
  polyaccel::testing::write_text(body, raw.body);
  auto decoded =
      run_command("protoc -I'" + kUpstreamProtos.string() +
                  "' --decode=opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest "
                  "opentelemetry/proto/collector/metrics/v1/metrics_service.proto < '" +
                  body.string() + "' 2>&1");
  ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
  EXPECT_FALSE(std::regex_search(decoded.output, std::regex("\n *[0-9]+[:{ ]")))
      << "fields the published definitions do not know";
  // hw.energy as protoc prints it: name, description, unit, then its sum.
  std::smatch energy;
  ASSERT_TRUE(std::regex_search(
      decoded.output, energy,
      std::regex("name: \"hw.energy\"\n[^\n]*\n *unit: \"J\"\n *sum \\{\n *data_points \\{\n"
                 " *start_time_unix_nano: [1-9][0-9]*\n *time_unix_nano: [1-9][0-9]*\n"
                 " *as_double: 4249114\n")))
      << "no hw.energy sum of 4249114 J in protoc's reading";
  EXPECT_TRUE(std::regex_search(
      decoded.output,
      std::regex(
          "aggregation_temporality: AGGREGATION_TEMPORALITY_CUMULATIVE\n *is_monotonic: true")))
      << "no monotonic cumulative sum in protoc's reading";
  EXPECT_THAT(decoded.output, ::testing::HasSubstr("string_value: \"" + kGpu0 + "\""));
}

// The value and time (s) of `metric`'s point with `want`; -1 when none.
std::pair<double, double> point_at(const Request& r, const std::string& metric,
                                   const std::map<std::string, std::string>& want) {
  const auto* m = r.resource_metrics_size() ? find_metric(r, metric) : nullptr;
  const auto* p = m ? find_point(*m, want) : nullptr;
  if (!p) return {-1, -1};
  return {p->as_double(), static_cast<double>(p->time_unix_nano()) / 1e9};
}

// hw.gpu.io: the bytes each way since the agent started, a monotonic sum from 0 whose growth is
// the libraries' rates. Step 1 of the H100 scenario: GPU 0 receives 9216 MiB/s over PCIe (GPM)
// and 148224 MiB/s over NVLink (NVML's data counters), and sends 1843.5 + 148736 MiB/s.
TEST(OtlpPush, GpuIoCountsTheBytesEachWayAtTheLibrariesRates) {
  polyaccel::testing::TempDir tmp;
  Receiver receiver;
  Background agent(agent_command("hgx-8xh100.json", receiver.port(), "", 1),
                   tmp.path() / "agent.log");
  const std::map<std::string, std::string> rx = {{"hw.id", kGpu0},
                                                 {"network.io.direction", "receive"}};
  const std::map<std::string, std::string> tx = {{"hw.id", kGpu0},
                                                 {"network.io.direction", "transmit"}};
  Request first =
      wait_for(receiver, [&](const Request& q) { return point_at(q, "hw.gpu.io", rx).first > 0; });
  auto [rx1, t1] = point_at(first, "hw.gpu.io", rx);
  auto [tx1, t1b] = point_at(first, "hw.gpu.io", tx);
  ASSERT_GT(rx1, 0) << agent.log();
  const auto* io = find_metric(first, "hw.gpu.io");
  ASSERT_TRUE(io->has_sum());
  EXPECT_TRUE(io->sum().is_monotonic());
  EXPECT_EQ(io->unit(), "By");
  EXPECT_EQ(io->sum().data_points_size(), 16) << "8 GPUs, two directions";
  // The start time is the agent's, before the first point.
  const auto* p = find_point(*io, rx);
  EXPECT_LT(p->start_time_unix_nano(), p->time_unix_nano());
  const double four_seconds_on = t1 + 4;  // a structured binding is no lambda capture in clang 14
  Request later = wait_for(receiver, [&](const Request& q) {
    return point_at(q, "hw.gpu.io", rx).second >= four_seconds_on;
  });
  auto [rx2, t2] = point_at(later, "hw.gpu.io", rx);
  auto [tx2, t2b] = point_at(later, "hw.gpu.io", tx);
  ASSERT_GE(t2, t1 + 4) << agent.log();
  const double mib = 1024.0 * 1024.0;
  // Within 15%: the totals are as of the last sample (every 250 ms), the points as of the push.
  EXPECT_NEAR((rx2 - rx1) / (t2 - t1) / mib, 9216 + 148224, 0.15 * (9216 + 148224));
  EXPECT_NEAR((tx2 - tx1) / (t2b - t1b) / mib, 1843.5 + 148736, 0.15 * (1843.5 + 148736));
}

// Gaudi (HLML) accelerators are on hw.* as NVIDIA's and AMD's are: vendor, model, the board
// sensor, and hw.gpu.io from HLML's PCIe throughput (the scenario's first HL-225: 2,000,000 KB/s
// received, 500,000 KB/s sent).
TEST(OtlpPush, GaudiAcceleratorsAreOnHwAsTheOthers) {
  polyaccel::testing::TempDir tmp;
  Receiver receiver;
  Background agent(
      "NODE_NAME=node-7 POLYACCEL_NVML_LIB=/nonexistent POLYACCEL_ROCM_SMI_LIB=/nonexistent "
      "POLYACCEL_AMD_SMI_LIB=/nonexistent POLYACCEL_HLML_LIB=" +
          std::string(INJECT_DIR) + "/hlml/libhlml.so HLML_INJECT_SCENARIO=" + SCENARIO_DIR +
          "/hlml/scenarios/gaudi2-8x.json exec '" + polyaccel::testing::polyaccel_binary() +
          "' agent --accel-backends on --interval 250ms --listen 127.0.0.1:0 --hostname node-7 "
          "--pod-resources-socket '' --kubelet-dir '' --state '' --otlp-endpoint "
          "http://127.0.0.1:" +
          std::to_string(receiver.port()) + " --otlp-interval 500ms",
      tmp.path() / "agent.log");
  const std::string hl0 = "01P0-HL2080A0-15-TNXG14-20-04-07";
  const std::map<std::string, std::string> rx = {{"hw.id", hl0},
                                                 {"network.io.direction", "receive"}};
  Request first =
      wait_for(receiver, [&](const Request& q) { return point_at(q, "hw.gpu.io", rx).first > 0; });
  ASSERT_GT(point_at(first, "hw.gpu.io", rx).first, 0) << agent.log();
  const auto* power = find_metric(first, "hw.power");
  ASSERT_NE(power, nullptr);
  EXPECT_EQ(power->gauge().data_points_size(), 8);
  const auto* p = find_point(*power, {{"hw.id", hl0}});
  ASSERT_NE(p, nullptr);
  auto a = attributes(p->attributes());
  EXPECT_EQ(a["hw.type"], "gpu");
  EXPECT_EQ(a["hw.vendor"], "Intel");
  EXPECT_EQ(a["hw.model"], "HL-225");
  EXPECT_EQ(a["hw.serial_number"], "AN23012841");
  EXPECT_DOUBLE_EQ(p->as_double(), 91.25);
  EXPECT_DOUBLE_EQ(
      point_at(first, "hw.temperature", {{"hw.parent", hl0}, {"hw.sensor_location", "board"}})
          .first,
      29);
  EXPECT_DOUBLE_EQ(point_at(first, "hw.gpu.memory.usage", {{"hw.id", hl0}}).first, 805306368);
  EXPECT_DOUBLE_EQ(point_at(first, "hw.status", {{"hw.id", hl0}, {"hw.state", "ok"}}).first, 1);
  auto [rx1, t1] = point_at(first, "hw.gpu.io", rx);
  const double four_seconds_on = t1 + 4;  // a structured binding is no lambda capture in clang 14
  Request later = wait_for(receiver, [&](const Request& q) {
    return point_at(q, "hw.gpu.io", rx).second >= four_seconds_on;
  });
  auto [rx2, t2] = point_at(later, "hw.gpu.io", rx);
  ASSERT_GE(t2, t1 + 4) << agent.log();
  EXPECT_NEAR((rx2 - rx1) / (t2 - t1), 2e9, 0.15 * 2e9);
  auto tx = point_at(later, "hw.gpu.io", {{"hw.id", hl0}, {"network.io.direction", "transmit"}});
  EXPECT_GT(tx.first, 0);
  EXPECT_LT(tx.first, rx2);
}

// Pods holding a GPU (kubelet's pod-resources, a fake kubelet answering as 1.34 does): the GPU's
// points once per pod with OpenTelemetry's k8s.* attributes; a GPU no pod holds has none.
TEST(OtlpPush, PodsHoldingAGpuAreOnItsPoints) {
  polyaccel::testing::TempDir tmp;
  Receiver receiver;
  const std::string socket = (tmp.path() / "kubelet.sock").string();
  polyaccel::testing::FakePodResources kubelet(socket);
  kubelet.set({{"infer-a", "serve", "server", "nvidia.com/gpu", {kGpu0 + "::0"}},
               {"infer-b", "serve", "server", "nvidia.com/gpu", {kGpu0 + "::1"}}});
  std::string command = agent_command("hgx-8xh100.json", receiver.port());
  command.replace(command.find("--pod-resources-socket ''"), 25,
                  "--pod-resources-socket '" + socket + "'");
  Background agent(command, tmp.path() / "agent.log");
  Request r = wait_for(receiver, [](const Request& q) {
    return point_at(q, "hw.power", {{"hw.id", kGpu0}, {"k8s.pod.name", "infer-b"}}).first > 0;
  });
  ASSERT_EQ(r.resource_metrics_size(), 1) << agent.log();
  const auto* power = find_metric(r, "hw.power");
  ASSERT_NE(power, nullptr);
  std::set<std::string> pods;
  for (const auto& p : power->gauge().data_points()) {
    auto a = attributes(p.attributes());
    if (a["hw.id"] != kGpu0) {
      EXPECT_EQ(a.count("k8s.pod.name"), 0u) << a["hw.id"];
      continue;
    }
    EXPECT_EQ(a["k8s.namespace.name"], "serve");
    EXPECT_EQ(a["k8s.container.name"], "server");
    EXPECT_DOUBLE_EQ(p.as_double(), 73.12);
    pods.insert(a["k8s.pod.name"]);
  }
  EXPECT_EQ(pods, (std::set<std::string>{"infer-a", "infer-b"}));
  EXPECT_GE(point_at(r, "hw.gpu.io", {{"hw.id", kGpu0}, {"k8s.pod.name", "infer-a"}}).first, 0);
  EXPECT_GE(
      point_at(r, "hw.temperature", {{"hw.parent", kGpu0}, {"k8s.pod.name", "infer-a"}}).first, 0);
}

TEST(OtlpPush, MigInstancesNameTheirGpuAsParent) {
  polyaccel::testing::TempDir tmp;
  Receiver receiver;
  Background agent(agent_command("hgx-8xh200-mig.json", receiver.port()), tmp.path() / "agent.log");
  Request r = wait_for(receiver, [](const Request& q) {
    const auto* limit = q.resource_metrics_size() ? find_metric(q, "hw.gpu.memory.limit") : nullptr;
    return limit && find_point(*limit, {{"hw.id", "MIG-a0000000-0000-5000-8000-000000000000"}});
  });
  ASSERT_EQ(r.resource_metrics_size(), 1) << agent.log();
  const auto* limit = find_metric(r, "hw.gpu.memory.limit");
  ASSERT_NE(limit, nullptr);
  const auto* mig = find_point(*limit, {{"hw.id", "MIG-a0000000-0000-5000-8000-000000000000"}});
  ASSERT_NE(mig, nullptr) << agent.log();
  auto a = attributes(mig->attributes());
  EXPECT_EQ(a["hw.type"], "gpu");
  EXPECT_EQ(a["hw.model"].find("MIG 1g.18gb") != std::string::npos, true) << a["hw.model"];
  EXPECT_DOUBLE_EQ(mig->as_double(), 17432.0 * 1024 * 1024);
  // hw.parent is the hw.id of a GPU that has its own points.
  ASSERT_TRUE(a.count("hw.parent"));
  EXPECT_THAT(a["hw.parent"], ::testing::StartsWith("GPU-"));
  EXPECT_NE(find_point(*limit, {{"hw.id", a["hw.parent"]}}), nullptr);
  // The scenario's 19 MIG instances (over its GPUs in MIG mode) each have a parent.
  int with_parent = 0;
  for (const auto& p : limit->sum().data_points())
    with_parent += attributes(p.attributes()).count("hw.parent") ? 1 : 0;
  EXPECT_EQ(with_parent, 19);
}

TEST(OtlpPush, AFailingReceiverIsLoggedRetriedAndNeverBlocksScrapes) {
  polyaccel::testing::TempDir tmp;
  Receiver receiver;
  receiver.set_status(503);
  Background agent(agent_command("hgx-8xh100.json", receiver.port()), tmp.path() / "agent.log");
  int port = polyaccel::testing::agent_port(agent);
  for (auto deadline = std::chrono::steady_clock::now() + 20s;
       receiver.requests().size() < 3 && std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(100ms);
  EXPECT_GE(receiver.requests().size(), 3u) << agent.log();  // retried every interval
  auto scrape =
      run_command("curl -sS --max-time 5 http://127.0.0.1:" + std::to_string(port) + "/metrics");
  EXPECT_THAT(scrape.output, ::testing::HasSubstr("DCGM_FI_DEV_GPU_TEMP{"));
  std::string log = agent.log();
  EXPECT_THAT(
      log, ::testing::HasSubstr("OTLP push to http://127.0.0.1:" + std::to_string(receiver.port()) +
                                "/v1/metrics failed: HTTP 503"));
  // Logged once, not once per try.
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n') < 10, true) << log;
  receiver.set_status(200);
  for (auto deadline = std::chrono::steady_clock::now() + 20s;
       agent.log().find("works again") == std::string::npos &&
       std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(100ms);
  EXPECT_THAT(agent.log(), ::testing::HasSubstr("works again"));
}

TEST(OtlpPush, BadFlagValuesExit2NamingTheFlag) {
  const std::string agent = "'" + polyaccel::testing::polyaccel_binary() +
                            "' agent --accel-backends off --listen 127.0.0.1:0 --state '' "
                            "--kubelet-dir '' --pod-resources-socket '' ";
  struct Case {
    std::string flags, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--otlp-endpoint ftp://collector:4318", "--otlp-endpoint ftp://collector:4318"},
           {"--otlp-endpoint http://", "has no host"},
           {"--otlp-endpoint 'http://c:4318/?x=1'", "'?' or '#'"},
           {"--otlp-endpoint http://c:4318 --otlp-interval 0", "--otlp-interval 0"},
           {"--otlp-endpoint http://c:4318 --otlp-interval 1e300s", "--otlp-interval"}}) {
    SCOPED_TRACE(c.flags);
    auto r = run_command("timeout 20 " + agent + c.flags + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, ::testing::HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace polyaccel
