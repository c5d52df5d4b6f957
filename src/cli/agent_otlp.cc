#include "cli/agent_otlp.h"

#include "core/log.h"
#include "kube_api/client.h"

namespace polyaccel::cli {

struct OtlpPusher::Client {
  explicit Client(kube_api::KubeConfig config) : http(std::move(config)) {}
  kube_api::KubeClient http;
};

Result<std::unique_ptr<OtlpPusher>> OtlpPusher::start(OtlpPushOptions options,
                                                      std::function<OtlpSources()> sources) {
  auto endpoint = exporter::parse_otlp_endpoint(options.endpoint);
  if (!endpoint) return endpoint.error();
  options.endpoint = *endpoint;
  std::unique_ptr<OtlpPusher> p(new OtlpPusher(std::move(options), std::move(sources)));
  p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  return p;
}

OtlpPusher::OtlpPusher(OtlpPushOptions options, std::function<OtlpSources()> sources)
    : options_(std::move(options)),
      sources_(std::move(sources)),
      started_(std::chrono::system_clock::now()) {
  kube_api::KubeConfig config;
  config.server = options_.endpoint;
  config.content_type = "application/x-protobuf";
  // A push must end before the next one is due (and within 10 s at most).
  config.timeout = std::min(options_.interval, std::chrono::milliseconds(10000));
  client_ = std::make_unique<Client>(std::move(config));
}

OtlpPusher::~OtlpPusher() {
  stop();
}

void OtlpPusher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  client_->http.cancel();
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OtlpPusher::run() {
  const std::string url = options_.endpoint + "/v1/metrics";
  std::string last_problem;  // logged once, then when it changes or ends
  auto report = [&](const std::string& problem) {
    if (problem == last_problem) return;
    if (problem.empty())
      log_line("polyaccel agent: OTLP push to " + url + " works again");
    else
      log_line("polyaccel agent: OTLP push to " + url + " failed: " + problem +
               " (retried every interval)");
    last_problem = problem;
  };
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (wake_.wait_for(lock, options_.interval, [&] { return stopping_; })) return;
    }
    OtlpSources sources = sources_();
    if (!sources.accelerators || sources.accelerators->generation == 0) continue;  // not sampled
    std::string body = exporter::otlp_request(
        exporter::hw_metrics(*sources.accelerators,
                             sources.pods ? *sources.pods : PodAssignments{}),
        options_.resource, started_, std::chrono::system_clock::now());
    auto response = client_->http.request("POST", "/v1/metrics", body);
    if (!response) {
      report(response.error().problem);
    } else if (response->status < 200 || response->status > 299) {
      std::string detail = response->body.substr(0, 200);
      for (char& c : detail)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '.';
      report("HTTP " + std::to_string(response->status) + (detail.empty() ? "" : ": " + detail));
    } else {
      report("");
    }
  }
}

}  // namespace polyaccel::cli
