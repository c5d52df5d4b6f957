// Error and Result: how every module reports a failure (DESIGN.md: errors carry a remedy, no
// exception crosses a module boundary).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace polyaccel {

enum class ErrorCode {
  bad_input,    // the user gave something we cannot use (exit code 2)
  not_found,    // a file, device or library is not there
  io,           // reading or writing failed
  unsupported,  // the host or library cannot do it
  internal,     // a bug or an unexpected state of a library
};

struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string input;    // what the error is about: a file, an option, a spec key
  std::string problem;  // what is wrong with it
  std::string remedy;   // what the user can do, empty when nothing obvious

  // "input: problem (remedy)" on one line, for people.
  std::string message() const;
};

Error bad_input(std::string input, std::string problem, std::string remedy = {});

// A value or an Error. Small on purpose: g++ 12 has no std::expected.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Error> v_;
};

// For operations that return nothing on success.
struct Ok {};
using Status = Result<Ok>;

}  // namespace polyaccel
