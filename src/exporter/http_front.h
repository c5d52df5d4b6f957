// The agent's public listener: a non-blocking front for civetweb. civetweb gives each connection a
// worker thread that blocks until the request head is read (up to its request timeout), so N
// half-sent requests take N workers and a scrape waits behind them. The front reads every
// client's request head on one epoll thread, without a thread per connection, and hands only
// complete heads to civetweb (on a loopback port, one request per connection), then relays the
// answer back. A slow client costs the front a buffer, never a worker: a scrape never waits
// behind one. Slow readers likewise: the front takes the whole answer from civetweb at once.
//
// The front also owns what faces the network, so that civetweb's build does not decide it:
// IPv6 and IPv4 (Debian's civetweb has no IPv6; the front's socket is dual-stack), and TLS
// (the web config's tls_server_config, OpenSSL in non-blocking mode on the same epoll loop: the
// handshake is part of the request head and shares its deadline). civetweb stays on 127.0.0.1
// in clear text, reachable from this host only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "exporter/listen_address.h"
#include "exporter/web_security.h"

namespace polyaccel::exporter {

// What the front makes of the bytes a client sent so far (pure; tests/fuzz/http_request_head.cc).
struct RequestHead {
  enum class State { incomplete, complete, refused };
  State state = State::incomplete;
  std::size_t size = 0;  // complete: the head's length, its blank line included
  int status = 0;        // refused: the HTTP status to answer (400, 405, 431)
  std::string_view reason;
};
inline constexpr std::size_t kMaxRequestHeadBytes = 16 * 1024;
// The header the front puts first in every head it hands civetweb: the client's address in hex
// (a client's own copy comes after it, and civetweb's mg_get_header takes the first), so that
// password checks can be bounded per client (web_security.h).
inline constexpr const char* kClientHeader = "X-Polyaccel-Client";
// Only GET and HEAD without a body: a body would hold a civetweb worker while it trickles in,
// and /metrics and /healthz take none.
RequestHead read_request_head(std::string_view received);

struct HttpFrontOptions {
  // A client must send its whole request head within this, from connecting (or from its
  // previous answer); else it is closed.
  std::chrono::milliseconds head_timeout{3000};
  // An answer must reach the client within this; else the connection is closed.
  std::chrono::milliseconds answer_timeout{30000};
  // Connections held at once; past it the oldest still sending its head is closed.
  std::size_t max_connections = 4096;
  // Connections from one client address (IPv4-mapped IPv6 counts as the IPv4 address); past it
  // that client's oldest connection still sending its head is closed, else the new one. One
  // client, however many sockets it opens, holds at most this share of max_connections.
  std::size_t max_connections_per_client = 64;
  // TLS and the web config's reload (null: clear text, nothing to reload).
  std::shared_ptr<WebSecurity> security;
};

class HttpFront {
 public:
  // Serves `listen_fd` (open_listen_socket's; the front owns it), passing requests to civetweb
  // on 127.0.0.1:`backend_port`.
  static Result<std::unique_ptr<HttpFront>> start(int listen_fd, int backend_port,
                                                  HttpFrontOptions options);
  ~HttpFront();  // stops the thread and closes every connection
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  int port() const;

 private:
  HttpFront() = default;
  void run();

  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: the destructor's stop signal
  int backend_port_ = 0;
  HttpFrontOptions options_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace polyaccel::exporter
