// parse_web_config: `agent --web-config-file` (exporter-toolkit's web configuration format). It
// never throws; a refusal names the file (with its line where it has one) and never a secret (an
// inline key, a password hash); what it takes is whole: exactly one certificate and one key
// source with TLS, a bcrypt hash per user, files resolved beside the web config, headers without
// control characters, min_version not above max_version.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <vector>

#include "core/strings.h"
#include "exporter/web_config.h"
#include "fuzz_support.h"

using polyaccel::exporter::parse_web_config;

namespace {

// tls_server_config.key and the values of basic_auth_users, as yaml-cpp reads them.
std::vector<std::string> secrets_of(const std::string& input) {
  std::vector<std::string> secrets;
  try {
    const YAML::Node doc = YAML::Load(input);
    if (!doc.IsMap()) return secrets;
    const YAML::Node tls = doc["tls_server_config"];
    if (tls.IsMap() && tls["key"].IsScalar()) secrets.push_back(tls["key"].Scalar());
    const YAML::Node users = doc["basic_auth_users"];
    if (users.IsMap()) {
      for (const auto& user : users)
        if (user.second.IsScalar()) secrets.push_back(user.second.Scalar());
    }
  } catch (const std::exception&) {
  }
  return secrets;
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++n;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = "/fuzz/web.yml";
  std::string input = polyaccel::fuzz::as_string(data, size);
  auto config = parse_web_config(input, path);
  if (!config) {
    std::string message = config.error().message();
    POLYACCEL_FUZZ_CHECK(config.error().code == polyaccel::ErrorCode::bad_input);
    POLYACCEL_FUZZ_CHECK(message.find(path) != std::string::npos);
    // The secrets of the input (an inline key, the password hashes) never reach the message. A
    // value that occurs more than once in the input may be quoted for another key's sake; so may
    // one whose text also stands in the quoting of other input (printable() writes a raw byte as
    // \xNN, which a value can hold as text).
    const std::string shown = polyaccel::printable(input);
    for (const std::string& secret : secrets_of(input)) {
      if (secret.size() < 16 || count_of(input, secret) != 1) continue;
      if (count_of(shown, secret) > 1 || count_of(shown, polyaccel::printable(secret)) > 1)
        continue;
      // Nor one that our own words hold: a key "quireAnyClientCert" is in the message that names
      // RequireAnyClientCert. The input with the secret replaced by other bytes of its length
      // then gives a message that still shows it.
      std::string replaced = input;
      replaced.replace(replaced.find(secret), secret.size(), std::string(secret.size(), 'Z'));
      auto again = parse_web_config(replaced, path);
      if (!again && again.error().message().find(secret) != std::string::npos) continue;
      POLYACCEL_FUZZ_CHECK(message.find(secret) == std::string::npos);
      POLYACCEL_FUZZ_CHECK(message.find(polyaccel::printable(secret)) == std::string::npos);
    }
    return 0;
  }
  POLYACCEL_FUZZ_CHECK(!config->files.empty() && config->files.front() == path);
  for (const auto& f : config->files)
    POLYACCEL_FUZZ_CHECK(!f.empty() && f.front() == '/');
  if (config->tls) {
    const auto& t = config->tls_server;
    POLYACCEL_FUZZ_CHECK(t.cert_file.empty() != t.cert.empty());
    POLYACCEL_FUZZ_CHECK(t.key_file.empty() != t.key.empty());
    POLYACCEL_FUZZ_CHECK(t.min_version <= t.max_version);
  }
  for (const auto& [user, hash] : config->basic_auth_users) {
    POLYACCEL_FUZZ_CHECK(!user.empty() && user.find(':') == std::string::npos);
    POLYACCEL_FUZZ_CHECK(hash.size() == 60 && hash.starts_with("$2"));
  }
  for (const auto& [name, value] : config->headers) {
    POLYACCEL_FUZZ_CHECK(std::none_of(value.begin(), value.end(),
                                      [](unsigned char c) { return c < 0x20 || c == 0x7f; }));
  }
  if (config->rate_limit_interval.count() > 0) POLYACCEL_FUZZ_CHECK(config->rate_limit_burst > 0);
  return 0;
}
