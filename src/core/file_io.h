// Reading input files (the user's, and sysfs/procfs) and writing files atomically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace polyaccel {

// How large an input file may be, by kind (docs/limits.md). Beyond that we refuse the file rather
// than spend the memory and time a hostile or mistaken input asks for.
inline constexpr std::uint64_t kMaxConfigFileBytes = std::uint64_t{1}
                                                     << 20;  // YAML/JSON people write
inline constexpr std::uint64_t kMaxStateFileBytes = std::uint64_t{16} << 20;  // allocation state
inline constexpr std::uint64_t kMaxDomainXmlBytes = std::uint64_t{16} << 20;  // libvirt domain XML
inline constexpr std::uint64_t kMaxTopologyXmlBytes = std::uint64_t{64} << 20;  // hwloc XML
inline constexpr std::uint64_t kMaxSystemFileBytes = std::uint64_t{4}
                                                     << 20;  // one sysfs/procfs file

// The whole of a file the user named (--topology, --flavor, --state, ...). Only a regular file,
// after links are resolved: a FIFO, device, directory or socket is refused before it is opened
// for reading (a FIFO would block, /dev/zero never ends), and the opened descriptor is checked
// again so that a file swapped in between cannot slip through. `kind` names the file in the
// error ("flavor file", "hwloc XML"): "FILE: is a FIFO, not a regular file".
Result<std::string> read_input_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                    std::string_view kind = "file");

// The whole file, or nullopt when it cannot be read (absent, permission, not a regular file,
// larger than kMaxSystemFileBytes): sysfs and procfs attributes under a root.
std::optional<std::string> read_text_file(const std::filesystem::path& path);
// The first line without its newline and surrounding blanks.
std::optional<std::string> read_first_line(const std::filesystem::path& path);
// A file holding one integer (decimal, or hex with 0x), as most sysfs attributes do.
std::optional<std::int64_t> read_int_file(const std::filesystem::path& path);

// Names of the entries of `dir` (sysfs children, drop-in files), sorted; empty when the
// directory is absent or cannot be read, and cut short where reading it fails part way.
std::vector<std::string> sorted_entry_names(const std::filesystem::path& dir);

// The file a write to `path` means: links followed to their end, even to a target that does not
// exist yet (ELOOP after 40 links, as the kernel counts). write_file_atomically replaces it.
Result<std::filesystem::path> resolve_links(const std::filesystem::path& path);

// Writes to a temporary file in the same directory, fsyncs it, renames it over `path` and
// fsyncs the directory: a reader sees the old or the new content, never a part (DESIGN.md).
// A symbolic link is followed (its target is replaced, the link stays); a character device or
// FIFO is written through, never replaced by a regular file; a directory, socket or block device
// is refused. The new file keeps the mode of the one it replaces, or gets 0666 less the umask;
// `mode`, when given, is set whatever the umask (0644 for a file other users must read).
Status write_file_atomically(const std::filesystem::path& path, const std::string& content,
                             std::optional<unsigned> mode = std::nullopt);

}  // namespace polyaccel
