// A small Kubernetes API-server client over libcurl (HTTPS, bearer token or client certificate),
// for the few calls the DRA driver makes: ResourceSlices (list, create, update, delete) and
// ResourceClaims (get); and the partition manager's (src/partition_manager/node_api.h): its Node
// (get, PATCH as a JSON merge patch), a ConfigMap, evictions, Events. No HTTP or TLS of our own:
// libcurl does both.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/error.h"

namespace polyaccel::kube_api {

struct KubeConfig {
  std::string server;      // "https://10.96.0.1:443"
  std::string token;       // bearer token; empty: none
  std::string token_file;  // re-read on every request when set (bound tokens rotate)
  std::string ca_pem;      // the cluster's CA, PEM; empty: the system's CAs
  std::string client_cert_pem, client_key_pem;  // kubeconfig client certificates
  bool insecure_skip_tls_verify = false;
  // The credential presented, for people ("the service account token /var/run/.../token",
  // "user ci's token in the kubeconfig /etc/k.yaml"): what a 401 blames. Empty: none.
  std::string credential;
  std::chrono::milliseconds timeout{10000};
  // The Content-Type of a POST or PUT body (a PATCH is always a JSON merge patch); the OTLP push
  // (cli/agent_otlp.h) sends application/x-protobuf.
  std::string content_type = "application/json";
};

// In a pod: KUBERNETES_SERVICE_HOST/PORT, the service account's token and ca.crt under `sa_dir`.
Result<KubeConfig> in_cluster_config(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");
// A kubeconfig file: its current context's cluster (server, certificate-authority[-data],
// insecure-skip-tls-verify) and user (token, tokenFile, client-certificate[-data],
// client-key[-data]).
Result<KubeConfig> kubeconfig_file(const std::string& path);

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string credential;  // KubeConfig::credential of the request: what a 401 is about
};

class KubeClient {
 public:
  explicit KubeClient(KubeConfig config);
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  // One request; a transport failure (refused, TLS, timeout) is an Error, any HTTP status a
  // response. `path` starts with "/"; `body` is JSON (sent for POST and PUT).
  Result<HttpResponse> request(const std::string& method, const std::string& path,
                               const std::string& body = {});
  // A watch (a GET with ?watch=1): `on_line` gets each line of the answer (one watch event) as
  // it arrives. It ends when the server closes it (timeoutSeconds), when `on_line` returns
  // false, when `keep_going` (asked about once a second) returns false, or after `timeout`;
  // none of these is an error. The status; the body only when it is not 200 (a Status).
  Result<HttpResponse> watch(const std::string& path,
                             const std::function<bool(const std::string&)>& on_line,
                             const std::function<bool()>& keep_going,
                             std::chrono::milliseconds timeout);
  const KubeConfig& config() const { return config_; }
  // Requests that changed something on the server (POST, PUT, DELETE answered 2xx; not dry
  // runs).
  std::uint64_t writes() const;
  // Ends the request in flight (an API server that hangs keeps it up to `timeout`) and refuses
  // every later one: the agent is stopping. Safe from any thread.
  void cancel() { cancelled_ = true; }

 private:
  Result<HttpResponse> perform(const std::string& method, const std::string& path,
                               const std::string& body, void* stream,
                               std::chrono::milliseconds timeout);
  KubeConfig config_;
  mutable std::mutex mu_;  // one curl handle, used by one request at a time
  void* curl_ = nullptr;
  std::uint64_t writes_ = 0;
  std::atomic<bool> cancelled_{false};
};

// Percent-encoding for a query value (field selectors).
std::string url_encode(const std::string& text);

// Now as the API's timestamps are written (RFC 3339, UTC, seconds): "2026-12-06T15:04:05Z".
std::string now_rfc3339();

}  // namespace polyaccel::kube_api
