#include "core/error.h"

namespace polyaccel {

std::string Error::message() const {
  std::string m = input.empty() ? problem : input + ": " + problem;
  if (!remedy.empty()) m += " (" + remedy + ")";
  return m;
}

Error bad_input(std::string input, std::string problem, std::string remedy) {
  return Error{ErrorCode::bad_input, std::move(input), std::move(problem), std::move(remedy)};
}

}  // namespace polyaccel
