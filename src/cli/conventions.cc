#include "cli/conventions.h"

#include "core/strings.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <vector>

#include "cli/build_info.h"

namespace polyaccel::cli {
namespace {

// CLI11's help with our program name and without its internals: a CheckedTransformer's
// "value in {auto->0,...}" is replaced by the option's own type name (set where it is defined).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string out = CLI::Formatter::make_option_opts(opt);
    // A transformer's description is its value map: "ENUM:value in {auto->0,...} OR {0,...}".
    for (auto at = out.find(":value in {"); at != std::string::npos; at = out.find(":value in {")) {
      auto close = out.find('}', at);
      if (close == std::string::npos) break;
      if (out.compare(close + 1, 5, " OR {") == 0) close = out.find('}', close + 1);
      if (close == std::string::npos) break;
      out.erase(at, close + 1 - at);
    }
    return out;
  }
};

// "polyaccel: <problem>" on one line: the remedy is in the message, --help is known.
std::string one_line_failure(const CLI::App* app, const CLI::Error& e) {
  std::string what = e.what();
  while (!what.empty() && (what.back() == '\n' || what.back() == ' '))
    what.pop_back();
  what = printable(what);  // what the user typed, escaped: one line whatever it holds
  std::string where;
  for (const CLI::App* a = app; a && a->get_parent(); a = a->get_parent())
    where = " " + a->get_name() + where;
  return "polyaccel" + where + ": " + what + "\n";
}

bool is_option(const std::string& word) {
  return !word.empty() && word[0] == '-';
}

}  // namespace

std::string version_text() {
  return std::string("polyaccel ") + kBuildVersion + " (commit " + kBuildRevision + ", " +
         kBuildType + ")";
}

void apply_conventions(CLI::App& app) {
  app.name("polyaccel");
  app.formatter(std::make_shared<HelpFormatter>());
  app.failure_message(one_line_failure);
  app.set_version_flag("-V,--version", version_text(), "print version, git commit and build type");
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string unknown_command(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* current = &app;
  std::string path = "polyaccel";
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "--") return "";
    // Options may take values; only leading command words are checked.
    if (is_option(word)) return "";
    auto subs = current->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) return "";
    auto match = std::find_if(subs.begin(), subs.end(),
                              [&](const CLI::App* s) { return s->check_name(word); });
    if (match != subs.end()) {
      current = *match;
      path += " " + word;
      continue;
    }
    if (current->get_require_subcommand_min() == 0) return "";
    const CLI::App* closest = nullptr;
    std::size_t best = std::string::npos;
    for (const CLI::App* s : subs) {
      std::size_t d = edit_distance(word, s->get_name());
      // A prefix ("top" for topo) counts as close as one edit.
      if (s->get_name().rfind(word, 0) == 0) d = std::min<std::size_t>(d, 1);
      if (d < best) {
        best = d;
        closest = s;
      }
    }
    // The word is the user's: escaped and cut short, so that the error stays one line.
    std::string message = path + ": unknown command " + quote_input(word);
    if (closest && best <= std::max<std::size_t>(2, word.size() / 2)) {
      message += " (did you mean '" + closest->get_name() + "'?)";
    } else {
      std::vector<std::string> names;
      for (const CLI::App* s : subs)
        names.push_back(s->get_name());
      message += " (commands: " + CLI::detail::join(names, ", ") + ")";
    }
    return message;
  }
  return "";
}

}  // namespace polyaccel::cli
