// The agent's parts: the work of each thread it starts (the monitor's, the exporter's front, the
// device plugin's, the DRA driver's, the partition manager's, NRI's), by name. Every such thread
// runs its work through run_part(), so that no exception leaves a thread of the agent: one would
// end in std::terminate and take every other part down with it (issue 40, item 1). A part whose
// work threw is down: said once in the log, in /healthz (503, naming it: kubelet's liveness probe
// restarts the agent in order) and in the metrics (polyaccel_agent_part_up 0,
// polyaccel_agent_part_failures_total), while the others go on.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace polyaccel {

struct AgentPart {
  std::string name;  // "monitor-nvml", "http-front", "dra-follower", ...
  bool up = true;    // false once its work threw (until it runs again)
  std::uint64_t failures = 0;
  std::string last_error;
};

// The parts that have run in this process, in name order.
std::vector<AgentPart> agent_parts();

// Runs `work` as part `name`; an exception it throws is caught, logged and recorded, never
// rethrown. When POLYACCEL_FAULT_PART names this part (tests only: "each thread's work throws"),
// the work is replaced by a throw.
void run_part(const std::string& name, const std::function<void()>& work) noexcept;

}  // namespace polyaccel
