// Reading small text files (sysfs, procfs) and writing state files atomically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace polyaccel {

// The whole file, or nullopt when it cannot be read (absent, permission, a directory).
std::optional<std::string> read_text_file(const std::filesystem::path& path);
// The first line without its newline and surrounding blanks.
std::optional<std::string> read_first_line(const std::filesystem::path& path);
// A file holding one integer (decimal, or hex with 0x), as most sysfs attributes do.
std::optional<std::int64_t> read_int_file(const std::filesystem::path& path);

// Writes to a temporary file in the same directory, fsyncs it, renames it over `path` and
// fsyncs the directory: a reader sees the old or the new content, never a part (DESIGN.md).
// The file gets mode 0600 (mkstemp's), or `mode` when given (0644 for a file other users read).
Status write_file_atomically(const std::filesystem::path& path, const std::string& content,
                             std::optional<unsigned> mode = std::nullopt);

}  // namespace polyaccel
