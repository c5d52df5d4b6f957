// The agent's HTTP side: /metrics in the text format (text_format.h; gzip when the scraper asks)
// and /healthz, answered by civetweb behind a non-blocking front (http_front.h), and the
// self-metrics of every scrape. A scrape reads the snapshots the samplers published and serialises
// them: it never waits on a vendor call or on kubelet.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "exporter/collector.h"

class CivetServer;

namespace polyaccel::exporter {

// Our own port, next to DCGM-exporter's 9400 and node_exporter's 9100 (docs/exporter.md).
inline constexpr int kDefaultPort = 9477;

// Where a scrape takes its snapshots from. Each returns at once (a copy of a shared_ptr).
struct Sources {
  std::function<std::shared_ptr<const AcceleratorSnapshot>()> accelerators;
  std::function<std::shared_ptr<const HostSample>()> host;
  std::function<std::shared_ptr<const PodAssignments>()> pods;      // may be empty: no kubelet
  std::function<std::shared_ptr<const DraStatus>()> dra = nullptr;  // may be empty or give null
};

struct ExporterOptions {
  std::string listen = ":" + std::to_string(kDefaultPort);  // IPv6 and IPv4, as node_exporter
  std::set<NameSet> names = {NameSet::polyaccel, NameSet::dcgm, NameSet::amd, NameSet::habana};
  std::string hostname;
  // AMD's opt-in cluster_name label (empty: the label is there, empty, as AMD's exporter has it).
  std::string cluster_name;
  // The host label of the DCGM names: "Hostname" as released dcgm-exporter, or "hostname" as
  // its main branch (NVIDIA/dcgm-exporter#655).
  std::string dcgm_hostname_label = "Hostname";
  std::string version;     // polyaccel_build_info{version, revision, build_type}
  std::string revision;    // git commit
  std::string build_type;  // CMake's: Release, Debug
  // Clients talk to the front (http_front.h), which reads each request head without a thread
  // and gives civetweb only complete ones: its workers serve, they never wait on a client. A
  // client must send its request head within request_timeout.
  std::size_t threads = 4;
  std::chrono::milliseconds request_timeout{3000};
  // The exporter-toolkit web config (web_config.h): TLS, basic auth; empty for clear text.
  std::string web_config_file;
  // /healthz fails when accelerators are known but no snapshot came for this long.
  std::chrono::milliseconds stall_after{60000};
};

// What /metrics answers: the text format and its gzip, built together from one set of snapshots.
struct ScrapeBody {
  std::string text;
  std::string gzip;  // empty when zlib failed: the text is served uncompressed
  // The snapshot the body was rendered from, for the hw.* part below.
  std::shared_ptr<const AcceleratorSnapshot> accelerators;
  std::shared_ptr<const PodAssignments> pods;  // with the DRA claims' devices joined in
  // The hw.* families with UTF-8 names (text_format.h hw_text_format) and their gzip member,
  // served after `text` (and `gzip`: two members make one gzip stream, RFC 1952 2.2) to a
  // scraper that asks for escaping=allow-utf-8 (accept_header.h). Rendered by the first such
  // scrape of this body, not by every render (it would add 0.4 ms of CPU to each at full size).
  const std::string& hw_text() const;
  const std::string& hw_gzip() const;  // empty when zlib failed

 private:
  void render_hw() const;
  mutable std::once_flag hw_once_;
  mutable std::string hw_text_, hw_gzip_;
};

// A cached body is served for at most this long even when no source changed, because of the
// families that depend on the clock: polyaccel_accelerator_sample_age_seconds (and its vendor
// twins) are as of the render, so they lag by at most this much; a stalled monitor still shows
// growing ages (docs/exporter.md).
inline constexpr std::chrono::milliseconds kMaxBodyAge{1000};

// Runs the collectors over one scrape input and adds the self-metrics. Also what tests and the
// benchmark call without HTTP. Thread-safe: civetweb serves scrapes on several threads.
class Scraper {
 public:
  Scraper(std::vector<std::unique_ptr<Collector>> collectors, ExporterOptions options,
          Sources sources);
  // One render: the collectors run over the snapshots as they are now (or over `input`).
  Families scrape() const;
  Families scrape(const ScrapeInput& input) const;
  ScrapeInput input() const;  // the snapshots as they are now
  const ExporterOptions& options() const { return options_; }

  // What /metrics serves. The samplers publish new snapshots on their own intervals (seconds),
  // while Prometheus and dashboards may scrape far more often, so the body is rendered once per
  // set of snapshots (the same shared_ptrs from every source, an equal DraStatus) and the same
  // bytes are served until a source publishes or kMaxBodyAge passes. The per-collector
  // polyaccel_collector_duration_seconds and _success are those of the render that built it.
  std::shared_ptr<const ScrapeBody> body() const;
  std::uint64_t renders() const { return renders_.load(); }  // bodies built so far (tests)

 private:
  // The sources' answers as they are (null included): the key of the cached body.
  struct Snapshots {
    std::shared_ptr<const AcceleratorSnapshot> accelerators;
    std::shared_ptr<const HostSample> host;
    std::shared_ptr<const PodAssignments> pods;
    std::shared_ptr<const DraStatus> dra;
    bool same_as(const Snapshots& other) const;
  };
  struct CachedBody {
    Snapshots key;
    std::chrono::steady_clock::time_point rendered;
    std::shared_ptr<const ScrapeBody> body;
  };
  Snapshots take_snapshots() const;
  ScrapeInput input_from(Snapshots snapshots) const;
  void note_result(const std::string& collector, const std::string& error) const;

  std::vector<std::unique_ptr<Collector>> collectors_;
  ExporterOptions options_;
  Sources sources_;
  std::chrono::system_clock::time_point started_;
  mutable std::mutex log_mu_;
  mutable std::map<std::string, std::string> last_error_;  // logged once, again when it changes
  // Held only to read or replace the pointer: renders run outside it, so two scrapes that miss
  // at once may both render (the same bytes); the last one stays.
  mutable std::mutex cache_mu_;
  mutable std::shared_ptr<const CachedBody> cache_;
  mutable std::atomic<std::uint64_t> renders_{0};
};

// /healthz: "ok" (200) or why not (503).
struct Health {
  bool ok = true;
  std::string text;
};
Health agent_health(const AcceleratorSnapshot& snapshot, std::chrono::system_clock::time_point now,
                    std::chrono::milliseconds stall_after);

class HttpFront;
class WebSecurity;

class HttpExporter {
 public:
  // Binds and serves; an Error names the address when it cannot (busy port, bad address).
  static Result<std::unique_ptr<HttpExporter>> start(std::shared_ptr<Scraper> scraper);
  ~HttpExporter();
  HttpExporter(const HttpExporter&) = delete;
  HttpExporter& operator=(const HttpExporter&) = delete;

  int port() const;  // the bound port (useful with :0)
  Health health() const;
  std::string metrics_text() const;                          // a scrape in the text format
  std::shared_ptr<const ScrapeBody> metrics_body() const;    // Scraper::body()
  WebSecurity* security() const { return security_.get(); }  // null without --web-config-file
  // --compat has otel: the hw.* names go to a scraper that negotiates UTF-8 names.
  bool serves_otel_names() const;

 private:
  HttpExporter() = default;
  std::shared_ptr<Scraper> scraper_;
  std::shared_ptr<WebSecurity> security_;
  std::unique_ptr<CivetServer> server_;  // civetweb on 127.0.0.1, behind front_
  std::unique_ptr<HttpFront> front_;     // the --listen address
};

}  // namespace polyaccel::exporter
