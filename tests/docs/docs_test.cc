// Docs that are run: every block of README.md and docs/*.md marked runnable is executed on the
// fixtures and test libraries it names; its exit status and the output the doc shows must be what
// the command does now. The marker, on the line before a ```console block:
//
//   <!-- doc-test exit=1 nvml=hgx-8xh100.json -->
//
// exit: the last command's status (the others must exit 0); nvml: run with the test build of
// NVML (tests/inject/nvml) on that scenario. In the block, "$ " starts a command (a trailing "\"
// continues it); the lines up to the next command are its output (stdout and stderr, as a
// terminal shows them), where a line "..." stands for any number of lines and $TMPDIR for the
// folder. Commands run in the
// source tree with `polyaccel` on PATH, $TMPDIR a fresh folder and COLUMNS=100.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/test_support.h"

namespace polyaccel {
namespace {

namespace fs = std::filesystem;
using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;

struct DocCommand {
  std::string command;
  std::vector<std::string> expected;  // output lines the doc shows; empty: not compared
};

struct DocBlock {
  std::string file;
  int line = 0;
  int exit_code = 0;
  std::string nvml_scenario;
  std::vector<DocCommand> commands;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r'))
      line.pop_back();
    out.push_back(line);
  }
  while (!out.empty() && out.back().empty())
    out.pop_back();
  return out;
}

std::vector<DocBlock> read_blocks(const fs::path& file, const std::string& name) {
  std::vector<DocBlock> blocks;
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  static const std::regex marker(R"(^<!-- doc-test( [^>]*)? -->\s*$)");
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, marker)) continue;
    DocBlock b;
    b.file = name;
    b.line = static_cast<int>(i + 1);
    std::istringstream attrs(m[1].str());
    for (std::string a; attrs >> a;) {
      auto eq = a.find('=');
      std::string key = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
      if (key == "exit") {
        b.exit_code = std::stoi(value);
      } else if (key == "nvml") {
        b.nvml_scenario = value;
      } else {
        ADD_FAILURE() << name << ":" << b.line << ": unknown doc-test attribute " << key;
      }
    }
    size_t j = i + 1;
    if (j >= lines.size() || lines[j].rfind("```console", 0) != 0) {
      ADD_FAILURE() << name << ":" << b.line << ": doc-test marker not followed by ```console";
      continue;
    }
    std::string pending;
    for (++j; j < lines.size() && lines[j].rfind("```", 0) != 0; ++j) {
      const std::string& l = lines[j];
      if (!pending.empty()) {
        pending += "\n" + l;
        if (l.empty() || l.back() != '\\') {
          b.commands.push_back({pending, {}});
          pending.clear();
        }
      } else if (l.rfind("$ ", 0) == 0) {
        if (!l.empty() && l.back() == '\\') {
          pending = l.substr(2);
        } else {
          b.commands.push_back({l.substr(2), {}});
        }
      } else if (!b.commands.empty()) {
        b.commands.back().expected.push_back(l);
      }
    }
    for (auto& c : b.commands) {
      while (!c.expected.empty() && c.expected.back().empty())
        c.expected.pop_back();
    }
    blocks.push_back(b);
    i = j;
  }
  return blocks;
}

std::vector<DocBlock> all_blocks() {
  std::vector<DocBlock> out;
  fs::path src = POLYACCEL_SOURCE_DIR;
  std::vector<fs::path> files{src / "README.md"};
  std::vector<fs::path> docs;
  for (const auto& e : fs::directory_iterator(src / "docs")) {
    if (e.path().extension() == ".md") docs.push_back(e.path());
  }
  std::sort(docs.begin(), docs.end());
  files.insert(files.end(), docs.begin(), docs.end());
  for (const auto& f : files) {
    auto blocks = read_blocks(f, fs::relative(f, src).string());
    out.insert(out.end(), blocks.begin(), blocks.end());
  }
  return out;
}

