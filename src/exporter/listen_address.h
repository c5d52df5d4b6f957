// `agent --listen`: the address people write, checked here. The agent's own front
// (http_front.h) listens on it, IPv4 or IPv6, so civetweb's build options (Debian's has no IPv6)
// do not matter: civetweb only ever listens on 127.0.0.1.
#pragma once

#include <string>

#include "core/error.h"

namespace polyaccel::exporter {

struct ListenAddress {
  std::string host;  // "" for every address (IPv6 and IPv4: dual-stack); else an IP literal
  bool ipv6 = false;
  unsigned port = 0;              // 0: the kernel picks a free port (logged by the agent)
  std::string to_string() const;  // as people read it: ":9477", "[::1]:9477"
};

// Accepts PORT, :PORT, *:PORT (every address, IPv6 and IPv4), IPv4:PORT and [IPv6]:PORT
// (port 0-65535; 0 picks a free one).
Result<ListenAddress> parse_listen_address(const std::string& text);

// Binds a socket to the address and closes it: the reason (in use, not an address of this host,
// no permission) in the kernel's words, before civetweb would fail without one.
Status check_can_listen(const ListenAddress& address, const std::string& option_text);

// A non-blocking socket bound to the address and listening (the HTTP front's), or that reason.
// Every address is one dual-stack IPv6 socket (IPV6_V6ONLY off, as Go's net.Listen for ":9100"
// in node_exporter); on a host without IPv6 (ipv6.disable=1) it is 0.0.0.0.
Result<int> open_listen_socket(const ListenAddress& address, const std::string& option_text);

}  // namespace polyaccel::exporter
