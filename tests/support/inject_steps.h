// The test's handle on a test build of a vendor library (tests/inject/*) that a backend loaded:
// dlopen with RTLD_NOLOAD gives the very copy the backend uses, and its
// polyaccel_inject_set_step moves the scenario to another step. Production code never sees it.
#pragma once

#include <dlfcn.h>

#include <string>
#include <vector>

namespace polyaccel::testing {

// The 8 GPUs of the MI300X scenario of both AMD libraries
// (tests/inject/{amd_smi,rocm_smi}/scenarios/mi300x-8x.json), in bus order.
inline const std::vector<std::string> kMi300xBusIds = {
    "0000:05:00.0", "0000:26:00.0", "0000:46:00.0", "0000:65:00.0",
    "0000:85:00.0", "0000:a6:00.0", "0000:c6:00.0", "0000:e5:00.0"};

class InjectSteps {
 public:
  explicit InjectSteps(const std::string& library)
      : handle_(::dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    if (handle_) {
      set_step_ =
          reinterpret_cast<void (*)(unsigned)>(::dlsym(handle_, "polyaccel_inject_set_step"));
    }
  }
  ~InjectSteps() {
    if (handle_) ::dlclose(handle_);
  }
  InjectSteps(const InjectSteps&) = delete;
  InjectSteps& operator=(const InjectSteps&) = delete;

  // False when the library is not loaded or is not a test build.
  bool ok() const { return set_step_ != nullptr; }
  void go(unsigned step) const { set_step_(step); }

 private:
  void* handle_ = nullptr;
  void (*set_step_)(unsigned) = nullptr;
};

}  // namespace polyaccel::testing
