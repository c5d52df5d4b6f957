#include "launch/supervise.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "launch/exec.h"

namespace polyaccel {

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

}  // namespace

Result<int> run_supervised(const LaunchPlan& plan) {
  sigset_t handled, previous;
  sigemptyset(&handled);
  for (int s : kForwarded)
    sigaddset(&handled, s);
  sigaddset(&handled, SIGCHLD);
  // Blocked before the fork: a signal that arrives at any moment is queued, never lost.
  ::sigprocmask(SIG_BLOCK, &handled, &previous);
  const pid_t supervisor = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    return Error{ErrorCode::io, "fork", std::strerror(errno), ""};
  }
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != supervisor) ::_exit(128 + SIGKILL);  // the supervisor died already
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    Error e = exec_bound(plan);
    std::cerr << "polyaccel: " << e.message() << "\n";
    ::_exit(2);
  }
  int status = 0;
  for (;;) {
    siginfo_t info{};
    int sig = ::sigwaitinfo(&handled, &info);
    if (sig < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (sig != SIGCHLD) {
      ::kill(child, sig);
      continue;
    }
    pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
  }
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 2;
}

}  // namespace polyaccel
