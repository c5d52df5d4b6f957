// glibc's /etc/ld.so.cache, read and written without ldconfig, and the ELF SONAME it is keyed by.
// The CDI hook writes a container's cache itself (hook.h) and `cdi generate` reads a driver
// root's to find the driver's libraries (dra/cdi_driver.h); both take the file as hostile input.
//
// The format (glibc's elf/cache.c and sysdeps/generic/dl-cache.h, "glibc-ld.so.cache1.1"): a
// 48-byte header (magic and version, 20 bytes; nlibs; len_strings; a flags byte whose low bits
// say the byte order; 3 bytes of padding; extension_offset; 3 unused words), nlibs entries of 24
// bytes (flags, key, value as 32-bit words, an unused OS version, hwcap as 64-bit), then the
// strings, every offset counted from the header. Entries are sorted in descending order of
// glibc's _dl_cache_libcmp (digits compare as numbers): ld.so binary-searches them. An older
// "ld.so-1.7.0" table may come first; the new table follows it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace polyaccel::cdi_hook {

// The entry flags ld.so accepts for this machine's libraries (FLAG_ELF_LIBC6 with the
// architecture's word: x86-64 0x0300, AArch64 0x0a00).
#if defined(__x86_64__)
inline constexpr std::int32_t kLdCacheLibraryFlags = 0x0303;
#elif defined(__aarch64__)
inline constexpr std::int32_t kLdCacheLibraryFlags = 0x0a03;
#else
#error "the ld.so.cache entry flags of this architecture are not known"
#endif

// A cache larger than this is refused: a real one holds a few thousand entries (~200 KiB).
inline constexpr std::size_t kMaxLdCacheBytes = std::size_t{64} << 20;
// A name or path in the cache longer than this is malformed (PATH_MAX).
inline constexpr std::size_t kMaxLdCacheString = 4096;

struct LdCacheEntry {
  std::string name;  // the key: a SONAME, "libcuda.so.1"
  std::string path;  // the value: an absolute path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
  std::int32_t flags = kLdCacheLibraryFlags;
  std::uint64_t hwcap = 0;  // non-zero: a glibc-hwcaps or platform entry
  bool operator==(const LdCacheEntry&) const = default;
};
// For test failure messages: "libcuda.so.1 (0x303) => /usr/lib/.../libcuda.so.1".
std::string to_string(const LdCacheEntry& entry);

struct LdCache {
  std::vector<LdCacheEntry> entries;  // in the file's order
  std::string problem;                // empty when the whole file was read
};

// The entries of a cache, in time linear in its size: every offset and count is checked against
// the file, a string is read at most kMaxLdCacheString bytes far, and once the strings read add
// up to more than 4 times the file (overlapping strings), reading stops with a problem. A file
// that is not a cache gives no entries and a problem; never more than the file can hold.
LdCache parse_ld_cache(std::string_view file);

// A new-format cache of `entries` (each name and path without NUL, at most kMaxLdCacheString
// bytes), sorted as ldconfig sorts them (ld.so binary-searches them); entries alike in name,
// flags and hwcap keep their order.
std::string write_ld_cache(std::vector<LdCacheEntry> entries);

// glibc's _dl_cache_libcmp: <0, 0, >0 as `a` sorts before, with or after `b`, runs of digits
// compared as numbers (so libfoo.so.10 > libfoo.so.9). Numbers past 2^31 compare as equal
// rather than wrap.
int ld_cache_libcmp(std::string_view a, std::string_view b);

// The DT_SONAME of an ELF64 little-endian shared object (read with pread, every offset checked
// against `file_size`); nullopt for anything else or a name that is not a plain file name.
std::optional<std::string> elf_soname(int fd, std::uint64_t file_size);

}  // namespace polyaccel::cdi_hook
