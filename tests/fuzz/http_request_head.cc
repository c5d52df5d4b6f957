// read_request_head: the agent's HTTP front (src/exporter/http_front.h) on the bytes a client sent
// so far. A complete head ends at its first blank line, fits the limit, and reads the same alone
// (what follows it is not its business); a shorter prefix is never complete; a refusal carries
// 400, 405 or 431; an incomplete head is under the limit.
#include "exporter/http_front.h"
#include "fuzz_support.h"

using polyaccel::exporter::kMaxRequestHeadBytes;
using polyaccel::exporter::read_request_head;
using State = polyaccel::exporter::RequestHead::State;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string input = polyaccel::fuzz::as_string(data, size);
  auto head = read_request_head(input);
  switch (head.state) {
    case State::incomplete:
      POLYACCEL_FUZZ_CHECK(input.size() < kMaxRequestHeadBytes);
      break;
    case State::refused:
      POLYACCEL_FUZZ_CHECK(head.status == 400 || head.status == 405 || head.status == 431);
      POLYACCEL_FUZZ_CHECK(!head.reason.empty());
      break;
    case State::complete: {
      POLYACCEL_FUZZ_CHECK(head.size >= 2 && head.size <= input.size());
      POLYACCEL_FUZZ_CHECK(head.size <= kMaxRequestHeadBytes);
      std::string_view text(input.data(), head.size);
      // A blank line after a line end: "\n\n" or "\n\r\n" (civetweb's own test, so that both
      // agree on where a head ends), which covers "\r\n\r\n".
      POLYACCEL_FUZZ_CHECK(text.ends_with("\n\n") || text.ends_with("\n\r\n"));
      POLYACCEL_FUZZ_CHECK(text.starts_with("GET ") || text.starts_with("HEAD "));
      auto alone = read_request_head(text);
      POLYACCEL_FUZZ_CHECK(alone.state == State::complete && alone.size == head.size);
      auto shorter = read_request_head(text.substr(0, head.size - 1));
      POLYACCEL_FUZZ_CHECK(shorter.state != State::complete);
      break;
    }
  }
  return 0;
}
