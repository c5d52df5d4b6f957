#include "core/error.h"

#include "core/strings.h"

namespace polyaccel {

std::string Error::message() const {
  std::string m = input.empty() ? problem : input + ": " + problem;
  if (!remedy.empty()) m += " (" + remedy + ")";
  // One line whatever the input held: a newline or a stray byte in a file name or a value is
  // escaped here, where every error is printed from.
  return printable(m);
}

Error bad_input(std::string input, std::string problem, std::string remedy) {
  return Error{ErrorCode::bad_input, std::move(input), std::move(problem), std::move(remedy)};
}

}  // namespace polyaccel
