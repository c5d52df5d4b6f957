// The CDI driver-root readers of files a driver root (or an image) holds (src/dra/cdi_driver.h):
// the first byte picks `ld_cache_paths` (an /etc/ld.so.cache) or `elf_soname` (a library, read
// with pread from a memfd). Every offset in the input is checked against its size: nothing read
// past the end, every path found absolute, a SONAME a plain file name.
#include <sys/mman.h>
#include <unistd.h>

#include "dra/cdi_driver.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string input = polyaccel::fuzz::as_string(data + 1, size - 1);
  if (data[0] & 1) {
    for (const auto& p : polyaccel::dra::ld_cache_paths(input, "lib"))
      POLYACCEL_FUZZ_CHECK(!p.empty() && p.front() == '/' && p.size() <= 4096);
    return 0;
  }
  int fd = ::memfd_create("fuzz-elf", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (::write(fd, input.data(), input.size()) == static_cast<ssize_t>(input.size())) {
    auto soname = polyaccel::dra::elf_soname(fd, input.size());
    if (soname)
      POLYACCEL_FUZZ_CHECK(!soname->empty() && soname->size() < 256 &&
                           soname->find('/') == std::string::npos);
  }
  ::close(fd);
  return 0;
}
