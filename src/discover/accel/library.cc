#include "discover/accel/library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <utility>

namespace polyaccel {

SharedLibrary::SharedLibrary(SharedLibrary&& o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)),
      path_(std::move(o.path_)),
      missing_(std::move(o.missing_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& o) noexcept {
  if (this != &o) {
    if (handle_) ::dlclose(handle_);
    handle_ = std::exchange(o.handle_, nullptr);
    path_ = std::move(o.path_);
    missing_ = std::move(o.missing_);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() {
  if (handle_) ::dlclose(handle_);
}

Result<SharedLibrary> SharedLibrary::open(const std::string& path, const std::string& what) {
  ::dlerror();
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = ::dlerror();
    std::string reason = err ? err : "unknown dlopen error";
    // A path that names an existing file which dlopen refuses is a broken install, not absence.
    std::error_code ec;
    bool exists = path.find('/') != std::string::npos && std::filesystem::exists(path, ec);
    if (exists) {
      return Error{ErrorCode::bad_input, path, "is not a loadable " + what + " library: " + reason,
                   "point the override variable at the vendor's library or unset it"};
    }
    return Error{ErrorCode::not_found, path, what + " library not found", {}};
  }
  SharedLibrary lib;
  lib.handle_ = h;
  lib.path_ = path;
  return lib;
}

void* SharedLibrary::symbol(const char* name) const {
  return handle_ ? ::dlsym(handle_, name) : nullptr;
}

std::string library_path(const char* env_override, const char* default_soname) {
  const char* v = std::getenv(env_override);
  return v && *v ? std::string(v) : std::string(default_soname);
}

}  // namespace polyaccel
