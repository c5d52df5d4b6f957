// The readers of files a driver root or a container image holds (src/cdi_hook/ld_cache.h): the
// first byte picks `parse_ld_cache` (an /etc/ld.so.cache) or `elf_soname` (a library, read with
// pread from a memfd). Every offset in the input is checked against its size: nothing read past
// the end, never more entries than the file holds; what was read, written again with
// `write_ld_cache`, reads back whole, and writing that again changes nothing.
#include <sys/mman.h>
#include <unistd.h>

#include "cdi_hook/ld_cache.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace polyaccel::cdi_hook;
  if (size == 0) return 0;
  std::string input = polyaccel::fuzz::as_string(data + 1, size - 1);
  if (data[0] & 1) {
    LdCache cache = parse_ld_cache(input);
    POLYACCEL_FUZZ_CHECK(cache.entries.size() <= input.size() / 24);
    for (const auto& e : cache.entries)
      POLYACCEL_FUZZ_CHECK(
          e.name.size() <= kMaxLdCacheString && e.path.size() <= kMaxLdCacheString &&
          e.name.find('\0') == std::string::npos && e.path.find('\0') == std::string::npos);
    const std::string written = write_ld_cache(cache.entries);
    LdCache back = parse_ld_cache(written);
    POLYACCEL_FUZZ_CHECK(back.problem.empty() && back.entries.size() == cache.entries.size());
    POLYACCEL_FUZZ_CHECK(write_ld_cache(back.entries) == written);
    return 0;
  }
  int fd = ::memfd_create("fuzz-elf", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (::write(fd, input.data(), input.size()) == static_cast<ssize_t>(input.size())) {
    auto soname = elf_soname(fd, input.size());
    if (soname)
      POLYACCEL_FUZZ_CHECK(!soname->empty() && soname->size() < 256 &&
                           soname->find('/') == std::string::npos);
  }
  ::close(fd);
  return 0;
}
