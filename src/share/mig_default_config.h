// The default ConfigMap of MIG layouts, as NVIDIA's mig-parted ships config-default.yaml: for
// every GPU model of our profile tables (mig_profiles.h), `all-disabled`, `all-enabled`,
// `all-<profile>` (as many of that profile as fit an empty GPU; "+me" written ".me" in the
// name, since a label value has no "+") and `all-balanced` (two of the smallest 1-slice profile,
// one 2-slice and one 3-slice, mig-parted's choice), each entry selecting its model by
// device-filter. deploy/kubernetes/components/mig-manager/config-default.yaml is this text
// (tests/share/mig_default_config_test.cc keeps it so).
#pragma once

#include <string>

namespace polyaccel {

std::string default_mig_parted_config_yaml();

}  // namespace polyaccel
