// local_rank_from_environment and slurm_tasks_on_node: what torchrun, Open MPI, MPICH and Slurm
// leave in a rank's environment (`polyaccel run` reads it). The input is the environment, one
// NAME=value per line; a value may be anything a launcher or a user's script could export.
#include <map>

#include "fuzz_support.h"
#include "launch/local_rank.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text = polyaccel::fuzz::as_string(data, size);
  std::map<std::string, std::string> environment;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    std::size_t equals = line.find('=');
    if (equals != std::string::npos) environment[line.substr(0, equals)] = line.substr(equals + 1);
  }
  auto rank = polyaccel::local_rank_from_environment(
      [&](const std::string& name) -> std::optional<std::string> {
        auto found = environment.find(name);
        if (found == environment.end()) return std::nullopt;
        return found->second;
      });
  if (rank && *rank) {
    // A rank is below its launcher's own local size, and says which variable it came from.
    POLYACCEL_FUZZ_CHECK(!(*rank)->world || (*rank)->rank < *(*rank)->world);
    POLYACCEL_FUZZ_CHECK(environment.count((*rank)->source) == 1);
  } else if (!rank) {
    POLYACCEL_FUZZ_CHECK(!rank.error().message().empty());
  }
  for (const char* variable : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    auto found = environment.find(variable);
    if (found == environment.end()) continue;
    for (unsigned node : {0u, 1u, 7u, 4'000'000'000u}) {
      auto count = polyaccel::slurm_tasks_on_node(found->second, node);
      POLYACCEL_FUZZ_CHECK(!count || *count <= 1'000'000);
    }
  }
  return 0;
}
