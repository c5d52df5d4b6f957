// `polyaccel audit`: is this host tuned for accelerators, and how to fix it (docs/audit.md).
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "audit/remedy_files.h"
#include "cli/audit_view.h"
#include "cli/commands.h"
#include "cli/hugepage_options.h"
#include "core/byte_size.h"
#include "core/file_io.h"
#include "core/json.h"
#include "core/page_size.h"
#include "core/strings.h"
#include "discover/accel/backends.h"

namespace polyaccel::cli {

namespace fs = std::filesystem;

namespace {

const char* upper(Severity s) {
  switch (s) {
    case Severity::critical:
      return "CRITICAL";
    case Severity::warning:
      return "WARNING";
    case Severity::info:
      return "INFO";
  }
  return "INFO";
}

nlohmann::json remedy_json(const Remedy& r) {
  nlohmann::json runtime = nlohmann::json::array();
  for (const auto& w : r.runtime)
    runtime.push_back({{"path", "/" + w.path}, {"value", w.value}});
  return {{"summary", r.summary},   {"kernel_args", r.kernel_args},   {"sysctls", r.sysctls},
          {"modprobe", r.modprobe}, {"modules_load", r.modules_load}, {"systemd", r.systemd},
          {"runtime", runtime},     {"commands", r.commands}};
}

// Everything the command line asks for, checked: a bad value is an Error naming the option.
struct AuditRequest {
  std::string facts_root;
  DiscoverOptions discover;
  AuditIntent intent;
  std::vector<std::string> only;
  Severity fail_on = Severity::warning;
};

Result<AuditRequest> parse_request(const GlobalOptions& g, const AuditCommandOptions& o) {
  AuditRequest r;
  r.discover = g.discover;
  if (!o.root.empty()) {
    if (!g.discover.fsroot.empty()) return bad_input("--root", "give --root or --fsroot, not both");
    // The same check as --fsroot's, with or without --topology.
    if (auto root = check_fsroot(o.root); !root) {
      Error e = root.error();
      e.input = "--root " + e.input;  // the option too: --root, unlike --fsroot, is audit's own
      return e;
    }
    r.facts_root = o.root;
    // With --topology the model comes from the XML and only the facts from the root.
    if (g.discover.topology_xml.empty()) r.discover.fsroot = o.root;
  } else {
    r.facts_root = filesystem_root(g.discover);
  }
  auto known = all_finding_ids();
  for (const auto& id : o.only) {
    if (std::find(known.begin(), known.end(), id) == known.end()) {
      return bad_input("--only", "unknown check id '" + id + "'", "one of: " + join(known, ", "));
    }
  }
  r.only = o.only;
  auto fail_on = parse_severity(o.fail_on);
  if (!fail_on)
    return bad_input("--fail-on", "'" + o.fail_on + "' is not critical, warning or info");
  r.fail_on = *fail_on;
  if (o.role == "auto") {
    r.intent.role = HostRole::automatic;
  } else if (o.role == "hypervisor") {
    r.intent.role = HostRole::hypervisor;
  } else if (o.role == "compute") {
    r.intent.role = HostRole::compute;
  } else {
    return bad_input("--role", "'" + o.role + "' is not auto, hypervisor or compute");
  }
  if (!o.pinned_cpus.empty()) {
    auto cpus = CpuSet::parse_list(o.pinned_cpus);
    if (!cpus) return bad_input("--pinned-cpus", "'" + o.pinned_cpus + "' is not a CPU list");
    r.intent.pinned_cpus = *cpus;
  }
  for (const auto& bdf : o.passthrough) {
    auto a = PciAddress::parse(bdf);
    if (!a) return bad_input("--passthrough", "'" + bdf + "' is not a PCI address");
    r.intent.passthrough.push_back(*a);
  }
  auto hugepages = parse_hugepage_options(o.hugepages);
  if (!hugepages) return hugepages.error();
  r.intent.hugepage_size = hugepages->page_size;
  r.intent.hugepages_per_node_bytes = hugepages->per_node_bytes;
  return r;
}

struct AuditRun {
  HostModel model;
  TuningFacts facts;
  std::vector<AcceleratorSample> samples;
  std::vector<Finding> findings;
};

Result<AuditRun> audit_once(const AuditRequest& r) {
  auto model = discover_host(r.discover);
  if (!model) return model.error();
  AuditRun run{std::move(model).value(), read_tuning_facts(r.facts_root), {}, {}};
  run.samples = sample_accelerators(run.model);
  run.findings = run_audit({run.model, run.facts, run.samples, r.intent}, r.only);
  return run;
}

// Writes one sysfs/procfs value as the kernel wants it: one write(2) on the open file, no
// temporary file (sysfs attributes cannot be renamed over).
Status write_attribute(const fs::path& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Error{ErrorCode::io, path.string(), std::strerror(errno), "run as root"};
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return Error{ErrorCode::io, path.string(), n < 0 ? std::strerror(err) : "short write", ""};
  }
  return Ok{};
}

// One --fix at a time on a root: two could interleave their writes.
class FixLock {
 public:
  static Result<int> take(const std::string& root) {
    fs::path dir = fs::path(root) / "run/lock";
    std::error_code ec;
    fs::create_directories(dir, ec);
    fs::path path = dir / "polyaccel-audit.lock";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Error{ErrorCode::io, path.string(), std::strerror(errno), "run as root"};
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return Error{ErrorCode::io, path.string(), "another polyaccel audit --fix is running", ""};
    }
    return fd;
  }
};

