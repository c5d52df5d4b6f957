#include "cli/output.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ostream>

#include "core/strings.h"

namespace polyaccel::cli {

OutputStyle detect_output_style(ColorMode mode) {
  OutputStyle style;
  bool tty = ::isatty(STDOUT_FILENO) == 1;
  const char* no_color = std::getenv("NO_COLOR");
  style.color = mode == ColorMode::always ||
                (mode == ColorMode::automatic && tty && !(no_color && *no_color));
  winsize ws{};
  if (tty && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    style.width = ws.ws_col;
  } else if (const char* columns = std::getenv("COLUMNS")) {
    auto n = parse_count(columns);
    if (n && *n >= 20 && *n <= 10000) style.width = *n;
  }
  return style;
}

std::string paint(const OutputStyle& style, std::string_view text, Tone tone) {
  if (!style.color || tone == Tone::plain) return std::string(text);
  const char* sgr = "";
  switch (tone) {
    case Tone::bad:
      sgr = "1;31";
      break;
    case Tone::warn:
      sgr = "33";
      break;
    case Tone::note:
      sgr = "36";
      break;
    case Tone::good:
      sgr = "32";
      break;
    case Tone::strong:
      sgr = "1";
      break;
    case Tone::plain:
      break;
  }
  return "\033[" + std::string(sgr) + "m" + std::string(text) + "\033[0m";
}

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0x1b && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= '@' && text[i] <= '~'))
        ++i;
      continue;
    }
    if ((c & 0xC0) != 0x80) ++width;  // not a UTF-8 continuation byte
  }
  return width;
}

std::string plural(std::size_t count, std::string_view one, std::string_view many) {
  std::string word = count == 1     ? std::string(one)
                     : many.empty() ? std::string(one) + "s"
                                    : std::string(many);
  return std::to_string(count) + " " + word;
}

std::string squeeze_blanks(std::string_view text) {
  std::string out;
  bool blank = false;
  for (char c : text) {
    if (c == ' ' || c == '\t') {
      blank = !out.empty();
      continue;
    }
    if (blank) out += ' ';
    blank = false;
    out += c;
  }
  return out;
}

