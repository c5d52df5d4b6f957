// Code points that change what a terminal shows around them (issue 40, 7): printable() escapes
// them, and names we store refuse them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace polyaccel {

// C1 controls (U+0080-U+009F: U+009B is a CSI on many terminals), bidi marks, embeddings,
// overrides and isolates (U+202E turns the rest of a line around), the line and paragraph
// separators.
bool is_format_control(std::uint32_t code_point);
// The first such code point in `text` (its valid UTF-8 sequences), if any.
std::optional<std::uint32_t> format_control_in(std::string_view text);

}  // namespace polyaccel