struct FixOutcome {
  nlohmann::json applied = nlohmann::json::array();
  nlohmann::json failed = nlohmann::json::array();
  nlohmann::json pending = nlohmann::json::array();
};

FixOutcome apply_fixes(const std::string& root, const std::vector<Finding>& findings) {
  FixOutcome o;
  for (const auto& f : findings) {
    for (const auto& w : f.remedy.runtime) {
      fs::path path = fs::path(root) / w.path;
      auto old = read_first_line(path);
      Status st = write_attribute(path, w.value + "\n");
      if (!st) {
        o.failed.push_back({{"id", f.id},
                            {"path", path.string()},
                            {"value", w.value},
                            {"error", st.error().message()}});
        continue;
      }
      auto now = read_first_line(path);
      o.applied.push_back({{"id", f.id},
                           {"path", path.string()},
                           {"old", old ? nlohmann::json(*old) : nlohmann::json()},
                           {"value", w.value},
                           {"now", now ? nlohmann::json(*now) : nlohmann::json()}});
    }
    if (!f.remedy.runtime_is_complete()) {
      o.pending.push_back({{"id", f.id}, {"subject", f.subject}, {"summary", f.remedy.summary}});
    }
  }
  return o;
}

void print_fix(const FixOutcome& o, std::ostream& out) {
  out << "Applied now (lost at reboot unless installed with --emit):\n";
  if (o.applied.empty()) out << "  nothing\n";
  for (const auto& a : o.applied) {
    out << "  " << a["path"].get<std::string>() << ": "
        << (a["old"].is_null() ? "?" : a["old"].get<std::string>()) << " -> "
        << a["value"].get<std::string>() << " (reads "
        << (a["now"].is_null() ? "?" : a["now"].get<std::string>()) << ")\n";
  }
  for (const auto& a : o.failed) {
    out << "  FAILED " << a["path"].get<std::string>() << ": " << a["error"].get<std::string>()
        << "\n";
  }
  out << "Left for a reboot or for the operator:\n";
  if (o.pending.empty()) out << "  nothing\n";
  for (const auto& p : o.pending) {
    out << "  " << p["id"].get<std::string>() << " (" << p["subject"].get<std::string>()
        << "): " << p["summary"].get<std::string>() << "\n";
  }
  out << "\n";
}

