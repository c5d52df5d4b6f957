#include "cli/conventions.h"

#include "core/strings.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <sstream>
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

namespace {

constexpr const char* kOneOfPrefix = "one of: ";

// The closest of `candidates` to `word` when close enough to be a typo ("tpoo" for "topo",
// "mem" for "memory"), else "".
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates) {
  std::string closest;
  std::size_t best = std::string::npos;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    // A prefix ("top" for topo, "mem" for memory) counts as close as one edit.
    if (c.rfind(word, 0) == 0) d = std::min<std::size_t>(d, 1);
    if (d < best) {
      best = d;
      closest = c;
    }
  }
  if (best <= std::max<std::size_t>(2, word.size() / 2)) return closest;
  return "";
}

// Words other tools use for an option polyaccel spells differently.
const std::map<std::string, std::string>& option_synonyms() {
  static const std::map<std::string, std::string> synonyms = {{"port", "listen"},
                                                              {"address", "listen"},
                                                              {"web.listen-address", "listen"},
                                                              {"cpus", "vcpus"},
                                                              {"output", "output-file"}};
  return synonyms;
}

const CLI::Option* find_long_option(const CLI::App* app, const std::string& name) {
  for (const CLI::Option* o :
       app->get_options([](const CLI::Option* opt) { return opt->nonpositional(); })) {
    for (const auto& l : o->get_lnames())
      if (l == name) return o;
  }
  return nullptr;
}

const CLI::Option* find_short_option(const CLI::App* app, const std::string& name) {
  for (const CLI::Option* o :
       app->get_options([](const CLI::Option* opt) { return opt->nonpositional(); })) {
    for (const auto& s : o->get_snames())
      if (s == name) return o;
  }
  return nullptr;
}

bool takes_value(const CLI::Option* o) {
  return o->get_type_size() != 0;
}

// "unknown option --topolgy (did you mean --topology?)" for a long option `app` lacks.
std::string unknown_option_message(const CLI::App* app, const std::string& path,
                                   const std::string& word) {
  std::string name =
      word.substr(2, word.find('=') == std::string::npos ? std::string::npos : word.find('=') - 2);
  std::vector<std::string> names;
  for (const CLI::Option* o :
       app->get_options([](const CLI::Option* opt) { return opt->nonpositional(); })) {
    for (const auto& l : o->get_lnames())
      names.push_back(l);
  }
  std::string closest;
  if (auto s = option_synonyms().find(name);
      s != option_synonyms().end() && find_long_option(app, s->second)) {
    closest = s->second;
  } else {
    closest = closest_name(name, names);
  }
  std::string message = path + ": unknown option " + printable("--" + name).substr(0, 120);
  if (!closest.empty()) return message + " (did you mean --" + closest + "?)";
  // run CMD: the command's own options belong after "--".
  if (app->get_option_no_throw("CMD")) return message + " (the command's own options go after --)";
  return message + " (" + path + " --help lists the options)";
}

}  // namespace

std::vector<std::string> split_empty_values(int argc, const char* const* argv) {
  std::vector<std::string> out;
  bool options = true;
  for (int i = 0; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "--") options = false;
    if (options && i > 0 && word.size() > 3 && word.starts_with("--") && word.back() == '=' &&
        word.find('=') == word.size() - 1) {
      out.push_back(word.substr(0, word.size() - 1));
      out.emplace_back();
      continue;
    }
    out.push_back(std::move(word));
  }
  return out;
}

