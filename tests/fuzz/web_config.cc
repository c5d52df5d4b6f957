// parse_web_config: `agent --web-config-file` (exporter-toolkit's web configuration format). It
// never throws; a refusal names the file (with its line where it has one) and never a secret (an
// inline key, a password hash); what it takes is whole: exactly one certificate and one key
// source with TLS, a bcrypt hash per user, files resolved beside the web config, headers without
// control characters, min_version not above max_version.
#include "exporter/web_config.h"
#include "fuzz_support.h"

#include <algorithm>

using polyaccel::exporter::parse_web_config;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = "/fuzz/web.yml";
  std::string input = polyaccel::fuzz::as_string(data, size);
  auto config = parse_web_config(input, path);
  if (!config) {
    std::string message = config.error().message();
    POLYACCEL_FUZZ_CHECK(config.error().code == polyaccel::ErrorCode::bad_input);
    POLYACCEL_FUZZ_CHECK(message.find(path) != std::string::npos);
    POLYACCEL_FUZZ_CHECK(message.find("PRIVATE KEY") == std::string::npos);
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
