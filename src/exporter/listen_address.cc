#include "exporter/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/strings.h"

namespace polyaccel::exporter {
namespace {

constexpr const char* kForms =
    "write PORT, :PORT, IPv4:PORT or [IPv6]:PORT, e.g. :9477, 127.0.0.1:9477 or [::1]:0";

}  // namespace

std::string ListenAddress::to_string() const {
  std::string port_text = std::to_string(port);
  if (host.empty()) return ":" + port_text;
  return (ipv6 ? "[" + host + "]" : host) + ":" + port_text;
}

Result<ListenAddress> parse_listen_address(const std::string& text) {
  const std::string input = "--listen " + text;
  ListenAddress a;
  std::string port_text;
  if (text.empty()) return bad_input(input, "is empty", kForms);
  if (text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad_input(input, "an IPv6 address needs brackets and a port", kForms);
    }
    a.host = text.substr(1, close - 1);
    a.ipv6 = true;
    port_text = text.substr(close + 2);
    in6_addr v6{};
    if (::inet_pton(AF_INET6, a.host.c_str(), &v6) != 1) {
      return bad_input(input, "'" + a.host + "' is not an IPv6 address", kForms);
    }
  } else if (auto colon = text.rfind(':'); colon != std::string::npos) {
    a.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (a.host == "*") a.host.clear();
    if (a.host.find(':') != std::string::npos) {
      return bad_input(input, "an IPv6 address needs brackets", "write [" + a.host + "]:PORT");
    }
    in_addr v4{};
    if (!a.host.empty() && ::inet_pton(AF_INET, a.host.c_str(), &v4) != 1) {
      return bad_input(input, "'" + a.host + "' is not an IP address (names are not resolved)",
                       kForms);
    }
  } else {
    port_text = text;
  }
  auto port = parse_count(port_text);
  if (!port) return bad_input(input, "'" + port_text + "' is not a port number", kForms);
  if (*port > 65535) {
    return bad_input(input, "port " + port_text + " is out of range (0-65535; 0 picks a free one)");
  }
  a.port = *port;
  if (a.host.empty()) a.ipv6 = true;  // every address: dual-stack (open_listen_socket)
  return a;
}

Result<int> open_listen_socket(const ListenAddress& address, const std::string& option_text) {
  int family = address.ipv6 ? AF_INET6 : AF_INET;
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 && errno == EAFNOSUPPORT && address.ipv6 && address.host.empty()) {
    // A kernel without IPv6: every address is every IPv4 address.
    ListenAddress v4 = address;
    v4.ipv6 = false;
    return open_listen_socket(v4, option_text);
  }
  if (fd < 0) {
    return bad_input("--listen " + option_text,
                     std::string("cannot listen: ") + std::strerror(errno));
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = 0;
  if (address.ipv6) {
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(static_cast<std::uint16_t>(address.port));
    if (address.host.empty()) {
      sa.sin6_addr = in6addr_any;
      int zero = 0;  // dual-stack: IPv4 clients arrive as ::ffff:a.b.c.d
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    } else {
      ::inet_pton(AF_INET6, address.host.c_str(), &sa.sin6_addr);
    }
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  } else {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<std::uint16_t>(address.port));
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (!address.host.empty()) ::inet_pton(AF_INET, address.host.c_str(), &sa.sin_addr);
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  }
  if (rc == 0) rc = ::listen(fd, SOMAXCONN);
  int err = errno;
  if (rc == 0) return fd;
  ::close(fd);
  if (address.ipv6 && address.host.empty() && (err == EADDRNOTAVAIL || err == EAFNOSUPPORT)) {
    // IPv6 turned off (disable_ipv6 in a container): every address is every IPv4 address.
    ListenAddress v4 = address;
    v4.ipv6 = false;
    return open_listen_socket(v4, option_text);
  }
  std::string remedy = err == EADDRINUSE      ? "another process listens there; pick another port"
                       : err == EADDRNOTAVAIL ? "not an address of this host (ip -br addr)"
                       : err == EACCES        ? "ports below 1024 need CAP_NET_BIND_SERVICE"
                                              : "";
  return bad_input("--listen " + option_text, std::string("cannot listen: ") + std::strerror(err),
                   remedy);
}

Status check_can_listen(const ListenAddress& address, const std::string& option_text) {
  auto fd = open_listen_socket(address, option_text);
  if (!fd) return fd.error();
  ::close(*fd);
  return Ok{};
}

}  // namespace polyaccel::exporter
