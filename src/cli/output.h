// Output for people: colour on a terminal only, the terminal's width, aligned tables that wrap a
// long cell at its blanks (never inside a word), plurals. Every command's human output uses it.
#pragma once

#include "core/strings.h"

#include <cstddef>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace polyaccel::cli {

enum class ColorMode { automatic, always, never };

// How human output is drawn, decided once in main from --color and stdout.
struct OutputStyle {
  bool color = false;
  std::size_t width = 0;  // 0: no limit (not a terminal and no $COLUMNS)
  bool verbose = false;   // -v: more detail (topo: each device's PCIe path)
};

// --color: auto colours only when stdout is a terminal (and $NO_COLOR is unset, no-color.org);
// width: the terminal's (TIOCGWINSZ), else $COLUMNS, else no limit.
OutputStyle detect_output_style(ColorMode mode);

// Colours by meaning, not by name.
enum class Tone { plain, bad, warn, note, good, strong };
std::string paint(const OutputStyle& style, std::string_view text, Tone tone);

// Columns a string takes on a terminal: UTF-8 code points, ANSI escape sequences take none.
std::size_t display_width(std::string_view text);

// "1 package", "2 packages"; `many` defaults to one + "s".
std::string plural(std::size_t count, std::string_view one, std::string_view many = {});

// Trailing and repeated blanks removed (hwloc's CPUModel is padded: "Intel(R) Xeon(R) ...   ").
std::string squeeze_blanks(std::string_view text);

// printable() for a table cell, keeping the colour codes paint() put there (SGR: ESC [ digits and
// semicolons m); any other control byte is escaped.
inline std::string printable_cell(const std::string& c) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t i = c.find('\033'); i != std::string::npos; i = c.find('\033', start)) {
    out += printable(std::string_view(c).substr(start, i - start));
    std::size_t j = i + 1;
    if (j < c.size() && c[j] == '[') {
      ++j;
      while (j < c.size() && ((c[j] >= '0' && c[j] <= '9') || c[j] == ';'))
        ++j;
      if (j < c.size() && c[j] == 'm') {
        out.append(c, i, j - i + 1);
        start = j + 1;
        continue;
      }
    }
    out += printable(std::string_view(c).substr(i, 1));
    start = i + 1;
  }
  out += printable(std::string_view(c).substr(start));
  return out;
}

// Rows of cells printed with every column aligned. When the rows are wider than the style's
// width, the wrap column's cells are broken at blanks and commas onto continuation lines (a
// single word longer than its column is kept whole); other columns never break.
class Table {
 public:
  explicit Table(std::string indent = "  ") : indent_(std::move(indent)) {}
  // Cells are escaped (printable_cell): names from captures never reach the terminal raw.
  void add_row(std::vector<std::string> cells) {
    for (auto& c : cells)
      c = printable_cell(c);
    rows_.push_back({std::move(cells), {}});
  }
  // Lines printed as they are right after the last row (its details), outside the columns.
  void add_details(const std::string& lines) {
    if (!rows_.empty()) rows_.back().details += lines;
  }
  // The column that wraps; by default the last one.
  void set_wrap_column(std::size_t column) { wrap_column_ = column; }
  // Instead of wrapping: when too wide, print the columns in groups that fit, each group with the
  // first column again (a matrix, as numactl prints long rows).
  void set_split_columns(bool split) { split_columns_ = split; }
  bool empty() const { return rows_.empty(); }
  void print(std::ostream& out, const OutputStyle& style) const;

 private:
  std::string indent_;
  struct Row {
    std::vector<std::string> cells;
    std::string details;
  };
  std::vector<Row> rows_;
  std::size_t wrap_column_ = static_cast<std::size_t>(-1);
  bool split_columns_ = false;
  std::vector<std::size_t> min_widths_;  // a split table's parts keep the whole one's widths
};

// Breaks `text` into lines of at most `width` columns at blanks (and after commas); a word longer
// than `width` stays whole on its own line. width 0: one line.
std::vector<std::string> wrap_words(std::string_view text, std::size_t width);

}  // namespace polyaccel::cli
