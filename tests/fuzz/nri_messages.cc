// The NRI plugin's input: the runtime's trunk (nri/ttrpc.h MessageReader, fed in pieces) and the
// container environments the CPU policy reads (nri/cpu_policy.h claimed_cpus). Every message
// read encodes back to bytes that read as the same message; memory stays bounded; a claim is
// either refused with our Error or within the node's CPUs and nodes; a hugepage limit is only
// ever lowered, never above what the claimed nodes hold.
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
  // Each line as a hugepage size the runtime names, with a limit from the input's first bytes.
  nri::ContainerView view{"c", "ns/p/c", env, ""};
  std::uint64_t asked = 0;
  for (std::size_t i = 0; i < size && i < 8; ++i)
    asked = asked << 8 | data[i];
  for (const auto& line : env) {
    if (auto bytes = nri::page_size_bytes(line))
      POLYACCEL_FUZZ_CHECK(*bytes >= 1024 && *bytes <= (std::uint64_t{1} << 40));
    view.hugepage_limits.push_back({line, asked});
  }
  const nri::NodeHugepages pages = {{0, {{2u << 20, 64u << 20}}}, {3, {{2u << 20, ~0ull}}}};
  nri::CpuPolicy policy(online, nodes);
  std::vector<std::string> problems;
  auto created = policy.create(view, problems, pages);
  if (created.adjust)
    for (const auto& h : created.adjust->hugepages)
      POLYACCEL_FUZZ_CHECK(h.limit < asked);
  return 0;
}
