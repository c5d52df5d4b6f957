// Certificates for the agent's TLS tests, made by the openssl command in a test's temporary
// directory: a CA, a server certificate it signs for 127.0.0.1, ::1 and localhost, a client
// certificate it signs (SAN DNS:prometheus), and a self-signed client certificate no CA vouches
// for. EC P-256 keys: quick to make. Header-only, as test_support.h.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

#include "support/test_support.h"

namespace polyaccel::testing {

struct TestPki {
  std::filesystem::path dir;
  std::string ca_crt, ca_key;
  std::string server_crt, server_key;
  std::string client_crt, client_key;  // signed by the CA
  std::string rogue_crt, rogue_key;    // self-signed

  explicit TestPki(const std::filesystem::path& where) : dir(where) {
    ca_crt = file("ca.crt");
    ca_key = file("ca.key");
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "
        "/CN=polyaccel-test-ca -keyout '" +
        ca_key + "' -out '" + ca_crt + "'");
    issue("server", "agent-1", "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost");
    server_crt = file("server.crt");
    server_key = file("server.key");
    issue("client", "prometheus", "subjectAltName=DNS:prometheus");
    client_crt = file("client.crt");
    client_key = file("client.key");
    rogue_crt = file("rogue.crt");
    rogue_key = file("rogue.key");
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "
        "/CN=prometheus -addext subjectAltName=DNS:prometheus -keyout '" +
        rogue_key + "' -out '" + rogue_crt + "'");
  }

  // A certificate `name`.crt and key `name`.key signed by the CA, with subject CN `cn`.
  void issue(const std::string& name, const std::string& cn, const std::string& extension) const {
    std::string ext = file(name + ".ext");
    write_text(ext, extension + "\n");
    run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=" + cn +
        " -keyout '" + file(name + ".key") + "' -out '" + file(name + ".csr") + "'");
    run("openssl x509 -req -days 2 -in '" + file(name + ".csr") + "' -CA '" + ca_crt +
        "' -CAkey '" + ca_key + "' -CAcreateserial -extfile '" + ext + "' -out '" +
        file(name + ".crt") + "'");
  }

  std::string file(const std::string& name) const { return (dir / name).string(); }

 private:
  static void run(const std::string& command) {
    auto r = run_command(command + " 2>&1");
    if (r.exit_code != 0) throw std::runtime_error(command + ": " + r.output);
  }
};

}  // namespace polyaccel::testing
