// Page sizes people give (--page-size, --hugepage-size): what any Linux kernel could have.
#pragma once

#include <cstdint>

namespace polyaccel {

// The largest huge page any Linux architecture has (16 GiB on arm64 with 64 KiB base pages and
// on POWER); x86 has 2 MiB and 1 GiB.
inline constexpr std::uint64_t kMaxPageSizeBytes = std::uint64_t{16} << 30;

// A page size a kernel could have: a power of two from 4 KiB to kMaxPageSizeBytes.
inline bool is_page_size(std::uint64_t bytes) {
  return bytes >= 4096 && bytes <= kMaxPageSizeBytes && (bytes & (bytes - 1)) == 0;
}

}  // namespace polyaccel