Status emit_files(const std::string& dir, const std::vector<Finding>& findings) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    return bad_input(dir, "--emit needs a directory, this is a file");
  }
  for (const auto& [name, content] : remedy_files(findings)) {
    fs::path path = fs::path(dir) / name;
    fs::create_directories(path.parent_path(), ec);
    if (ec) return Error{ErrorCode::io, path.parent_path().string(), ec.message(), ""};
    if (auto st = write_file_atomically(path, content); !st) return st;
    if (name.ends_with(".sh"))
      fs::permissions(path, fs::perms::owner_exec, fs::perm_options::add, ec);
  }
  return Ok{};
}

}  // namespace

nlohmann::json to_json(const Finding& f) {
  return {{"id", f.id},
          {"severity", to_string(f.severity)},
          {"subject", f.subject},
          {"observed", f.observed},
          {"expected", f.expected},
          {"remedy", remedy_json(f.remedy)}};
}

nlohmann::json coverage_json(const AuditCoverage& coverage) {
  nlohmann::json unchecked = nlohmann::json::array();
  for (const auto& u : coverage.unchecked)
    unchecked.push_back({{"id", u.id}, {"missing_fact", u.missing_fact}});
  return {{"total", coverage.checks}, {"ran", coverage.ran()}, {"unchecked", unchecked}};
}

nlohmann::json audit_json(const HostModel& model, const AuditContext& context,
                          const std::vector<Finding>& findings, const AuditCoverage& coverage) {
  nlohmann::json list = nlohmann::json::array();
  nlohmann::json counts = {{"critical", 0}, {"warning", 0}, {"info", 0}};
  for (const auto& f : findings) {
    list.push_back(to_json(f));
    counts[to_string(f.severity)] = counts[to_string(f.severity)].get<int>() + 1;
  }
  std::vector<std::string> passthrough;
  for (const auto& a : context.passthrough)
    passthrough.push_back(a.to_string());
  return {{"schema_version", kAuditSchemaVersion},
          {"host", model.hostname},
          {"source", model.source},
          {"role", context.hypervisor ? "hypervisor" : "compute"},
          {"pinned_cpus", context.pinned.to_list()},
          {"passthrough", passthrough},
          {"counts", counts},
          {"checks", coverage_json(coverage)},
          {"findings", list}};
}

// The checks that could not run, so that a capture without most facts never reads as clean.
void print_unchecked(const AuditCoverage& coverage, std::ostream& out) {
  if (coverage.unchecked.empty()) return;
  out << "\nNot checked, for lack of a fact (" << coverage.unchecked.size() << " of "
      << coverage.checks << " checks):\n";
  std::size_t width = 0;
  for (const auto& u : coverage.unchecked)
    width = std::max(width, u.id.size());
  for (const auto& u : coverage.unchecked)
    out << "  " << u.id << std::string(width - u.id.size() + 2, ' ') << "needs " << u.missing_fact
        << "\n";
}

void print_findings(const std::vector<Finding>& findings, const AuditCoverage& coverage,
                    std::ostream& out, const OutputStyle& style) {
  if (findings.empty()) {
    out << (coverage.unchecked.empty() ? "No findings.\n"
                                       : "No findings in the checks that ran.\n");
    return;
  }
  for (const auto& f : findings) {
    Tone tone = f.severity == Severity::critical  ? Tone::bad
                : f.severity == Severity::warning ? Tone::warn
                                                  : Tone::note;
    out << paint(style, upper(f.severity), tone) << "  " << f.id << "  " << f.subject << "\n";
    out << "  observed: " << f.observed << "\n";
    out << "  expected: " << f.expected << "\n";
    out << "  remedy:   " << f.remedy.summary << "\n";
    const Remedy& r = f.remedy;
    if (!r.kernel_args.empty())
      out << "            kernel command line: " << join(r.kernel_args, " ") << "\n";
    for (const auto& s : r.sysctls)
      out << "            sysctl: " << s << "\n";
    for (const auto& m : r.modprobe)
      out << "            modprobe.d: " << m << "\n";
    for (const auto& m : r.modules_load)
      out << "            modules-load.d: " << m << "\n";
    for (const auto& s : r.systemd)
      out << "            systemd system.conf: " << s << "\n";
    if (!r.runtime.empty()) {
      out << "            now (--fix): echo " << r.runtime.front().value << " > /"
          << r.runtime.front().path;
      if (r.runtime.size() > 1) out << " and " << r.runtime.size() - 1 << " more";
      out << "\n";
    }
    for (const auto& c : r.commands)
      out << "            run: " << c << "\n";
  }
}

