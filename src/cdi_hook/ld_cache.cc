#include "cdi_hook/ld_cache.h"

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

namespace polyaccel::cdi_hook {

namespace {

constexpr std::string_view kOldMagic = "ld.so-1.7.0";
constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";
constexpr std::size_t kHeaderBytes = 48;
constexpr std::size_t kEntryBytes = 24;
constexpr std::size_t kOldEntryBytes = 12;
constexpr std::uint8_t kLittleEndian = 2;  // cache_file_new_flags_endian_little

std::uint32_t load_u32(std::string_view s, std::size_t off) {
  std::uint32_t v;
  std::memcpy(&v, s.data() + off, 4);
  return v;
}

void put_u32(std::string& s, std::size_t off, std::uint32_t v) {
  std::memcpy(s.data() + off, &v, 4);
}

bool read_exact(int fd, void* buf, std::size_t n, std::uint64_t off, std::uint64_t size) {
  if (off > size || n > size - off) return false;
  auto got = ::pread(fd, buf, n, static_cast<off_t>(off));
  return got == static_cast<ssize_t>(n);
}

}  // namespace

std::string to_string(const LdCacheEntry& e) {
  char flags[16];
  std::snprintf(flags, sizeof flags, "%#x", static_cast<unsigned>(e.flags));
  return e.name + " (" + flags + (e.hwcap ? ", hwcap" : "") + ") => " + e.path;
}

int ld_cache_libcmp(std::string_view a, std::string_view b) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0, j = 0;
  while (i < a.size()) {
    if (digit(a[i])) {
      if (j >= b.size() || !digit(b[j])) return 1;
      // Compared as numbers, saturated (glibc's int would wrap; no real name has such a number).
      std::uint64_t x = 0, y = 0;
      for (; i < a.size() && digit(a[i]); ++i)
        x = std::min<std::uint64_t>(x * 10 + static_cast<unsigned>(a[i] - '0'), 1u << 31);
      for (; j < b.size() && digit(b[j]); ++j)
        y = std::min<std::uint64_t>(y * 10 + static_cast<unsigned>(b[j] - '0'), 1u << 31);
      if (x != y) return x < y ? -1 : 1;
      continue;
    }
    if (j < b.size() && digit(b[j])) return -1;
    // As plain char, like glibc's: signed on x86-64, unsigned on AArch64.
    const int ca = a[i];
    const int cb = j < b.size() ? b[j] : 0;
    if (ca != cb) return ca - cb;
    ++i;
    ++j;
  }
  return j < b.size() ? -static_cast<int>(b[j]) : 0;
}

LdCache parse_ld_cache(std::string_view file) {
  LdCache out;
  if (file.size() > kMaxLdCacheBytes) {
    out.problem = "larger than 64 MiB";
    return out;
  }
  std::size_t start = 0;
  if (file.substr(0, kOldMagic.size()) == kOldMagic) {
    // The old table first: its entries, then the new header aligned to 8 bytes.
    if (file.size() < kOldMagic.size() + 4) {
      out.problem = "ends inside its old header";
      return out;
    }
    const std::uint64_t old_entries = load_u32(file, kOldMagic.size());
    const std::uint64_t old_end = kOldMagic.size() + 4 + old_entries * kOldEntryBytes;
    if (old_end > file.size()) {
      out.problem = "its old table runs past the end of the file";
      return out;
    }
    start = static_cast<std::size_t>((old_end + 7) & ~std::uint64_t{7});
  }
  if (start > file.size() || file.size() - start < kHeaderBytes ||
      file.substr(start, kNewMagic.size()) != kNewMagic) {
    out.problem = "not a glibc-ld.so.cache1.1 file";
    return out;
  }
  const std::string_view cache = file.substr(start);
  const std::uint8_t order = static_cast<std::uint8_t>(cache[28]) & 3u;
  if (order != 0 && order != kLittleEndian) {
    out.problem = "not a little-endian cache";
    return out;
  }
  const std::uint64_t nlibs = load_u32(cache, 20);
  if (nlibs > (cache.size() - kHeaderBytes) / kEntryBytes) {
    out.problem = "says it holds " + std::to_string(nlibs) + " entries, more than fit in the file";
    return out;
  }
  // Every string read is paid for from this budget: overlapping strings cannot make the work
  // grow faster than the file.
  std::uint64_t budget = std::uint64_t{4} * cache.size() + 4096;
  auto string_at = [&](std::uint32_t off) -> std::optional<std::string_view> {
    if (off >= cache.size()) return std::nullopt;
    const std::size_t limit = std::min(cache.size() - off, kMaxLdCacheString + 1);
    const void* nul = std::memchr(cache.data() + off, '\0', limit);
    const std::size_t scanned =
        nul ? static_cast<std::size_t>(static_cast<const char*>(nul) - (cache.data() + off)) + 1
            : limit;
    budget = scanned > budget ? 0 : budget - scanned;
    if (!nul || scanned - 1 > kMaxLdCacheString) return std::nullopt;
    return cache.substr(off, scanned - 1);
  };
  out.entries.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(nlibs, 65536)));
  for (std::uint64_t i = 0; i < nlibs; ++i) {
    const std::size_t e = kHeaderBytes + static_cast<std::size_t>(i) * kEntryBytes;
    LdCacheEntry entry;
    std::memcpy(&entry.flags, cache.data() + e, 4);
    std::memcpy(&entry.hwcap, cache.data() + e + 16, 8);
    auto key = string_at(load_u32(cache, e + 4));
    auto value = string_at(load_u32(cache, e + 8));
    if (budget == 0) {
      out.problem = "its strings overlap more than a cache's can (read stopped at entry " +
                    std::to_string(i) + ")";
      return out;
    }
    if (!key || !value) {
      out.problem = "entry " + std::to_string(i) + " has a string outside the file or too long";
      continue;
    }
    entry.name = std::string(*key);
    entry.path = std::string(*value);
    out.entries.push_back(std::move(entry));
  }
  return out;
}

