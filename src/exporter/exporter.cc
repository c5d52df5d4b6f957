#include "exporter/exporter.h"

#include <CivetServer.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <utility>

#include <malloc.h>
#include <unistd.h>

#include "exporter/accept_header.h"
#include "exporter/device_series.h"
#include "exporter/families.h"
#include "exporter/http_front.h"
#include "exporter/hw_metrics.h"
#include "exporter/listen_address.h"
#include "exporter/text_format.h"
#include "exporter/web_security.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;
using Clock = std::chrono::steady_clock;

// civetweb's begin_request has no user pointer of ours, so the one exporter of the process is
// found here. It answers every request: /metrics, /healthz and /; anything else is civetweb's 404.
std::atomic<const HttpExporter*> g_exporter{nullptr};

const char* status_text(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 401:
      return "Unauthorized";
    case 429:
      return "Too Many Requests";
    case 503:
      return "Service Unavailable";
    default:
      return "Internal Server Error";
  }
}

// `fields`: more header fields, each ending in CRLF.
// `more`: a second part of the body, sent after `body`.
void answer(mg_connection* conn, int status, const std::string& fields, const std::string& body,
            bool head, std::string_view content_type = "text/plain; charset=utf-8",
            std::string_view more = {}) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %.*s\r\n%s"
            "Content-Length: %zu\r\nConnection: close\r\n\r\n",
            status, status_text(status), static_cast<int>(content_type.size()), content_type.data(),
            fields.c_str(), body.size() + more.size());
  if (head) return;
  mg_write(conn, body.data(), body.size());
  if (!more.empty()) mg_write(conn, more.data(), more.size());
}

int answer_request(mg_connection* conn) {
  const mg_request_info* ri = mg_get_request_info(conn);
  const HttpExporter* exporter = g_exporter.load();
  if (!ri || !ri->local_uri || !exporter) return 0;
  bool head = ri->request_method && std::strcmp(ri->request_method, "HEAD") == 0;
  // The web config (web_security.h): rate limit, then basic auth, for every path but the
  // excluded ones; its headers on every answer of ours. /healthz takes no token (a flood must
  // not fail kubelet's probe) and an excluded path never waits for a password check.
  std::string fields;
  if (WebSecurity* security = exporter->security()) {
    for (const auto& [name, value] : security->headers())
      fields += name + ": " + value + "\r\n";
    if (std::strcmp(ri->local_uri, "/healthz") != 0 && !security->take_token()) {
      answer(conn, 429, fields, "Too Many Requests\n", head);
      return 429;
    }
    if (!security->excluded_from_auth(ri->local_uri)) {
      const char* client = mg_get_header(conn, kClientHeader);
      switch (
          security->check_password(mg_get_header(conn, "Authorization"), client ? client : "")) {
        case WebSecurity::Auth::allowed:
          break;
        case WebSecurity::Auth::denied:
          answer(conn, 401, fields + "WWW-Authenticate: Basic\r\n", "Unauthorized\n", head);
          return 401;
        case WebSecurity::Auth::busy:
          answer(conn, 503, fields + "Retry-After: 1\r\n",
                 "polyaccel agent: too many password checks at once; retry\n", head);
          return 503;
      }
    }
  }
  if (std::strcmp(ri->local_uri, "/metrics") == 0) {
    std::shared_ptr<const ScrapeBody> body = exporter->metrics_body();
    const char* accept = mg_get_header(conn, "Accept-Encoding");
    const char* types = mg_get_header(conn, "Accept");
    const bool utf8 = types && exporter->serves_otel_names() && accepts_utf8_names(types);
    const std::string_view type = utf8 ? kUtf8TextContentType : "text/plain; charset=utf-8";
    const std::string_view hw_text = utf8 ? body->hw_text() : std::string_view();
    const std::string_view hw_gzip = utf8 ? body->hw_gzip() : std::string_view();
    if (accept && std::strstr(accept, "gzip") && !body->gzip.empty() &&
        (hw_text.empty() || !hw_gzip.empty())) {
      answer(conn, 200, fields + "Content-Encoding: gzip\r\n", body->gzip, head, type, hw_gzip);
      return 200;
    }
    answer(conn, 200, fields, body->text, head, type, hw_text);
    return 200;
  }
  if (std::strcmp(ri->local_uri, "/healthz") == 0) {
    Health h = exporter->health();
    answer(conn, h.ok ? 200 : 503, fields, h.text + "\n", head);
    return h.ok ? 200 : 503;
  }
  if (std::strcmp(ri->local_uri, "/") == 0) {
    answer(conn, 200, fields, "polyaccel agent: /metrics, /healthz\n", head);
    return 200;
  }
  return 0;
}

