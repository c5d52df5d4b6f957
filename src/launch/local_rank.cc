#include "launch/local_rank.h"

#include <cstdint>
#include <vector>

#include "core/number.h"
#include "core/strings.h"

namespace polyaccel {

namespace {

struct Launcher {
  const char* name;
  const char* rank_variable;
  const char* size_variable;  // nullptr: Slurm's, read otherwise
};

// Innermost first (see the header).
constexpr Launcher kLaunchers[] = {
    {"torchrun", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_LOCALID", nullptr},
};

// A launcher's count: ranks, tasks, node ids.
Result<unsigned> whole(const std::string& variable, const std::string& value) {
  return parse_integer<unsigned>(value, variable, 0, 1'000'000);
}

// The tasks of this step on this node: SLURM_STEP_TASKS_PER_NODE (srun) by SLURM_NODEID, else
// SLURM_TASKS_PER_NODE, else SLURM_NTASKS_PER_NODE.
Result<std::optional<std::pair<unsigned, std::string>>> slurm_size(const EnvLookup& env) {
  unsigned node = 0;
  if (auto id = env("SLURM_NODEID")) {
    auto n = whole("SLURM_NODEID", *id);
    if (!n) return n.error();
    node = *n;
  }
  for (const char* v : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (auto text = env(v)) {
      auto count = slurm_tasks_on_node(*text, node);
      if (!count || *count == 0) {
        return bad_input(std::string(v) + "=" + *text,
                         "has no task count for node " + std::to_string(node) + " (SLURM_NODEID)");
      }
      return std::optional(std::pair(*count, std::string(v)));
    }
  }
  if (auto text = env("SLURM_NTASKS_PER_NODE")) {
    auto n = whole("SLURM_NTASKS_PER_NODE", *text);
    if (!n) return n.error();
    if (*n == 0) return bad_input("SLURM_NTASKS_PER_NODE=0", "no task on this node");
    return std::optional(std::pair(*n, std::string("SLURM_NTASKS_PER_NODE")));
  }
  return std::optional<std::pair<unsigned, std::string>>();
}

}  // namespace

std::optional<unsigned> slurm_tasks_on_node(const std::string& text, unsigned node) {
  // Each item: COUNT or COUNT(xREPEAT). `at` counts nodes in 64 bits: an environment string may
  // hold some ten thousand items of a million nodes each.
  std::uint64_t at = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find(',', i);
    std::string item = text.substr(i, end == std::string::npos ? std::string::npos : end - i);
    i = end == std::string::npos ? text.size() : end + 1;
    std::string count_text = item, repeat_text = "1";
    if (auto open = item.find("(x"); open != std::string::npos) {
      if (item.back() != ')') return std::nullopt;
      count_text = item.substr(0, open);
      repeat_text = item.substr(open + 2, item.size() - open - 3);
    }
    auto count = parse_count(count_text);
    auto repeat = parse_count(repeat_text);
    if (!count || !repeat || *count > 1'000'000 || *repeat > 1'000'000) return std::nullopt;
    if (node < at + *repeat) return static_cast<unsigned>(*count);
    at += *repeat;
  }
  return std::nullopt;
}

Result<std::optional<LocalRank>> local_rank_from_environment(const EnvLookup& env) {
  std::vector<LocalRank> seen;
  for (const Launcher& l : kLaunchers) {
    auto value = env(l.rank_variable);
    if (!value) continue;
    auto rank = whole(l.rank_variable, *value);
    if (!rank) return rank.error();
    LocalRank r{*rank, std::nullopt, l.rank_variable};
    std::string size_name;
    if (l.size_variable) {
      if (auto size = env(l.size_variable)) {
        auto n = whole(l.size_variable, *size);
        if (!n) return n.error();
        if (*n == 0) return bad_input(std::string(l.size_variable) + "=0", "no rank on this node");
        r.world = *n;
        size_name = l.size_variable;
      }
    } else {
      auto size = slurm_size(env);
      if (!size) return size.error();
      if (*size) {
        r.world = (*size)->first;
        size_name = (*size)->second;
      }
    }
    if (r.world && r.rank >= *r.world) {
      return bad_input(std::string(l.rank_variable) + "=" + std::to_string(r.rank) + " with " +
                           size_name + "=" + std::to_string(*r.world),
                       std::string("the ") + l.name + " local rank is not below its local size");
    }
    seen.push_back(r);
  }
  if (seen.empty()) return std::optional<LocalRank>();
  // Open MPI and MPICH do not start each other: both set and different is a broken environment.
  const LocalRank* ompi = nullptr;
  const LocalRank* mpich = nullptr;
  for (const auto& r : seen) {
    if (r.source == "OMPI_COMM_WORLD_LOCAL_RANK") ompi = &r;
    if (r.source == "MPI_LOCALRANKID") mpich = &r;
  }
  if (ompi && mpich && ompi->rank != mpich->rank) {
    return bad_input("OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(ompi->rank) +
                         " and MPI_LOCALRANKID=" + std::to_string(mpich->rank),
                     "two MPI launchers disagree on this process's local rank",
                     "unset the variables of the launcher that did not start it");
  }
  return std::optional(seen.front());
}

}  // namespace polyaccel
