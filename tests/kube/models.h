// HostModels for the device plugin's tests: real captured machines, and the vendor libraries'
// test builds (tests/inject) merged through the production loaders.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "discover/accel/backends.h"
#include "discover/discover.h"
#include "support/test_support.h"

namespace polyaccel::testing {

// The XE8640 scenario's GPU at 0000:5f:00.0 (NUMA node 1, beside mlx5_2).
inline const std::string kGpu5f = "GPU-a08d5c27-6e1b-f349-82d7-5c0e1a3f9b74";

inline const std::string kG4dn = "2socket-2numa-8xT4-efa-hugepages_aws-g4dn-metal.xml";
inline const std::string kJureca = "2socket-nps4-8numa-4xA100-4xmlx5-pcieswitch_jureca-dc-gpu.xml";
inline const std::string kMi250x = "1socket-nps4-4numa-8xMI250X-gcd-4xslingshot_hpe-ex235a.xml";

inline HostModel load_fixture(const std::string& name) {
  DiscoverOptions o;
  o.topology_xml = topology_fixture(name).string();
  auto m = discover_host(o);
  EXPECT_TRUE(m) << (m ? "" : m.error().message());
  return m ? *m : HostModel{};
}

// Points every production loader at a test library or at nothing.
inline void use_vendor_libraries(const std::string& nvml, const std::string& rocm,
                                 const std::string& hlml) {
  ::setenv("POLYACCEL_NVML_LIB", nvml.empty() ? "/nonexistent/libnvidia-ml.so.1" : nvml.c_str(), 1);
  ::setenv("POLYACCEL_ROCM_SMI_LIB",
           rocm.empty() ? "/nonexistent/librocm_smi64.so.1" : rocm.c_str(), 1);
  ::setenv("POLYACCEL_HLML_LIB", hlml.empty() ? "/nonexistent/libhlml.so" : hlml.c_str(), 1);
  ::setenv("NVML_INJECT_SCENARIO", (std::string(NVML_SCENARIO_DIR) + "/hgx-8xh100.json").c_str(),
           1);
  ::setenv("ROCM_SMI_INJECT_SCENARIO",
           (std::string(ROCM_SMI_SCENARIO_DIR) + "/mi300x-8x.json").c_str(), 1);
  ::setenv("HLML_INJECT_SCENARIO", (std::string(HLML_SCENARIO_DIR) + "/gaudi2-8x.json").c_str(), 1);
}

// The 8xH100 HGX scenario (18 NVLinks per GPU to four NVSwitches: every pair NV18) merged into
// the XE8640 capture: four GPUs with the capture's NUMA nodes and NICs, four without locality.
inline HostModel hgx_8xh100() {
  use_vendor_libraries(NVML_INJECT_LIB, "", "");
  DiscoverOptions o;
  o.topology_xml = topology_fixture(kXe8640).string();
  o.backends = BackendMode::on;
  auto m = discover_host(o);
  EXPECT_TRUE(m) << (m ? "" : m.error().message());
  return m ? *m : HostModel{};
}

// 8xMI300X (ROCm SMI) or 8xGaudi2 (HLML) from the test libraries alone.
inline HostModel injected_only(bool amd) {
  use_vendor_libraries("", amd ? ROCM_SMI_INJECT_LIB : "", amd ? "" : HLML_INJECT_LIB);
  HostModel model;
  auto backends = make_all_backends();
  merge_accelerators(model, backends);
  return model;
}

// Makes `step` current in the copy of a test library that a backend loaded (tests/inject).
inline void inject_step(const std::string& library, unsigned step) {
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << library << ": " << ::dlerror();
  auto fn = reinterpret_cast<void (*)(unsigned)>(::dlsym(lib, "polyaccel_inject_set_step"));
  ASSERT_NE(fn, nullptr);
  fn(step);
  ::dlclose(lib);
}

}  // namespace polyaccel::testing