// civetweb is C: an exception must not unwind through its frames. A scrape that throws outside
// the collectors (a source, the text format, bad_alloc) is answered 500 and logged; the server
// goes on.
int begin_request(mg_connection* conn) {
  try {
    return answer_request(conn);
  } catch (const std::exception& e) {
    std::cerr << "polyaccel agent: request failed: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "polyaccel agent: request failed\n";
  }
  try {
    answer(conn, 500, "", "polyaccel agent: internal error\n", false);
  } catch (...) {
  }
  return 500;
}

}  // namespace

Scraper::Scraper(std::vector<std::unique_ptr<Collector>> collectors, ExporterOptions options,
                 Sources sources)
    : collectors_(std::move(collectors)),
      options_(std::move(options)),
      sources_(std::move(sources)),
      started_(std::chrono::system_clock::now()) {}

Scraper::Snapshots Scraper::take_snapshots() const {
  Snapshots s;
  if (sources_.accelerators) s.accelerators = sources_.accelerators();
  if (sources_.host) s.host = sources_.host();
  if (sources_.pods) s.pods = sources_.pods();
  if (sources_.dra) s.dra = sources_.dra();
  return s;
}

bool Scraper::Snapshots::same_as(const Snapshots& other) const {
  // Snapshots are immutable and each publication is a new object, so the same pointer is the
  // same content. The DRA source makes a new status on every call: compared by value.
  bool same_dra = (!dra && !other.dra) || (dra && other.dra && *dra == *other.dra);
  return accelerators == other.accelerators && host == other.host && pods == other.pods && same_dra;
}

ScrapeInput Scraper::input() const {
  return input_from(take_snapshots());
}

ScrapeInput Scraper::input_from(Snapshots snapshots) const {
  ScrapeInput in;
  in.now = std::chrono::system_clock::now();
  in.hostname = options_.hostname;
  in.cluster_name = options_.cluster_name;
  in.dcgm_hostname_label = options_.dcgm_hostname_label;
  in.names = options_.names;
  in.accelerators = std::move(snapshots.accelerators);
  if (!in.accelerators) {
    auto empty = std::make_shared<AcceleratorSnapshot>();
    empty->host = std::make_shared<const HostModel>();
    in.accelerators = empty;
  }
  in.host = std::move(snapshots.host);
  if (!in.host) {
    auto empty = std::make_shared<HostSample>();
    empty->host = in.accelerators->host;
    in.host = empty;
  }
  in.pods = std::move(snapshots.pods);
  if (!in.pods) in.pods = std::make_shared<const PodAssignments>();
  in.dra = std::move(snapshots.dra);
  if (in.dra && !in.pods->by_claim_device.empty())
    in.pods = std::make_shared<const PodAssignments>(with_claim_devices(*in.pods, *in.dra));
  in.parts = agent_parts();
  return in;
}

void ScrapeBody::render_hw() const {
  std::call_once(hw_once_, [this] {
    if (!accelerators) return;
    hw_text_ = hw_text_format(hw_metrics(*accelerators, pods ? *pods : PodAssignments{}));
    if (!hw_text_.empty()) hw_gzip_ = exporter::gzip(hw_text_);
  });
}

const std::string& ScrapeBody::hw_text() const {
  render_hw();
  return hw_text_;
}

