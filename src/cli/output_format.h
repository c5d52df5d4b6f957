// The output options every command takes (--color, -o/--format, -q, -v) and the one place that
// turns a command's JSON into YAML or drops its output for -q.
#pragma once

#include <iostream>
#include <sstream>

#include "cli/commands.h"

namespace CLI {
class App;
}

namespace polyaccel::cli {

// Adds --color WHEN, -o/--format FORMAT (the same in every command), -q/--quiet and
// -v/--verbose, bound to `g`.
void add_output_options(CLI::App* cmd, GlobalOptions& g);

// After parsing: -o json|yaml sets json, the style is detected from --color and stdout.
Status settle_output_options(GlobalOptions& g);

// For -o yaml and -q: while it lives std::cout writes to a buffer; at its end the buffer is
// written out as YAML (when it holds JSON), or dropped for -q. A no-op otherwise.
class FormattedOutput {
 public:
  explicit FormattedOutput(const GlobalOptions& g);
  ~FormattedOutput();
  FormattedOutput(const FormattedOutput&) = delete;
  FormattedOutput& operator=(const FormattedOutput&) = delete;

 private:
  bool yaml_ = false;
  bool quiet_ = false;
  std::ostringstream buffer_;
  std::streambuf* saved_ = nullptr;
};

// JSON text as YAML (block style; strings quoted where YAML would read them as something else).
Result<std::string> json_to_yaml(const std::string& json_text);

}  // namespace polyaccel::cli
