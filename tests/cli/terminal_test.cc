// Human output as people see it: the real binary in a pseudo-terminal of 80 and 160 columns
// (forkpty, as tmux or a terminal emulator gives it). No line may be wider than the terminal,
// table columns line up, and colour appears on the terminal only.
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <sstream>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::run_command;
using polyaccel::testing::topology_fixture;

struct PtyResult {
  int exit_code = -1;
  std::string output;
};

// Runs argv in a pty of `columns` x 50; returns what the terminal received.
PtyResult run_in_pty(const std::vector<std::string>& args, unsigned short columns) {
  winsize ws{};
  ws.ws_col = columns;
  ws.ws_row = 50;
  int master = -1;
  pid_t pid = ::forkpty(&master, nullptr, nullptr, &ws);
  if (pid < 0) return {};
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::unsetenv("COLUMNS");
    ::unsetenv("NO_COLOR");
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  PtyResult r;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO once the child closed its side
    r.output.append(buf, static_cast<size_t>(n));
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();  // the pty's ONLCR
    out.push_back(l);
  }
  return out;
}

std::string strip_colour(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\033' && i + 1 < s.size() && s[i + 1] == '[') {
      i += 2;
      while (i < s.size() && !(s[i] >= '@' && s[i] <= '~'))
        ++i;
      continue;
    }
    out += s[i];
  }
  return out;
}

// The lines of the section after `title`, up to the next blank line.
std::vector<std::string> section(const std::vector<std::string>& all, const std::string& title) {
  std::vector<std::string> out;
  bool in = false;
  for (const auto& l : all) {
    if (in && l.empty()) break;
    if (in) out.push_back(l);
    if (l == title) in = true;
  }
  return out;
}

// Each row's column starts (after the indent): where a cell begins after two or more blanks.
std::vector<size_t> starts(const std::string& row) {
  std::vector<size_t> out;
  size_t i = row.find_first_not_of(' ');
  if (i == std::string::npos) return out;
  out.push_back(i);
  while ((i = row.find("  ", i)) != std::string::npos) {
    i = row.find_first_not_of(' ', i);
    if (i == std::string::npos) break;
    out.push_back(i);
  }
  return out;
}

const char* const kFixtures[] = {
    "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml",
    "2socket-nps4-8numa-4xA100-4xmlx5-pcieswitch_jureca-dc-gpu.xml",
    "1socket-nps4-4numa-8xMI250X-gcd-4xslingshot_hpe-ex235a.xml",
};

class TerminalWidth : public ::testing::TestWithParam<unsigned short> {};

TEST_P(TerminalWidth, TopoFitsAndAligns) {
  const unsigned short width = GetParam();
  for (const char* fixture : kFixtures) {
    if (!std::filesystem::exists(topology_fixture(fixture))) continue;
    SCOPED_TRACE(fixture);
    auto r = run_in_pty(
        {polyaccel_binary(), "topo", "--topology", topology_fixture(fixture).string()}, width);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto all = lines(strip_colour(r.output));
    ASSERT_GT(all.size(), 10u);
    for (const auto& l : all) {
      // Only a single word longer than the terminal (a long file name) may pass its edge.
      bool one_word = l.find(' ', l.find_first_not_of(' ')) == std::string::npos;
      EXPECT_TRUE(l.size() <= width || one_word) << "wider than the terminal: " << l;
    }
    // NIC and accelerator rows: the PCI address column starts at the same place in every row.
    for (const char* title : {"NICs", "Accelerators"}) {
      std::set<size_t> address_columns;
      for (const auto& row : section(all, title)) {
        auto s = starts(row);
        if (row.rfind("  nic", 0) == 0 || row.rfind("  gpu", 0) == 0 ||
            row.rfind("  hpu", 0) == 0) {
          ASSERT_GE(s.size(), 2u) << row;
          address_columns.insert(s[1]);
        }
      }
      EXPECT_LE(address_columns.size(), 1u) << title << " rows do not align";
    }
    // The link matrix: every row's cells start where the header's do.
    auto matrix = section(all, "Links");
    ASSERT_GE(matrix.size(), 2u);
    auto head = starts(matrix[0]);
    for (size_t i = 1; i < matrix.size(); ++i) {
      auto s = starts(matrix[i]);
      // The row label takes the header's empty first cell.
      for (size_t c = 1; c < std::min(s.size(), head.size() + 1); ++c)
        EXPECT_EQ(s[c], head[c - 1]) << matrix[i];
    }
  }
}

TEST_P(TerminalWidth, HelpAndAuditFit) {
  const unsigned short width = GetParam();
  auto help = run_in_pty({polyaccel_binary(), "place", "--help"}, width);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.output.find("ENUM"), std::string::npos) << help.output;
  EXPECT_EQ(help.output.find("value in {"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("Usage: polyaccel place"), std::string::npos) << help.output;
}

INSTANTIATE_TEST_SUITE_P(Columns, TerminalWidth, ::testing::Values(80, 160));

TEST(TerminalColour, OnATerminalOnlyUnlessAsked) {
  std::string fixture = topology_fixture(kFixtures[0]).string();
  auto tty = run_in_pty({polyaccel_binary(), "topo", "--topology", fixture}, 160);
  EXPECT_NE(tty.output.find("\033["), std::string::npos) << "no colour on a terminal";
  auto never =
      run_in_pty({polyaccel_binary(), "topo", "--color=never", "--topology", fixture}, 160);
  EXPECT_EQ(never.output.find("\033["), std::string::npos);
  auto pipe = run_command(polyaccel_binary() + " topo --topology " + fixture);
  EXPECT_EQ(pipe.output.find("\033["), std::string::npos) << "colour into a pipe";
  auto always = run_command(polyaccel_binary() + " topo --color=always --topology " + fixture);
  EXPECT_NE(always.output.find("\033["), std::string::npos);
}

}  // namespace
}  // namespace polyaccel
