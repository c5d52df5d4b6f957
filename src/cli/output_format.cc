#include "cli/output_format.h"

#include "cli/conventions.h"

#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <map>
#include <nlohmann/json.hpp>

namespace polyaccel::cli {
namespace {

bool reads_as_other_type(const std::string& text) {
  if (text.empty()) return true;
  std::string lower;
  for (char c : text)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const char* const kWords[] = {"true", "false", "yes", "no", "on",
                                       "off",  "null",  "~",   "y",  "n"};
  for (const char* w : kWords) {
    if (lower == w) return true;
  }
  char first = text[0];
  return std::isdigit(static_cast<unsigned char>(first)) || first == '-' || first == '+' ||
         first == '.';
}

void emit(YAML::Emitter& out, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [k, v] : j.items()) {
        out << YAML::Key << k << YAML::Value;
        emit(out, v);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& v : j)
        emit(out, v);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      // yaml-cpp quotes what would not parse as a plain scalar; a string YAML would read as a
      // number, boolean or null is quoted here.
      const std::string& text = j.get_ref<const std::string&>();
      if (reads_as_other_type(text)) {
        out << YAML::DoubleQuoted << text;
      } else {
        out << text;
      }
      break;
    }
    case nlohmann::json::value_t::boolean:
      out << (j.get<bool>() ? "true" : "false");
      break;
    case nlohmann::json::value_t::null:
      out << YAML::Null;
      break;
    default:
      out << j.dump();  // numbers as JSON writes them
  }
}

}  // namespace

void add_output_options(CLI::App* cmd, GlobalOptions& g) {
  one_of(cmd->add_option("--color", g.color, "colour: auto (on a terminal), always, never"),
         std::vector<std::pair<std::string, ColorMode>>{{"auto", ColorMode::automatic},
                                                        {"always", ColorMode::always},
                                                        {"never", ColorMode::never}})
      ->type_name("WHEN");
  // -o is the output format in every command, as in kubectl; commands that write files name
  // them with their own long options (nccl-topo --output-file, cdi generate --cdi-dir).
  // A value that is no format is what the command's own option takes: say which.
  std::string name = cmd->get_name();
  bool cdi_generate =
      name == "generate" && cmd->get_parent() && cmd->get_parent()->get_name() == "cdi";
  ValueHint hint = [name, cdi_generate](const std::string& refused) -> std::string {
    if (name == "topo" && refused == "xml") return " (hwloc XML: --of xml)";
    if (name == "nccl-topo") return " (-o is the output format; write a file with --output-file)";
    if (cdi_generate) return " (-o is the output format; write the specs with --cdi-dir DIR)";
    return "";
  };
  one_of(cmd->add_option("-o,--format", g.format,
                         "output format: table (for people), json (as --json) or yaml"),
         std::vector<std::string>{"table", "json", "yaml"}, hint)
      ->type_name("FORMAT");
  cmd->add_flag("-q,--quiet", g.quiet, "print nothing on stdout; the exit status says it");
  cmd->add_flag("-v,--verbose", g.verbose,
                "more detail for people (topo: each device's PCIe path)");
}

Status settle_output_options(GlobalOptions& g) {
  if (g.format == "json" || g.format == "yaml") {
    g.json = true;
  } else if (g.format == "table" && g.json) {
    return bad_input("-o table", "contradicts --json", "give one of them");
  }
  g.style = detect_output_style(g.color);
  g.style.verbose = g.verbose > 0;
  return Ok{};
}

FormattedOutput::FormattedOutput(const GlobalOptions& g)
    : yaml_(g.format == "yaml"), quiet_(g.quiet) {
  if (yaml_ || quiet_) saved_ = std::cout.rdbuf(buffer_.rdbuf());
}

FormattedOutput::~FormattedOutput() {
  if (!saved_) return;
  std::cout.flush();
  std::cout.rdbuf(saved_);
  if (quiet_) return;
  auto yaml = json_to_yaml(buffer_.str());
  std::cout << (yaml ? *yaml : buffer_.str());
  std::cout.flush();
}

Result<std::string> json_to_yaml(const std::string& json_text) {
  auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded()) return bad_input("output", "is not JSON");
  YAML::Emitter out;
  emit(out, j);
  return std::string(out.c_str()) + "\n";
}

}  // namespace polyaccel::cli
