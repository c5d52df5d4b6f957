#include "core/agent_parts.h"

#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>

#include "core/log.h"

namespace polyaccel {

namespace {

std::mutex& parts_mu() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, AgentPart>& parts() {
  static std::map<std::string, AgentPart> p;
  return p;
}

void record(const std::string& name, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(parts_mu());
    AgentPart& p = parts()[name];
    p.name = name;
    p.up = false;
    ++p.failures;
    p.last_error = error;
  }
  log_line("polyaccel agent: part " + name + " failed and stopped: " + error +
           " (the other parts go on; /healthz fails until the agent restarts)");
}

}  // namespace

std::vector<AgentPart> agent_parts() {
  std::lock_guard<std::mutex> lock(parts_mu());
  std::vector<AgentPart> out;
  for (const auto& [name, p] : parts())
    out.push_back(p);
  return out;
}

void run_part(const std::string& name, const std::function<void()>& work) noexcept {
  try {
    {
      std::lock_guard<std::mutex> lock(parts_mu());
      AgentPart& p = parts()[name];
      p.name = name;
      p.up = true;
    }
    const char* fault = std::getenv("POLYACCEL_FAULT_PART");
    if (fault && name == fault) throw std::runtime_error("fault injected (POLYACCEL_FAULT_PART)");
    work();
  } catch (const std::exception& e) {
    try {
      record(name, e.what());
    } catch (...) {
    }
  } catch (...) {
    try {
      record(name, "an exception that is not a std::exception");
    } catch (...) {
    }
  }
}

}  // namespace polyaccel