// Whether `actual` is `expected`, where an expected "..." line matches any run of lines.
bool matches(const std::vector<std::string>& expected, size_t e,
             const std::vector<std::string>& actual, size_t a) {
  if (e == expected.size()) return a == actual.size();
  if (expected[e] == "...") {
    for (size_t k = a; k <= actual.size(); ++k) {
      if (matches(expected, e + 1, actual, k)) return true;
    }
    return false;
  }
  return a < actual.size() && expected[e] == actual[a] && matches(expected, e + 1, actual, a + 1);
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TEST(Docs, EveryRunnableExampleRunsAsDocumented) {
  auto blocks = all_blocks();
  // The docs carry examples on every subject; a lost marker must not pass quietly.
  ASSERT_GE(blocks.size(), 10u);
  fs::path bin_dir = fs::path(polyaccel_binary()).parent_path();
  size_t commands = 0;
  for (const auto& b : blocks) {
    SCOPED_TRACE(b.file + ":" + std::to_string(b.line));
    ASSERT_FALSE(b.commands.empty()) << "a doc-test block without a command";
    TempDir tmp;
    std::string env = "cd " + quoted(POLYACCEL_SOURCE_DIR) +
                      " && PATH=" + quoted(bin_dir.string()) +
                      ":\"$PATH\" TMPDIR=" + quoted(tmp.path().string()) +
                      " COLUMNS=100 POLYACCEL_LOCK_DIR=" + quoted(tmp.path().string());
    if (!b.nvml_scenario.empty()) {
      env += std::string(" POLYACCEL_NVML_LIB=") + quoted(NVML_INJECT_LIB) +
             " NVML_INJECT_SCENARIO=" +
             quoted(std::string(NVML_SCENARIO_DIR) + "/" + b.nvml_scenario) +
             " POLYACCEL_AMD_SMI_LIB=/nonexistent POLYACCEL_ROCM_SMI_LIB=/nonexistent"
             " POLYACCEL_HLML_LIB=/nonexistent";
    }
    for (size_t i = 0; i < b.commands.size(); ++i) {
      const auto& c = b.commands[i];
      std::cout << "[doc] " << b.file << ": " << c.command << "\n";
      ++commands;
      auto r = run_command(env + " sh -c " + quoted(c.command + " 2>&1"));
      int want = i + 1 == b.commands.size() ? b.exit_code : 0;
      EXPECT_EQ(r.exit_code, want) << c.command << "\n" << r.output;
      if (!c.expected.empty()) {
        auto actual = lines_of(r.output);
        std::vector<std::string> expected = c.expected;
        for (auto& l : expected) {
          // The doc names the temporary folder as people would type it.
          for (auto at = l.find("$TMPDIR"); at != std::string::npos; at = l.find("$TMPDIR"))
            l.replace(at, 7, tmp.path().string());
        }
        EXPECT_TRUE(matches(expected, 0, actual, 0)) << c.command << "\n--- the doc shows:\n"
                                                     <<
            [&] {
              std::string s;
              for (const auto& l : c.expected)
                s += l + "\n";
              return s;
            }() << "--- it prints:\n" << r.output;
      }
    }
  }
  std::cout << "[doc] " << commands << " documented commands in " << blocks.size() << " blocks\n";
}

// docs/install.md is the operator's walk from this checkout to a monitored node: what it runs is
// run above (doc-test blocks) or by the image and package tests (Image.*, Guest.node-*,
// Package.deb); what it names must exist: every deploy/ and scripts/ path, every overlay, every
// `make` target. And the README sends the reader there.
TEST(Docs, InstallGuideNamesWhatExists) {
  const fs::path src = POLYACCEL_SOURCE_DIR;
  std::ifstream in(src / "docs/install.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  std::ifstream mk(src / "Makefile");
  std::stringstream makefile;
  makefile << mk.rdbuf();
  size_t paths = 0, targets = 0;
  // A path from the top of the tree (not tests/deploy/...).
  const std::regex path_re(
      R"((^|[^A-Za-z0-9_./-])((deploy|scripts)/[A-Za-z0-9_./*-]*[A-Za-z0-9_*]))");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), path_re);
       it != std::sregex_iterator(); ++it) {
    std::string p = (*it)[2].str();
    if (p.find('*') != std::string::npos) p = fs::path(p).parent_path().string();  // a glob
    EXPECT_TRUE(fs::exists(src / p)) << "docs/install.md names " << (*it)[2].str();
    ++paths;
  }
  const std::regex overlay_re(R"(overlays/([a-z-]+))");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), overlay_re);
       it != std::sregex_iterator(); ++it) {
    EXPECT_TRUE(fs::is_directory(src / "deploy/kubernetes/overlays" / (*it)[1].str()))
        << "docs/install.md names overlay " << it->str();
  }
  // A command: `make X` in code, at a line's start, or after a prompt.
  const std::regex make_re(R"((\n|`|\$ )make ([a-z-]+))");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), make_re);
       it != std::sregex_iterator(); ++it) {
    EXPECT_NE(makefile.str().find("\n" + (*it)[2].str() + ":"), std::string::npos)
        << "docs/install.md runs `make " << (*it)[2].str() << "`, not a target of the Makefile";
    ++targets;
  }
  EXPECT_GT(paths, 5u);
  EXPECT_GE(targets, 2u);
  std::ifstream readme(src / "README.md");
  std::stringstream r;
  r << readme.rdbuf();
  EXPECT_NE(r.str().find("docs/install.md"), std::string::npos) << "README.md does not point to it";
}

}  // namespace
}  // namespace polyaccel
