// Byte sizes as people write them: "64GiB", "2MiB", "1G", "4096". Binary units throughout, as the
// kernel's hugepage sizes and Nova's hw:mem_page_size use them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace polyaccel {

// Accepts an integer with an optional unit: B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (all
// powers of 1024, as Nova and the kernel mean them). nullopt on anything else or on overflow.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

// "2 MiB", "1 GiB", "503.2 GiB": exact for whole units, one decimal otherwise.
std::string format_byte_size(std::uint64_t bytes);

}  // namespace polyaccel
