// The NRI plugin's input: the runtime's trunk (nri/ttrpc.h MessageReader, fed in pieces) and the
// container environments the CPU policy reads (nri/cpu_policy.h claimed_cpus). Every message
// read encodes back to bytes that read as the same message; memory stays bounded; a claim is
// either refused with our Error or within the node's CPUs and nodes.
#include <sstream>

#include "fuzz_support.h"
#include "nri/cpu_policy.h"
#include "nri/ttrpc.h"

using namespace polyaccel;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input = fuzz::as_string(data, size);
  nri::MessageReader reader;
  std::vector<nri::TtrpcMessage> out;
  const std::size_t piece = size ? 1 + data[0] % 61 : 1;
  bool ok = true;
  for (std::size_t at = 0; at < input.size() && ok; at += piece)
    ok = bool(reader.feed(std::string_view(input).substr(at, piece), out));
  for (const auto& m : out) {
    POLYACCEL_FUZZ_CHECK(m.payload.size() <= nri::kTtrpcMaxPayload);
    nri::MessageReader again;
    std::vector<nri::TtrpcMessage> back;
    POLYACCEL_FUZZ_CHECK(again.feed(nri::encode_message(m), back));
    POLYACCEL_FUZZ_CHECK(back.size() == 1 && back[0].payload == m.payload &&
                         back[0].stream == m.stream && back[0].conn == m.conn);
  }
  std::vector<std::string> env;
  std::istringstream lines(input);
  for (std::string line; std::getline(lines, line);)
    env.push_back(line);
  const CpuSet online = *CpuSet::parse_list("0-63"), nodes = *CpuSet::parse_list("0-3");
  auto claimed = nri::claimed_cpus(env, online, nodes);
  if (claimed && *claimed) {
    POLYACCEL_FUZZ_CHECK(online.contains((*claimed)->cpus) && !(*claimed)->cpus.empty());
    POLYACCEL_FUZZ_CHECK(nodes.contains((*claimed)->mems));
  }
  return 0;
}
