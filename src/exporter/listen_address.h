// `agent --listen`: the address people write, checked here and translated into civetweb's
// listening_ports syntax, so that a bad address gets our words and not civetweb's "null context".
#pragma once

#include <string>

#include "core/error.h"

namespace polyaccel::exporter {

struct ListenAddress {
  std::string host;  // "" for every address (IPv6 and IPv4: dual-stack); else an IP literal
  bool ipv6 = false;
  unsigned port = 0;  // 0: the kernel picks a free port (logged by the agent)
  // civetweb's listening_ports value: "+9477", "127.0.0.1:9477", "[::1]:0".
  std::string civetweb_ports() const;
  std::string to_string() const;  // as people read it: ":9477", "[::1]:9477"
};

// Accepts PORT, :PORT, *:PORT, IPv4:PORT and [IPv6]:PORT (port 0-65535; 0 picks a free one).
Result<ListenAddress> parse_listen_address(const std::string& text, bool ipv6_supported);

// Binds a socket to the address and closes it: the reason (in use, not an address of this host,
// no permission) in the kernel's words, before civetweb would fail without one.
Status check_can_listen(const ListenAddress& address, const std::string& option_text);

// A non-blocking socket bound to the address and listening (the HTTP front's), or that reason.
Result<int> open_listen_socket(const ListenAddress& address, const std::string& option_text);

}  // namespace polyaccel::exporter
