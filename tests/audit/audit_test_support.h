// What the audit tests share: the XE8640 capture's model, discovered once per test process, and
// the findings of one check.
#pragma once

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "audit/finding.h"
#include "support/fixture_model.h"

namespace polyaccel::testing {

inline const HostModel& xe8640() {
  static const HostModel m = fixture_model(kXe8640);
  return m;
}

inline std::vector<Finding> with_id(const std::vector<Finding>& all, const std::string& id) {
  std::vector<Finding> out;
  std::copy_if(all.begin(), all.end(), std::back_inserter(out),
               [&](const Finding& f) { return f.id == id; });
  return out;
}

}  // namespace polyaccel::testing