std::string write_ld_cache(std::vector<LdCacheEntry> entries) {
  // ldconfig's order (elf/cache.c, compare): names descending, then the higher flags first (the
  // 64-bit entry of a name before its 32-bit one), then hwcap entries before the baseline one.
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const int c = ld_cache_libcmp(a.name, b.name);
    if (c != 0) return c > 0;
    if (a.flags != b.flags) return a.flags > b.flags;
    return a.hwcap > b.hwcap;
  });
  std::string out(kHeaderBytes + entries.size() * kEntryBytes, '\0');
  std::memcpy(out.data(), kNewMagic.data(), kNewMagic.size());
  put_u32(out, 20, static_cast<std::uint32_t>(entries.size()));
  out[28] = static_cast<char>(kLittleEndian);
  const std::size_t strings_start = out.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::size_t e = kHeaderBytes + i * kEntryBytes;
    std::memcpy(out.data() + e, &entries[i].flags, 4);
    std::memcpy(out.data() + e + 16, &entries[i].hwcap, 8);
    put_u32(out, e + 4, static_cast<std::uint32_t>(out.size()));
    out.append(entries[i].name).push_back('\0');
    put_u32(out, e + 8, static_cast<std::uint32_t>(out.size()));
    out.append(entries[i].path).push_back('\0');
  }
  put_u32(out, 24, static_cast<std::uint32_t>(out.size() - strings_start));
  return out;
}

std::optional<std::string> elf_soname(int fd, std::uint64_t size) {
  Elf64_Ehdr eh;
  if (!read_exact(fd, &eh, sizeof eh, 0, size)) return std::nullopt;
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      eh.e_shnum == 0 || eh.e_shnum > 4096)
    return std::nullopt;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!read_exact(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff, size))
    return std::nullopt;
  for (const auto& s : sh) {
    if (s.sh_type != SHT_DYNAMIC || s.sh_link >= sh.size()) continue;
    const Elf64_Shdr& str = sh[s.sh_link];
    std::size_t count = s.sh_size / sizeof(Elf64_Dyn);
    if (count == 0 || count > 65536) return std::nullopt;
    std::vector<Elf64_Dyn> dyn(count);
    if (!read_exact(fd, dyn.data(), count * sizeof(Elf64_Dyn), s.sh_offset, size))
      return std::nullopt;
    for (const auto& d : dyn) {
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag != DT_SONAME || d.d_un.d_val >= str.sh_size) continue;
      char name[256] = {};
      std::uint64_t n = std::min<std::uint64_t>(sizeof name - 1, str.sh_size - d.d_un.d_val);
      if (d.d_un.d_val > UINT64_MAX - str.sh_offset ||
          !read_exact(fd, name, n, str.sh_offset + d.d_un.d_val, size))
        return std::nullopt;
      std::size_t len = ::strnlen(name, n);
      std::string so(name, len);
      bool ok = len < n && !so.empty() && so != "." && so != ".." &&
                std::all_of(so.begin(), so.end(), [](char c) {
                  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                         c == '-' || c == '+';
                });
      return ok ? std::optional<std::string>(so) : std::nullopt;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace polyaccel::cdi_hook
