// A test build of libnvidia-ml.so.1 whose power reading can hang: libnvidia-ml-hang.so.1 needs
// the full test library (inject_nvml) and overrides nvmlDeviceGetPowerUsage alone. While the file
// named by NVML_INJECT_HANG_FILE exists, that call blocks; removing the file releases it. Every
// other symbol, polyaccel_inject_set_step included, resolves to inject_nvml through this
// library's dependencies, so the production loader and the tests use it as they use inject_nvml.
#include <dlfcn.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "discover/accel/nvml_abi.h"

using namespace polyaccel::nvml;  // NOLINT(google-build-using-namespace)

#define INJECT_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::atomic<unsigned> waiting{0};

bool gate_closed() {
  const char* path = std::getenv("NVML_INJECT_HANG_FILE");
  struct stat st {};
  return path && *path && ::stat(path, &st) == 0;
}

fn::nvmlDeviceGetPowerUsage* real_power_usage() {
  static fn::nvmlDeviceGetPowerUsage* real = [] {
    void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    return lib ? reinterpret_cast<fn::nvmlDeviceGetPowerUsage*>(
                     ::dlsym(lib, "nvmlDeviceGetPowerUsage"))
               : nullptr;
  }();
  return real;
}

}  // namespace

INJECT_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  if (gate_closed()) {
    ++waiting;
    while (gate_closed())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    --waiting;
  }
  fn::nvmlDeviceGetPowerUsage* real = real_power_usage();
  return real ? real(device, power) : NVML_ERROR_UNKNOWN;
}
static_assert(std::is_same_v<decltype(nvmlDeviceGetPowerUsage), fn::nvmlDeviceGetPowerUsage>);

// How many calls are blocked at the gate now (for tests that wait for the hang to begin).
INJECT_EXPORT unsigned polyaccel_inject_hang_waiting() {
  return waiting.load();
}