const std::string& ScrapeBody::hw_gzip() const {
  render_hw();
  return hw_gzip_;
}

std::shared_ptr<const ScrapeBody> Scraper::body() const {
  Snapshots now = take_snapshots();
  auto rendered_at = Clock::now();
  {
    std::lock_guard lock(cache_mu_);
    if (cache_ && cache_->key.same_as(now) && rendered_at - cache_->rendered < kMaxBodyAge)
      return cache_->body;
  }
  auto body = std::make_shared<ScrapeBody>();
  ScrapeInput in = input_from(now);
  body->text = text_format(scrape(in));
  body->accelerators = in.accelerators;
  body->pods = in.pods;
  // The text grew by doubling (400 KB of capacity for the full node's 200 KB), and the cached
  // body keeps it until the next render.
  body->text.shrink_to_fit();
  // gzip when the client takes it (Prometheus always does), as prometheus-cpp's handler did:
  // compressed here, once per body, not once per scrape.
  body->gzip = gzip(body->text);
  auto entry = std::make_shared<CachedBody>(
      CachedBody{std::move(now), rendered_at, std::shared_ptr<const ScrapeBody>(body)});
  renders_.fetch_add(1);
  std::shared_ptr<const CachedBody> previous;
  {
    std::lock_guard lock(cache_mu_);
    previous = std::exchange(cache_, entry);
  }
  previous.reset();  // with the last snapshots it held, unless a scrape still sends it
  // A render allocates and frees a few MiB (the families, their label vectors) on whichever
  // civetweb thread ran it, and glibc keeps freed pages resident in that thread's arena. Handing
  // them back costs a walk of the free lists once per render (every --interval), not per scrape.
  ::malloc_trim(0);
  return entry->body;
}

Families Scraper::scrape() const {
  return scrape(input());
}

Families Scraper::scrape(const ScrapeInput& input) const {
  Families out;
  auto duration = family("polyaccel_collector_duration_seconds",
                         "Time a collector took in this scrape.", MetricType::Gauge);
  auto success =
      family("polyaccel_collector_success",
             "1 when the collector succeeded in this scrape, 0 when it failed.", MetricType::Gauge);
  for (const auto& c : collectors_) {
    auto start = Clock::now();
    std::string error;
    try {
      Status st = c->collect(input, out);
      if (!st) error = st.error().message();
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::chrono::duration<double> took = Clock::now() - start;
    Labels l = {{"collector", c->name()}};
    add_sample(duration, l, took.count());
    add_sample(success, l, error.empty() ? 1 : 0);
    note_result(c->name(), error);
  }
  auto build = family("polyaccel_build_info", "The running polyaccel build.", MetricType::Gauge);
  add_sample(build,
             {{"version", options_.version},
              {"revision", options_.revision},
              {"build_type", options_.build_type}},
             1);
  auto start_time =
      family("polyaccel_agent_start_time_seconds",
             "When the agent started, in seconds since the epoch.", MetricType::Gauge);
  add_sample(start_time, {}, std::chrono::duration<double>(started_.time_since_epoch()).count());
  auto ready = family("polyaccel_accelerator_monitor_ready",
                      "1 once the vendor libraries were opened and merged.", MetricType::Gauge);
  add_sample(ready, {}, input.accelerators->ready ? 1 : 0);
  emit(out, {&duration, &success, &build, &start_time, &ready});
  return out;
}

void Scraper::note_result(const std::string& collector, const std::string& error) const {
  std::lock_guard lock(log_mu_);
  std::string& last = last_error_[collector];
  if (last == error) return;
  if (!error.empty()) {
    std::cerr << "polyaccel agent: collector " << collector << " failed: " << error << "\n";
  } else {
    std::cerr << "polyaccel agent: collector " << collector << " recovered\n";
  }
  last = error;
}

Health agent_health(const AcceleratorSnapshot& snapshot, std::chrono::system_clock::time_point now,
                    std::chrono::milliseconds stall_after) {
  if (!snapshot.ready) return {true, "ok: opening the vendor libraries"};
  if (snapshot.devices.empty()) return {true, "ok: no accelerator"};
  auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - snapshot.published);
  if (age > stall_after) {
    return {false, "accelerator sampling stalled: no snapshot for " +
                       std::to_string(age.count() / 1000) + " s (a vendor call hangs)"};
  }
  return {true, "ok"};
}

