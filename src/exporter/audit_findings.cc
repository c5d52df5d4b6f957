// The tuning audit (src/audit) as a gauge per finding id and severity, every known id present
// (0 when clean) so that an alert can name it. The host sampler runs the audit at its own slow
// interval (it reads many files); a scrape only publishes the last run.
#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

class AuditFindingsCollector : public Collector {
 public:
  std::string name() const override { return "audit"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    const AuditSample& s = *in.host->audit;
    if (s.time.time_since_epoch().count() == 0) return Ok{};  // not run (yet, or disabled)
    auto findings = family("polyaccel_audit_findings",
                           "Findings of the tuning audit per id and severity (polyaccel audit).",
                           MetricType::Gauge);
    auto last = family("polyaccel_audit_last_run_timestamp_seconds",
                       "When the tuning audit last ran.", MetricType::Gauge);
    auto duration = family("polyaccel_audit_duration_seconds",
                           "How long the last tuning audit took.", MetricType::Gauge);
    auto checked = family("polyaccel_audit_check_ran",
                          "1 when the check ran, 0 when it could not for lack of a fact (a "
                          "file the host or capture lacks): its findings then say nothing.",
                          MetricType::Gauge);
    for (const auto& id : s.ids) {
      for (Severity severity : {Severity::critical, Severity::warning, Severity::info}) {
        auto it = s.counts.find({id, severity});
        add_sample(findings, {{"id", id}, {"severity", to_string(severity)}},
                   it == s.counts.end() ? 0 : it->second);
      }
    }
    for (const auto& id : s.ids) {
      if (id == "audit.limits") continue;  // the audit's own notes, no check of the host
      add_sample(checked, {{"id", id}}, s.unchecked.count(id) ? 0 : 1);
    }
    add_sample(last, {}, std::chrono::duration<double>(s.time.time_since_epoch()).count());
    add_sample(duration, {}, s.duration_seconds);
    emit(out, {&findings, &checked, &last, &duration});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_audit_findings_collector() {
  return std::make_unique<AuditFindingsCollector>();
}

}  // namespace polyaccel::exporter
