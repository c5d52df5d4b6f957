// A vendor library opened with dlopen, with each symbol resolved by name (DCGM's NVML loader).
// The one place that calls dlopen/dlsym; every vendor loader uses it.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace polyaccel {

class SharedLibrary {
 public:
  SharedLibrary() = default;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  SharedLibrary(SharedLibrary&& o) noexcept;
  SharedLibrary& operator=(SharedLibrary&& o) noexcept;
  ~SharedLibrary();

  // Opens `path` (a file name is searched the usual way). Error not_found when no such library
  // exists, bad_input when the file exists but is not a loadable library.
  static Result<SharedLibrary> open(const std::string& path, const std::string& what);

  // Resolves `name` into `fn`; on failure leaves fn null and records the name as missing.
  template <class Fn>
  void resolve(Fn*& fn, const char* name) {
    fn = reinterpret_cast<Fn*>(symbol(name));
    if (!fn) missing_.push_back(name);
  }

  const std::string& path() const { return path_; }
  const std::vector<std::string>& missing() const { return missing_; }
  bool loaded() const { return handle_ != nullptr; }

 private:
  void* symbol(const char* name) const;
  void* handle_ = nullptr;
  std::string path_;
  std::vector<std::string> missing_;
};

// The library path for a vendor: the override variable when set, else the default soname.
std::string library_path(const char* env_override, const char* default_soname);

}  // namespace polyaccel
