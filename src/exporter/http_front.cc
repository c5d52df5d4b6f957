#include "exporter/http_front.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/agent_parts.h"

namespace polyaccel::exporter {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxAnswerBytes = std::size_t{256} << 20;  // far above any /metrics
constexpr auto kSweepEvery = std::chrono::milliseconds(100);
// How often the web config's files are looked at (a stat each); a rotated certificate is in use
// this long after it is written at most.
constexpr auto kReloadCheckEvery = std::chrono::seconds(1);

bool equals_lower(std::string_view text, std::string_view lower) {
  if (text.size() != lower.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

RequestHead refuse(int status, std::string_view reason) {
  RequestHead r;
  r.state = RequestHead::State::refused;
  r.status = status;
  r.reason = reason;
  return r;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

RequestHead read_request_head(std::string_view received) {
  // The head ends at the first empty line: a line end followed by "\n" or "\r\n", where
  // civetweb's get_http_header_len ends it ("\r\n\r\n", "\n\n", "\n\r\n").
  std::size_t end = std::string_view::npos;
  for (std::size_t i = received.find('\n'); i != std::string_view::npos;
       i = received.find('\n', i + 1)) {
    std::size_t next = i + 1;
    if (next < received.size() && received[next] == '\n') {
      end = next + 1;
      break;
    }
    if (next + 1 < received.size() && received[next] == '\r' && received[next + 1] == '\n') {
      end = next + 2;
      break;
    }
  }
  if (end == std::string_view::npos) {
    if (received.size() >= kMaxRequestHeadBytes) return refuse(431, "request head too large");
    return {};
  }
  if (end > kMaxRequestHeadBytes) return refuse(431, "request head too large");
  std::string_view head = received.substr(0, end);
  if (head.find('\0') != std::string_view::npos) return refuse(400, "bad request");
  std::size_t line_end = head.find('\n');
  // Strict: "METHOD SP TARGET SP HTTP/1.x", nothing before the method (civetweb would skip
  // leading blanks; the invariant of tests/fuzz/http_request_head.cc holds us to the method).
  std::string_view line = head.substr(0, line_end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::size_t sp1 = line.find(' ');
  std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return refuse(400, "bad request line");
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || target.empty() || target.front() != '/' || !version.starts_with("HTTP/1."))
    return refuse(400, "bad request line");
  if (method != "GET" && method != "HEAD") return refuse(405, "method not allowed");
  // A body (Content-Length > 0, Transfer-Encoding) is refused: it would hold a worker.
  std::string_view rest = head.substr(line_end + 1);
  while (!rest.empty()) {
    std::size_t nl = rest.find('\n');
    std::string_view field = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    std::size_t colon = field.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = trim(field.substr(0, colon));
    std::string_view value = trim(field.substr(colon + 1));
    if (equals_lower(name, "transfer-encoding")) return refuse(400, "a request body is refused");
    if (equals_lower(name, "content-length") && value != "0")
      return refuse(400, "a request body is refused");
  }
  RequestHead r;
  r.state = RequestHead::State::complete;
  r.size = end;
  return r;
}

namespace {

// One client connection and, once its head is complete, the connection to civetweb for it.
struct Connection {
  int client = -1;
  int backend = -1;
  SSL* ssl = nullptr;                     // with TLS: the session on `client`
  std::shared_ptr<const TlsContext> tls;  // what `ssl` was made from (its verify callback's data)
  std::string peer;                       // the client's address, 4 or 16 bytes
  bool relaying = false;                  // the head went (or a refusal goes) out; now answering
  bool backend_connected = false;         // the non-blocking connect finished
  bool answer_done = false;               // civetweb closed: all of the answer is in to_client
  bool closing = false;      // all sent and our side shut: waiting for the client's EOF
  bool head_marked = false;  // the answer's head says `Connection: close` (or is sent as is)
  std::string received;      // the client's bytes while its head is incomplete
  std::string to_backend, to_client;
  std::size_t to_backend_sent = 0, to_client_sent = 0;
  Clock::time_point deadline;
};

// Whether an answer's head (status line and fields, without the blank line) has a Connection field.
bool has_connection_field(std::string_view head) {
  for (std::size_t at = head.find("\r\n"); at != std::string_view::npos;
       at = head.find("\r\n", at + 2)) {
    std::string_view field = head.substr(at + 2, 11);
    if (equals_lower(field, "connection:")) return true;
  }
  return false;
}

// Sends what is left of `buffer` on a non-blocking socket; false on a failure other than "later".
bool flush(int fd, const std::string& buffer, std::size_t& sent) {
  while (sent < buffer.size()) {
    ssize_t n = ::send(fd, buffer.data() + sent, buffer.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

// Reads what is there; appends it to `into` (at most `limit` bytes in all) unless null. Returns
// false at EOF, on a failure or past the limit.
bool drain(int fd, std::string* into, std::size_t limit) {
  char chunk[16384];
  for (;;) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      if (into) {
        std::size_t room = limit - std::min(limit, into->size());
        into->append(chunk, std::min(room, static_cast<std::size_t>(n)));
        if (static_cast<std::size_t>(n) > room) return false;  // past the limit
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

// flush and drain for a client connection: through its TLS session when it has one. OpenSSL's
// "want read" and "want write" are "later": the socket is registered for both directions
// (edge-triggered), and every event on it retries both.
bool flush_client(Connection& c) {
  if (!c.ssl) return flush(c.client, c.to_client, c.to_client_sent);
  while (c.to_client_sent < c.to_client.size()) {
    ERR_clear_error();
    std::size_t left = std::min<std::size_t>(c.to_client.size() - c.to_client_sent, 1 << 30);
    int n = SSL_write(c.ssl, c.to_client.data() + c.to_client_sent, static_cast<int>(left));
    if (n > 0) {
      c.to_client_sent += static_cast<std::size_t>(n);
      continue;
    }
    int err = SSL_get_error(c.ssl, n);
    return err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ;
  }
  return true;
}

bool drain_client(Connection& c, std::string* into, std::size_t limit) {
  if (!c.ssl) return drain(c.client, into, limit);
  char chunk[16384];
  for (;;) {
    ERR_clear_error();
    int n = SSL_read(c.ssl, chunk, sizeof chunk);
    if (n > 0) {
      if (into) {
        std::size_t room = limit - std::min(limit, into->size());
        into->append(chunk, std::min(room, static_cast<std::size_t>(n)));
        if (static_cast<std::size_t>(n) > room) return false;
      }
      continue;
    }
    int err = SSL_get_error(c.ssl, n);
    // A failed handshake (no or a refused client certificate, a plain-HTTP client, an old
    // protocol) ends here too: the connection is closed, and nothing is logged for it.
    return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;
  }
}

std::string hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

// The client's address as bytes: an IPv4 client of the dual-stack socket (::ffff:a.b.c.d) is
// the same client as over IPv4.
std::string peer_key(const sockaddr_storage& sa) {
  if (sa.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(sa);
    return std::string(reinterpret_cast<const char*>(&v4.sin_addr), 4);
  }
  if (sa.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(sa);
    if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr))
      return std::string(reinterpret_cast<const char*>(&v6.sin6_addr) + 12, 4);
    return std::string(reinterpret_cast<const char*>(&v6.sin6_addr), 16);
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<HttpFront>> HttpFront::start(int listen_fd, int backend_port,
                                                    HttpFrontOptions options) {
  std::unique_ptr<HttpFront> front(new HttpFront());
  front->listen_fd_ = listen_fd;
  front->backend_port_ = backend_port;
  front->options_ = options;
  front->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  front->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (front->epoll_fd_ < 0 || front->wake_fd_ < 0)
    return Error{ErrorCode::io, "agent HTTP server", std::strerror(errno), {}};
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered: accept until the queue is empty, come back for more
  ev.data.u64 = 0;
  ::epoll_ctl(front->epoll_fd_, EPOLL_CTL_ADD, listen_fd, &ev);
  ev.data.u64 = 1;
  ::epoll_ctl(front->epoll_fd_, EPOLL_CTL_ADD, front->wake_fd_, &ev);
  front->thread_ = std::thread([f = front.get()] { run_part("http-front", [f] { f->run(); }); });
  return front;
}

HttpFront::~HttpFront() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

int HttpFront::port() const {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return 0;
  if (sa.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
}

void HttpFront::run() {
  // epoll's u64: 0 the listener, 1 the stop signal, else 2 * id + (1 for the civetweb side).
  std::unordered_map<std::uint64_t, Connection> connections;
  std::unordered_map<std::string, std::size_t> per_client;  // peer → connections held
  std::uint64_t next_id = 1;
  auto close_connection = [&](std::uint64_t id) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    Connection& c = it->second;
    if (c.backend >= 0) ::close(c.backend);
    if (c.ssl) SSL_free(c.ssl);
    ::close(c.client);
    if (auto p = per_client.find(c.peer); p != per_client.end() && --p->second == 0)
      per_client.erase(p);
    connections.erase(it);
  };
  // Sends what civetweb answered; the connection ends once all of it is out.
  auto to_client = [&](std::uint64_t id, Connection& c) {
    if (!c.head_marked) {
      // Every connection ends after one answer, and HTTP/1.1 clients (Python's http.client, Go
      // between retries) take an answer without `Connection: close` as keep-alive and send the
      // next request into a closing socket. civetweb's own answers (404) carry it; this is for any
      // that does not.
      std::size_t head_end = c.to_client.find("\r\n\r\n");
      if (head_end == std::string::npos && !c.answer_done) return;  // the head is not in yet
      c.head_marked = true;
      std::size_t status_end = c.to_client.find("\r\n");
      if (head_end != std::string::npos && status_end != std::string::npos &&
          !has_connection_field(std::string_view(c.to_client).substr(0, head_end)))
        c.to_client.insert(status_end + 2, "Connection: close\r\n");
    }
    if (!flush_client(c)) return close_connection(id);
    if (c.answer_done && c.to_client_sent == c.to_client.size() && !c.closing) {
      // Closing with unread bytes (the rest of an oversized head, a pipelined request) would
      // send a reset that can destroy the answer before the client reads it: shut our side,
      // read until the client closes, for a short while at most.
      if (c.ssl) {
        ERR_clear_error();
        SSL_shutdown(c.ssl);  // close_notify; the client's own is not waited for
      }
      ::shutdown(c.client, SHUT_WR);
      c.closing = true;
      c.deadline = std::min(c.deadline, Clock::now() + std::chrono::seconds(2));
      if (!drain(c.client, nullptr, 0)) close_connection(id);
    }
  };
  auto answer_refusal = [&](std::uint64_t id, Connection& c, const RequestHead& head) {
    std::string body = std::string(head.reason) + "\n";
    c.to_client = "HTTP/1.1 " + std::to_string(head.status) + " " + std::string(head.reason) +
                  "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    c.relaying = true;
    c.answer_done = true;
    c.head_marked = true;
    c.received.clear();
    to_client(id, c);
  };
  auto open_backend = [&](std::uint64_t id, Connection& c, std::size_t head_size) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return close_connection(id);
    set_nodelay(fd);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<std::uint16_t>(backend_port_));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
      ::close(fd);
      return close_connection(id);
    }
    c.backend = fd;
    c.relaying = true;
    // Only the head goes on: civetweb serves one request per connection (keep-alive off).
    c.to_backend = c.received.substr(0, head_size);
    std::size_t line_end = c.to_backend.find('\n');  // a complete head has its request line
    if (line_end != std::string::npos)
      c.to_backend.insert(line_end + 1, std::string(kClientHeader) + ": " + hex(c.peer) + "\r\n");
    c.received.clear();
    c.deadline = Clock::now() + options_.answer_timeout;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = 2 * id + 1;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  };
  auto on_client = [&](std::uint64_t id, std::uint32_t events) {
    Connection& c = connections.at(id);
    if (!c.relaying) {
      bool open = drain_client(c, &c.received, kMaxRequestHeadBytes + 1);
      RequestHead head = read_request_head(c.received);
      if (head.state == RequestHead::State::complete) return open_backend(id, c, head.size);
      if (head.state == RequestHead::State::refused) return answer_refusal(id, c, head);
      if (!open || (events & (EPOLLERR | EPOLLHUP))) return close_connection(id);
      return;
    }
    // Answering: what the client sends now (pipelined requests) is not served. Once our side
    // is shut, only the client's EOF is waited for: its bytes are dropped without TLS.
    bool open = c.closing ? drain(c.client, nullptr, 0) : drain_client(c, nullptr, 0);
    if (events & (EPOLLERR | EPOLLHUP)) return close_connection(id);
    if (c.closing) {
      if (!open) close_connection(id);
      return;
    }
    to_client(id, c);
  };
  auto on_backend = [&](std::uint64_t id, std::uint32_t events) {
    Connection& c = connections.at(id);
    if (!c.backend_connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(c.backend, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return close_connection(id);
      c.backend_connected = true;
    }
    if (!c.backend_connected) return;
    if (!flush(c.backend, c.to_backend, c.to_backend_sent)) return close_connection(id);
    if (!drain(c.backend, &c.to_client, kMaxAnswerBytes)) {
      if (c.to_client.size() > kMaxAnswerBytes) return close_connection(id);
      c.answer_done = true;
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.backend, nullptr);
      ::close(c.backend);
      c.backend = -1;
    }
    to_client(id, c);
  };
  // Past max_connections the oldest connection still sending its head goes (of `peer` only,
  // when given: past max_connections_per_client).
  auto evict_oldest_incomplete = [&](const std::string* peer = nullptr) -> bool {
    auto oldest = connections.end();
    for (auto it = connections.begin(); it != connections.end(); ++it) {
      if (it->second.relaying) continue;
      if (peer && it->second.peer != *peer) continue;
      if (oldest == connections.end() || it->second.deadline < oldest->second.deadline) oldest = it;
    }
    if (oldest == connections.end()) return false;
    close_connection(oldest->first);
    return true;
  };
  auto accept_all = [&] {
    for (;;) {
      sockaddr_storage address{};
      socklen_t address_size = sizeof address;
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&address), &address_size,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if ((errno == EMFILE || errno == ENFILE) && evict_oldest_incomplete()) continue;
        return;
      }
      std::string peer = peer_key(address);
      auto held = per_client.find(peer);
      if (held != per_client.end() && held->second >= options_.max_connections_per_client &&
          !evict_oldest_incomplete(&peer)) {
        ::close(fd);
        continue;
      }
      if (connections.size() >= options_.max_connections && !evict_oldest_incomplete()) {
        ::close(fd);
        continue;
      }
      SSL* ssl = nullptr;
      std::shared_ptr<const TlsContext> tls;
      if (options_.security && options_.security->tls()) {
        tls = options_.security->tls_context();  // the newest: a rotated certificate from now on
        ssl = SSL_new(tls->ctx);
        if (!ssl || SSL_set_fd(ssl, fd) != 1) {
          if (ssl) SSL_free(ssl);
          ERR_clear_error();
          ::close(fd);
          continue;
        }
        SSL_set_accept_state(ssl);
      }
      set_nodelay(fd);
      std::uint64_t id = next_id++;
      Connection& c = connections[id];
      c.client = fd;
      c.ssl = ssl;
      c.tls = std::move(tls);
      c.peer = peer;
      ++per_client[peer];
      c.deadline = Clock::now() + options_.head_timeout;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
      ev.data.u64 = 2 * id;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    }
  };

  auto last_sweep = Clock::now();
  auto last_reload_check = last_sweep;
  epoll_event events[256];
  while (!stop_) {
    int n = ::epoll_wait(epoll_fd_, events, 256, static_cast<int>(kSweepEvery.count()));
    for (int i = 0; i < n && !stop_; ++i) {
      std::uint64_t key = events[i].data.u64;
      if (key == 0) {
        accept_all();
        continue;
      }
      if (key == 1) continue;  // stop_ is set
      std::uint64_t id = key / 2;
      if (!connections.count(id)) continue;  // closed by an earlier event of this batch
      if (key % 2) {
        on_backend(id, events[i].events);
      } else {
        on_client(id, events[i].events);
      }
    }
    auto now = Clock::now();
    if (now - last_sweep >= kSweepEvery) {
      last_sweep = now;
      std::vector<std::uint64_t> expired;
      for (const auto& [id, c] : connections) {
        if (c.deadline <= now) expired.push_back(id);
      }
      for (auto id : expired)
        close_connection(id);
    }
    if (options_.security && now - last_reload_check >= kReloadCheckEvery) {
      last_reload_check = now;
      options_.security->reload_if_changed();
    }
  }
  for (auto& [id, c] : connections) {
    if (c.backend >= 0) ::close(c.backend);
    if (c.ssl) SSL_free(c.ssl);
    ::close(c.client);
  }
}

}  // namespace polyaccel::exporter