std::vector<std::string> wrap_words(std::string_view text, std::size_t width) {
  // Words end at a blank (dropped) or after a comma (kept). Each remembers whether a blank came
  // before it: "0-55,112-167" stays glued, "vm, x86_64" keeps its blank (when on one line).
  struct Word {
    std::string text;
    bool blank_before = false;
  };
  std::vector<Word> words;
  Word word;
  bool blank = false;
  for (char c : text) {
    if (c == ' ') {
      if (!word.text.empty()) words.push_back(word);
      word = {};
      blank = true;
      continue;
    }
    if (word.text.empty()) {
      word.blank_before = blank;
      blank = false;
    }
    word.text += c;
    if (c == ',') {
      words.push_back(word);
      word = {};
    }
  }
  if (!word.text.empty()) words.push_back(word);
  std::vector<std::string> lines;
  std::string line;
  for (const auto& w : words) {
    std::string sep = line.empty() || !w.blank_before ? "" : " ";
    if (width > 0 && !line.empty() &&
        display_width(line) + sep.size() + display_width(w.text) > width) {
      lines.push_back(line);
      line.clear();
      sep.clear();
    }
    line += sep + w.text;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

void Table::print(std::ostream& out, const OutputStyle& style) const {
  std::size_t columns = 0;
  for (const auto& r : rows_)
    columns = std::max(columns, r.cells.size());
  if (columns == 0) return;
  std::vector<std::size_t> widths(columns, 0);
  for (std::size_t c = 0; c < columns && c < min_widths_.size(); ++c)
    widths[c] = min_widths_[c];
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.cells.size(); ++c)
      widths[c] = std::max(widths[c], display_width(row.cells[c]));
  }
  const std::size_t gap = 2;
  std::size_t wrap = std::min(wrap_column_, columns - 1);
  std::size_t total = indent_.size();
  for (std::size_t c = 0; c < columns; ++c)
    total += widths[c] + (c + 1 < columns ? gap : 0);
  if (split_columns_ && style.width > 0 && total > style.width && columns > 2) {
    // Groups of columns 1.. that fit beside column 0.
    std::size_t c = 1;
    bool first = true;
    while (c < columns) {
      std::size_t used = indent_.size() + widths[0];
      std::size_t end = c;
      while (end < columns && (end == c || used + gap + widths[end] <= style.width)) {
        used += gap + widths[end];
        ++end;
      }
      Table part(indent_);
      for (const auto& row : rows_) {
        std::vector<std::string> cells;
        cells.push_back(row.cells.empty() ? "" : row.cells[0]);
        for (std::size_t k = c; k < end; ++k)
          cells.push_back(k < row.cells.size() ? row.cells[k] : "");
        part.add_row(cells);
      }
      // Keep the column widths of the whole table, so that groups line up with each other.
      part.min_widths_ = {widths[0]};
      for (std::size_t k = c; k < end; ++k)
        part.min_widths_.push_back(widths[k]);
      if (!first) out << "\n";
      part.print(out, OutputStyle{style.color, 0, style.verbose});
      first = false;
      c = end;
    }
    return;
  }
  bool fold_after_wrap = false;
  if (style.width > 0 && total > style.width) {
    // Shrink the wrap column to what is left, but never below its longest word.
    std::size_t longest_word = 1;
    for (const auto& row : rows_) {
      if (wrap < row.cells.size()) {
        for (const auto& w : wrap_words(row.cells[wrap], 1))
          longest_word = std::max(longest_word, display_width(w));
      }
    }
    std::size_t others = total - widths[wrap];
    std::size_t room = style.width > others ? style.width - others : 0;
    widths[wrap] = std::max(longest_word, std::min(widths[wrap], room));
    if (others + widths[wrap] > style.width && wrap + 1 < columns) {
      // Still too wide: the cells after the wrap column go below it, on continuation lines.
      fold_after_wrap = true;
      std::size_t before = indent_.size();
      for (std::size_t c = 0; c < wrap; ++c)
        before += widths[c] + gap;
      widths[wrap] = std::max(longest_word, style.width > before ? style.width - before : 0);
    }
  }
  for (const auto& row : rows_) {
    std::vector<std::string> r = row.cells;
    std::vector<std::string> wrapped =
        wrap < r.size() ? wrap_words(r[wrap], widths[wrap]) : std::vector<std::string>{""};
    if (fold_after_wrap && wrap + 1 < r.size()) {
      // The trailing cells, whole, packed into lines of the wrap column's width.
      std::string line;
      for (std::size_t c = wrap + 1; c < r.size(); ++c) {
        if (r[c].empty()) continue;
        if (!line.empty() && display_width(line) + gap + display_width(r[c]) > widths[wrap]) {
          wrapped.push_back(line);
          line.clear();
        }
        line += (line.empty() ? "" : std::string(gap, ' ')) + r[c];
      }
      if (!line.empty()) wrapped.push_back(line);
      r.resize(wrap + 1);
    }
    for (std::size_t line = 0; line < wrapped.size(); ++line) {
      std::string text = indent_;
      std::size_t last = r.size();
      while (last > 0 && (last - 1 != wrap || line > 0) && r[last - 1].empty())
        --last;
      if (line > 0) last = std::min(last, wrap + 1);
      for (std::size_t c = 0; c < last; ++c) {
        std::string cell = c == wrap ? wrapped[line] : (line == 0 ? r[c] : "");
        text += cell;
        if (c + 1 < last) text += std::string(widths[c] - display_width(cell) + gap, ' ');
      }
      while (!text.empty() && text.back() == ' ')
        text.pop_back();
      out << text << "\n";
    }
    out << row.details;
  }
}

}  // namespace polyaccel::cli
