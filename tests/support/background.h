// A process a test runs in the background (an agent, a Prometheus server): started with
// posix_spawn, so that it is the test's own child and its exit status can be read; stdout and
// stderr go to a log file. Header-only, as test_support.h.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace polyaccel::testing {

class Background {
 public:
  // A shell command line (`exec` in it makes the program itself the child); the log is new.
  Background(const std::string& command, const std::filesystem::path& log)
      : Background(std::vector<std::string>{"/bin/sh", "-c", command}, log, false) {}
  // A program and its arguments, no shell; with `append` the log keeps what an earlier run of
  // the same test wrote (a restart).
  Background(std::vector<std::string> argv, const std::filesystem::path& log, bool append)
      : log_(log) {
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, log.c_str(),
                                     O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    if (::posix_spawn(&pid_, args[0], &files, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&files);
  }
  ~Background() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 200 && !reaped(WNOHANG); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      reaped(0);
    }
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  bool started() const { return pid_ > 0 || status_.has_value(); }
  std::string log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // SIGTERM, then waits for it: its exit code, or nullopt when a signal ended it (or it was
  // never started).
  std::optional<int> terminate() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      reaped(0);
    }
    if (!status_ || !WIFEXITED(*status_)) return std::nullopt;
    return WEXITSTATUS(*status_);
  }

 private:
  // Whether the child was reaped now (waitpid with `flags`); its status is kept.
  bool reaped(int flags) {
    int status = 0;
    if (::waitpid(pid_, &status, flags) != pid_) return false;
    status_ = status;
    pid_ = -1;
    return true;
  }

  std::filesystem::path log_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

}  // namespace polyaccel::testing