std::vector<AcceleratorSample> sample_accelerators(const HostModel& model) {
  std::vector<AcceleratorSample> samples;
  auto present = [&](const std::string& name) {
    return std::any_of(
        model.accelerator_backends.begin(), model.accelerator_backends.end(),
        [&](const AcceleratorBackendStatus& s) { return s.name == name && s.present; });
  };
  auto backends = make_all_backends();
  for (auto& b : backends) {
    if (!present(b->name()) || !b->open()) continue;
    for (const auto& a : model.accelerators) {
      if (a.inventory && a.inventory->backend == b->name()) {
        samples.push_back(b->sample(a.pci.address.to_string()));
      }
    }
  }
  return samples;
}

int run_audit_command(const GlobalOptions& options, const AuditCommandOptions& audit,
                      std::ostream& out) {
  auto request = parse_request(options, audit);
  if (!request) return fail(request.error());
  if (audit.fix && request->facts_root.empty()) {
    return fail(bad_input("--fix", "needs a host or --root to write to, not an XML capture"));
  }
  auto run = audit_once(*request);
  if (!run) return fail(run.error());

  nlohmann::json fix_json;
  bool fix_failed = false;
  if (audit.fix) {
    auto lock = FixLock::take(request->facts_root);
    if (!lock) return fail(lock.error());
    FixOutcome outcome = apply_fixes(request->facts_root, run->findings);
    ::close(*lock);
    fix_failed = !outcome.failed.empty();
    if (!options.json) print_fix(outcome, out);
    fix_json = {
        {"applied", outcome.applied}, {"failed", outcome.failed}, {"pending", outcome.pending}};
    // What is left, as the host now reads.
    run = audit_once(*request);
    if (!run) return fail(run.error());
  }
  if (!audit.emit_dir.empty()) {
    if (auto st = emit_files(audit.emit_dir, run->findings); !st) return fail(st.error());
  }

  AuditContext context = make_context({run->model, run->facts, run->samples, request->intent});
  AuditCoverage coverage =
      audit_coverage({run->model, run->facts, run->samples, request->intent}, request->only);
  if (options.json) {
    nlohmann::json j = audit_json(run->model, context, run->findings, coverage);
    if (audit.fix) j["fix"] = fix_json;
    if (!audit.emit_dir.empty()) {
      std::vector<std::string> names;
      for (const auto& [name, content] : remedy_files(run->findings))
        names.push_back(name);
      j["emitted"] = {{"dir", audit.emit_dir}, {"files", names}};
    }
    out << json_text(j) << "\n";
  } else {
    out << "Audit of " << (run->model.hostname.empty() ? "(unnamed)" : run->model.hostname) << " ("
        << run->model.source << "), role " << (context.hypervisor ? "hypervisor" : "compute");
    if (!context.pinned.empty()) out << ", pinned CPUs " << context.pinned.to_list();
    out << ": " << plural(run->findings.size(), "finding") << ", " << coverage.ran() << " of "
        << plural(coverage.checks, "check") << " ran";
    if (!coverage.unchecked.empty())
      out << " (" << coverage.unchecked.size() << " lack a fact, listed below)";
    out << "\n\n";
    print_findings(run->findings, coverage, out, options.style);
    print_unchecked(coverage, out);
    if (!audit.emit_dir.empty()) out << "\nRemedy files written to " << audit.emit_dir << "\n";
  }
  if (fix_failed) return kExitError;
  bool over = std::any_of(run->findings.begin(), run->findings.end(),
                          [&](const Finding& f) { return f.severity >= request->fail_on; });
  return over ? kExitFindings : kExitOk;
}

}  // namespace polyaccel::cli