std::string unknown_word(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* current = &app;
  std::string path = "polyaccel";
  bool commands_done = false;  // past the command words: the rest are options and arguments
  const CLI::Option* wants_value = nullptr;  // the option before this word takes a value
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "--") return "";
    if (wants_value) {
      wants_value = nullptr;
      continue;
    }
    if (word.rfind("--", 0) == 0 && word.size() > 2) {
      std::string name = word.substr(
          2, word.find('=') == std::string::npos ? std::string::npos : word.find('=') - 2);
      const CLI::Option* o = find_long_option(current, name);
      // --help and --version are CLI11's own, found above in the tree.
      if (!o && (name == "help" || name == "version")) continue;
      if (!o) return unknown_option_message(current, path, word);
      if (takes_value(o) && word.find('=') == std::string::npos) wants_value = o;
      continue;
    }
    if (is_option(word)) {
      // -C gpu0, -o json: a short option that takes a value, alone, takes the next word.
      if (word.size() == 2) {
        if (const CLI::Option* o = find_short_option(current, word.substr(1));
            o && takes_value(o)) {
          wants_value = o;
        }
      }
      continue;
    }
    if (commands_done) continue;
    auto subs = current->get_subcommands([](const CLI::App*) { return true; });
    auto match = std::find_if(subs.begin(), subs.end(),
                              [&](const CLI::App* s) { return s->check_name(word); });
    if (match != subs.end()) {
      current = *match;
      path += " " + word;
      continue;
    }
    if (subs.empty() || current->get_require_subcommand_min() == 0) {
      commands_done = true;  // a positional argument
      continue;
    }
    std::vector<std::string> names;
    for (const CLI::App* s : subs) {
      if (!s->get_group().empty()) names.push_back(s->get_name());  // hidden ones stay unnamed
    }
    // The word is the user's: escaped and cut short, so that the error stays one line.
    std::string message = path + ": unknown command " + quote_input(word);
    if (std::string closest = closest_name(word, names); !closest.empty()) {
      message += " (did you mean '" + closest + "'?)";
    } else {
      message += " (commands: " + CLI::detail::join(names, ", ") + ")";
    }
    return message;
  }
  return "";
}

CLI::Option* one_of(CLI::Option* option,
                    const std::vector<std::pair<std::string, std::string>>& names_and_stored,
                    const ValueHint& hint) {
  std::vector<std::string> names;
  for (const auto& [name, stored] : names_and_stored)
    names.push_back(name);
  std::string spoken = spoken_list(names);
  CLI::Validator check(
      [names_and_stored, spoken, hint](std::string& value) -> std::string {
        for (const auto& [name, stored] : names_and_stored) {
          if (value == name) {
            value = stored;
            return "";
          }
        }
        return quote_input(value) + " is not " + spoken + (hint ? hint(value) : "");
      },
      "", kOneOfPrefix + CLI::detail::join(names, "|"));
  option->transform(check);
  return option;
}

CLI::Option* one_of(CLI::Option* option, const std::vector<std::string>& names,
                    const ValueHint& hint) {
  std::vector<std::pair<std::string, std::string>> same;
  for (const auto& n : names)
    same.emplace_back(n, n);
  return one_of(option, same, hint);
}

std::vector<std::string> one_of_values(const CLI::Option* option) {
  // CLI11 lists an option's validators only through a non-const accessor that throws past the end.
  auto* o = const_cast<CLI::Option*>(option);
  for (int i = 0;; ++i) {
    const CLI::Validator* v = nullptr;
    try {
      v = o->get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      return {};
    }
    const std::string& name = v->get_name();
    if (name.rfind(kOneOfPrefix, 0) != 0) continue;
    std::vector<std::string> values;
    std::istringstream in(name.substr(std::string(kOneOfPrefix).size()));
    for (std::string value; std::getline(in, value, '|');)
      values.push_back(value);
    return values;
  }
}

std::string spoken_list(const std::vector<std::string>& words, const std::string& last) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " " + last + " " : ", ";
    out += words[i];
  }
  return out;
}

CLI::Option* non_empty(CLI::Option* option) {
  option->check(CLI::Validator(
      [](std::string& value) -> std::string {
        if (value.empty()) return "an empty value (an unset variable?); give a path";
        return "";
      },
      "", "non-empty"));
  return option;
}

}  // namespace polyaccel::cli
