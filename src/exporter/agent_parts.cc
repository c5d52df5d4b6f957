// The agent's parts (core/agent_parts.h): whether each thread's work is running and how often it
// failed, so that an alert sees a part that stopped while the others (this exporter among them)
// go on.
#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

class AgentPartsCollector : public Collector {
 public:
  std::string name() const override { return "agent_parts"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    auto up = family("polyaccel_agent_part_up",
                     "1 while the part's thread runs its work, 0 once that work failed (an "
                     "exception; the agent's /healthz then fails).",
                     MetricType::Gauge);
    auto failures = family("polyaccel_agent_part_failures_total",
                           "Times the part's work failed with an exception.", MetricType::Counter);
    for (const auto& p : in.parts) {
      add_sample(up, {{"part", p.name}}, p.up ? 1 : 0);
      add_sample(failures, {{"part", p.name}}, static_cast<double>(p.failures));
    }
    emit(out, {&up, &failures});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_agent_parts_collector() {
  return std::make_unique<AgentPartsCollector>();
}

}  // namespace polyaccel::exporter