Result<std::unique_ptr<HttpExporter>> HttpExporter::start(std::shared_ptr<Scraper> scraper) {
  std::unique_ptr<HttpExporter> ex(new HttpExporter());
  ex->scraper_ = scraper;
  static CivetCallbacks callbacks = [] {
    CivetCallbacks cb;
    cb.begin_request = begin_request;
    return cb;
  }();
  const ExporterOptions& o = scraper->options();
  // Our words for a bad address, before civetweb's "null context" (listen_address.h).
  auto address = parse_listen_address(o.listen);
  if (!address) return address.error();
  if (!o.web_config_file.empty()) {
    // Read before the port is taken: a bad file fails the start, naming the file and reason.
    auto security = WebSecurity::load(o.web_config_file);
    if (!security) return security.error();
    ex->security_ = std::move(*security);
    // Password checks take half the workers at most: the rest answer /healthz, excluded paths
    // and clients whose credentials were already checked, however many wrong passwords arrive.
    ex->security_->set_max_password_checks(o.threads / 2);
  }
  auto listen_fd = open_listen_socket(*address, o.listen);
  if (!listen_fd) return listen_fd.error();
  try {
    // civetweb serves on loopback only, one request per connection: the front hands it complete
    // request heads and relays each answer until civetweb closes.
    ex->server_ = std::make_unique<CivetServer>(
        std::vector<std::string>{"listening_ports", "127.0.0.1:0", "num_threads",
                                 std::to_string(o.threads), "request_timeout_ms",
                                 std::to_string(o.request_timeout.count()),
                                 // headers and body go in two writes: without this, Nagle and
                                 // delayed ACKs add 40 ms to every answer
                                 "tcp_nodelay", "1", "enable_keep_alive", "no"},
        &callbacks);
  } catch (const std::exception& e) {
    ::close(*listen_fd);
    return Error{ErrorCode::internal,
                 "agent HTTP server",
                 "civetweb cannot listen on 127.0.0.1: " + std::string(e.what()),
                 {}};
  }
  g_exporter.store(ex.get());
  auto backend_ports = ex->server_->getListeningPorts();
  if (backend_ports.empty()) {
    ::close(*listen_fd);
    return Error{ErrorCode::internal, "agent HTTP server", "civetweb has no port", {}};
  }
  HttpFrontOptions front;
  front.head_timeout = o.request_timeout;
  front.security = ex->security_;
  auto started = HttpFront::start(*listen_fd, backend_ports.front(), front);
  if (!started) return started.error();
  ex->front_ = std::move(*started);
  return ex;
}

HttpExporter::~HttpExporter() {
  front_.reset();   // no new request reaches civetweb
  server_.reset();  // joins civetweb's threads: no request can still look at us
  const HttpExporter* self = this;
  g_exporter.compare_exchange_strong(self, nullptr);
}

int HttpExporter::port() const {
  return front_ ? front_->port() : 0;
}

std::string HttpExporter::metrics_text() const {
  return metrics_body()->text;
}

bool HttpExporter::serves_otel_names() const {
  return scraper_->options().names.count(NameSet::otel) != 0;
}

std::shared_ptr<const ScrapeBody> HttpExporter::metrics_body() const {
  return scraper_->body();
}

Health HttpExporter::health() const {
  auto in = scraper_->input();
  // A part whose thread's work threw (core/agent_parts.h) is down until the agent restarts.
  for (const auto& p : in.parts)
    if (!p.up) return {false, "part " + p.name + " failed: " + p.last_error};
  return agent_health(*in.accelerators, in.now, scraper_->options().stall_after);
}

}  // namespace polyaccel::exporter
