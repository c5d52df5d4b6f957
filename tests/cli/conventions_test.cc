// The CLI's conventions as a user meets them: --version, unknown commands, one-line errors,
// -o yaml, -q, the config file, completion scripts and man pages, agent --listen.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using polyaccel::testing::polyaccel_binary;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::topology_fixture;

using polyaccel::testing::kXe8640;

std::string bin() {
  return polyaccel_binary();
}

TEST(Conventions, VersionNamesCommitAndBuildType) {
  for (const char* flag : {"--version", "-V"}) {
    auto r = run_command(bin() + " " + flag + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.rfind("polyaccel 0.", 0), 0u) << r.output;
    EXPECT_NE(r.output.find("(commit "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(", Release)"), std::string::npos) << r.output;
  }
}

TEST(Conventions, UnknownCommandNamesTheClosest) {
  auto r = run_command(bin() + " tpoo 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "polyaccel: unknown command 'tpoo' (did you mean 'topo'?)\n");
  r = run_command(bin() + " mig plna 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "polyaccel mig: unknown command 'plna' (did you mean 'plan'?)\n");
  r = run_command(bin() + " zzzzzzzz 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("(commands: topo, report"), std::string::npos) << r.output;
}

// The unknown word is the user's: control characters, bytes that are not UTF-8 and escape
// sequences are escaped, at the top and below a command, so the error stays one line.
TEST(Conventions, UnknownCommandIsEscaped) {
  struct Case {
    const char* command;  // the known words before it
    const char* word;     // a printf format: /bin/sh is dash, without $'...'
    const char* said;
  };
  for (const Case& c : {
           Case{"", "tp\\noo", "polyaccel: unknown command 'tp\\noo' (commands: topo, "},
           Case{"", "\\033[2Jzz\\377\\r",
                "polyaccel: unknown command '\\x1b[2Jzz\\xff\\r' (commands: topo, "},
           Case{"mig", "pl\\tan",
                "polyaccel mig: unknown command 'pl\\tan' (did you mean 'plan'?)\n"},
           Case{"sriov", "x\\ny", "polyaccel sriov: unknown command 'x\\ny' (commands: set)\n"},
       }) {
    auto r = run_command(bin() + " " + c.command + " \"$(printf '" + c.word + "')\" 2>&1");
    EXPECT_EQ(r.exit_code, 2) << c.word;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_EQ(r.output.rfind(c.said, 0), 0u) << r.output;
  }
}

TEST(Conventions, ParseErrorsAreOneLine) {
  auto r = run_command(bin() + " topo --no-such-flag 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(r.output.find("Run with --help"), std::string::npos) << r.output;
  EXPECT_EQ(r.output,
            "polyaccel topo: unknown option --no-such-flag (polyaccel topo --help lists the "
            "options)\n");
}

TEST(Conventions, HelpHasOurNameAndNoParserInternals) {
  auto r = run_command(bin() + " topo --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("Usage: polyaccel topo [OPTIONS]"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("value in {"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--accel-backends auto|on|off"), std::string::npos) << r.output;
}

TEST(Conventions, YamlIsTheJsonDocument) {
  std::string fixture = topology_fixture(kXe8640).string();
  auto json = run_command(bin() + " topo --json --topology " + fixture);
  auto yaml = run_command(bin() + " topo -o yaml --topology " + fixture);
  ASSERT_EQ(json.exit_code, 0);
  ASSERT_EQ(yaml.exit_code, 0);
  auto j = nlohmann::json::parse(json.output);
  YAML::Node y = YAML::Load(yaml.output);
  EXPECT_EQ(y["schema_version"].as<int>(), j["schema_version"].get<int>());
  EXPECT_EQ(y["accelerators"].size(), j["accelerators"].size());
  EXPECT_EQ(y["accelerators"][1]["pci_bus_id"].as<std::string>(), "0000:5f:00.0");
  EXPECT_EQ(y["accelerators"][1]["id"].as<std::string>(), "gpu1");
  auto o_json = run_command(bin() + " topo -o json --topology " + fixture);
  EXPECT_EQ(o_json.output, json.output);
}

TEST(Conventions, QuietPrintsNothingAndKeepsTheStatus) {
  std::string fixture = topology_fixture(kXe8640).string();
  auto r = run_command(bin() + " topo -q --topology " + fixture);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "");
  r = run_command(bin() + " topo -q --topology /nonexistent.xml 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("/nonexistent.xml"), std::string::npos);
}

TEST(ConfigFile, FillsWhatTheCommandLineLeftAndFlagsWin) {
  TempDir tmp;
  std::string fixture = topology_fixture(kXe8640).string();
  std::string state = (tmp.path() / "alloc.json").string();
  std::string config = (tmp.path() / "config.yaml").string();
  std::ofstream(config) << "# host settings\ncpu_dedicated_set: 4-27\nstate: " << state
                        << "\nlisten: \"[::1]:0\"\n";
  auto r = run_command(bin() + " place --config " + config + " --topology " + fixture +
                       " --vcpus 2 --memory 1GiB --spec hw:cpu_policy=dedicated --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Without the file the fit pins PUs 0 and 112; the file's dedicated set starts at 4.
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["cells"][0]["cpu_pinning"]["0"], 4) << r.output;
  EXPECT_EQ(j["cells"][0]["cpu_pinning"]["1"], 5) << r.output;
  // A flag wins over the file.
  r = run_command(bin() + " place --config " + config + " --topology " + fixture +
                  " --cpu-dedicated-set 100-101 --vcpus 2 --memory 1GiB"
                  " --spec hw:cpu_policy=dedicated --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["cells"][0]["cpu_pinning"]["0"], 100) << r.output;
  // A value the option refuses is named with the file and line.
  std::ofstream(config) << "cpu_allocation_ratio: lots\n";
  r = run_command(bin() + " place --config " + config + " --topology " + fixture +
                  " --vcpus 2 --memory 1GiB 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output.rfind("polyaccel: " + config + ":1: cpu_allocation_ratio", 0), 0u) << r.output;
}

// Values that parse as the option's type but that the command refuses later (a ratio of 0, a CPU
// list that is not one, an interval of nan) are named by the file's line too, not by a flag the
// user never wrote.
TEST(ConfigFile, ValuesRefusedAfterParsingNameTheFileLine) {
  TempDir tmp;
  std::string fixture = topology_fixture(kXe8640).string();
  std::string config = (tmp.path() / "config.yaml").string();
  struct Case {
    std::string line;
    std::string command;
    std::string named;
  };
  const std::string place = " place --topology " + fixture + " --vcpus 2 --memory 1GiB";
  for (const Case& c : std::vector<Case>{
           {"cpu_allocation_ratio: 0", place, ":2: cpu_allocation_ratio: must be"},
           {"ram_allocation_ratio: nan", place, ":2: ram_allocation_ratio: must be"},
           {"cpu_dedicated_set: 9-x", place, ":2: cpu_dedicated_set 9-x: is not a CPU list"},
           {"cpu_shared_set: ','", place, ":2: cpu_shared_set ,: is not a CPU list"},
           {"reserved_memory_per_node: lots", place,
            ":2: reserved_memory_per_node lots: is not a size"},
           {"interval: inf", " agent --once --topology " + fixture, ":2: interval inf: 'inf' is"},
           {"audit_interval: 0", " agent --once --topology " + fixture,
            ":2: audit_interval 0: '0' is out of range"},
       }) {
    std::ofstream(config, std::ios::trunc) << "# host settings\n" << c.line << "\n";
    auto r = run_command(bin() + c.command + " --config " + config + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << c.line << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("polyaccel: " + config + c.named, 0), 0u) << c.line << "\n"
                                                                       << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

TEST(ConfigFile, UnknownKeyIsRefusedWithFileAndLine) {
  TempDir tmp;
  std::string config = (tmp.path() / "config.yaml").string();
  std::ofstream(config) << "state: /tmp/x.json\n\ncpu_dedicated: 1-3\n";
  auto r = run_command(bin() + " topo --config " + config + " --topology " +
                       topology_fixture(kXe8640).string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output.rfind("polyaccel: " + config + ":3: unknown key 'cpu_dedicated'", 0), 0u)
      << r.output;
  r = run_command(bin() + " topo --config " + (tmp.path() / "absent.yaml").string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("no such config file"), std::string::npos) << r.output;
}

// issue 32: an option typo is named with the closest option of the command, not "the following
// arguments were not expected: VALUE --option".
TEST(Conventions, UnknownOptionNamesTheClosest) {
  std::string topo = topology_fixture(kXe8640).string();
  struct Case {
    std::string args;
    std::string said;
  };
  for (const Case& c : {
           Case{"topo --topolgy " + topo,
                "polyaccel topo: unknown option --topolgy (did you mean --topology?)\n"},
           Case{"place --mem 4GiB --topology " + topo,
                "polyaccel place: unknown option --mem (did you mean --memory?)\n"},
           Case{"agent --port 9477",
                "polyaccel agent: unknown option --port (did you mean "
                "--listen?)\n"},
           Case{"topo --zzzzzzzzzz=1",
                "polyaccel topo: unknown option --zzzzzzzzzz (polyaccel topo --help lists the "
                "options)\n"},
       }) {
    auto r = run_command(bin() + " " + c.args + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_EQ(r.output, c.said) << c.args;
  }
  auto run = run_command(bin() + " run --dry-run --local-rank 0 --topology " + topo +
                         " echo --zzzzzz 2>&1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("unknown option --zzzzzz (the command's own options go after --)"),
            std::string::npos)
      << run.output;
  // A value that looks like an option, after an option that takes one, is the value.
  auto r = run_command(bin() + " topo -q --topology " + topo + " -C gpu0 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Every option with a fixed set of values says which in words, and takes no number for a word.
TEST(Conventions, EnumValuesInWordsAndNoNumbers) {
  std::string topo = " --topology " + topology_fixture(kXe8640).string();
  struct Case {
    std::string args;
    std::string said;
  };
  for (const Case& c : {
           Case{"topo --color blue", "--color: 'blue' is not auto, always or never"},
           Case{"topo --color 1" + topo, "--color: '1' is not auto, always or never"},
           Case{"topo --accel-backends 2" + topo, "'2' is not auto, on or off"},
           Case{"audit --role 0" + topo, "'0' is not auto, hypervisor or compute"},
           Case{"audit --fail-on x" + topo, "'x' is not critical, warning or info"},
           Case{"place --strategy best" + topo, "'best' is not polyaccel or first-fit"},
           Case{"cdi generate --cdi-version 1" + topo, "'1' is not 0.5.0, 0.6.0, 0.7.0 or 0.8.0"},
       }) {
    auto r = run_command(bin() + " " + c.args + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_NE(r.output.find(c.said), std::string::npos) << c.args << ": " << r.output;
    EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("->"), std::string::npos) << r.output;
  }
  auto r = run_command(bin() + " topo -q --color always" + topo);
  EXPECT_EQ(r.exit_code, 0);
}

TEST(Conventions, EmptyPathIsRefused) {
  for (const char* args : {"topo --topology ''", "topo --fsroot ''", "audit --root ''",
                           "nccl-topo --output-file ''", "cdi generate --cdi-dir ''"}) {
    auto r = run_command(bin() + " " + args + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find("an empty value"), std::string::npos) << args << ": " << r.output;
  }
}

// `--name=` is an empty value and the next word stays a word of its own: CLI11 alone took it as the
// value (the DRA DaemonSet's `--kubelet-dir=` swallowed its `--nfd-features-dir=...`, which then
// served as the device-plugins directory).
TEST(Conventions, AnEmptyValueAfterEqualsTakesNotTheNextWord) {
  std::string topo = " --topology " + topology_fixture(kXe8640).string();
  auto r = run_command(bin() + " agent --once --accel-backends off" + topo +
                       " --kubelet-dir= --pod-resources-socket= --nfd-features-dir= --json 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("{", 0), 0u)
      << "--json was taken as a value: " << r.output.substr(0, 300);
  // A lone -- ends the options: what follows it is left as it is.
  r = run_command(bin() + " run --dry-run" + topo + " -- /bin/echo --x= 2>&1");
  EXPECT_NE(r.output.find("--x="), std::string::npos) << r.output;
}

// issue 29 (12): -o is the output format in every command; a value that is no format names the
// option that was meant.
TEST(Conventions, DashOIsTheFormatEverywhere) {
  std::string topo = " --topology " + topology_fixture(kXe8640).string();
  TempDir tmp;
  struct Case {
    std::string args;
    std::string said;
  };
  for (const Case& c : {
           Case{"topo -o xml" + topo, "(hwloc XML: --of xml)"},
           Case{"nccl-topo -o " + (tmp.path() / "t.xml").string() + topo, "--output-file"},
           Case{"cdi generate -o " + (tmp.path() / "cdi").string() + topo, "--cdi-dir DIR"},
       }) {
    auto r = run_command("cd " + tmp.path().string() + " && " + bin() + " " + c.args + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_NE(r.output.find(c.said), std::string::npos) << c.args << ": " << r.output;
  }
  for (const char* command : {"nccl-topo", "cdi generate", "topo", "flavors", "report"}) {
    auto r = run_command("cd " + tmp.path().string() + " && " + bin() + " " + command + topo +
                         " -o yaml 2>/dev/null");
    // cdi generate: this host has no device minors for the capture's GPUs, all are skipped.
    EXPECT_EQ(r.exit_code, std::string(command) == "cdi generate" ? 1 : 0)
        << command << ": " << r.output;
    EXPECT_NO_THROW(YAML::Load(r.output)) << command;
    EXPECT_EQ(r.output.find('{'), std::string::npos) << command << ": YAML, not JSON";
  }
  // Nothing was written where -o's value would name a file or directory.
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

// issue 32: prose keeps its blanks after commas, whatever the width; lists stay glued.
TEST(Conventions, WrappedProseKeepsItsBlanksAfterCommas) {
  for (const char* columns : {"200", "40"}) {
    auto r = run_command(std::string("COLUMNS=") + columns + " " + bin() + " topo --topology " +
                         topology_fixture(kXe8640).string());
    ASSERT_EQ(r.exit_code, 0);
    std::string first = r.output.substr(0, r.output.find("(xml:"));
    EXPECT_EQ(first.rfind("Host testhost-nvidia, x86_64, page size", 0), 0u) << first;
    EXPECT_EQ(first.find(",x86_64"), std::string::npos) << first;
    EXPECT_NE(r.output.find("CPUs 0-55,112-167"), std::string::npos) << r.output;
  }
}

// issue 32: report shows topo's NUMA table, free memory included (one table).
TEST(Conventions, ReportShowsTopoNumaTable) {
  auto header = [](const std::string& text) {
    auto at = text.find("NUMA nodes\n");
    if (at == std::string::npos) return std::string();
    auto line = text.find('\n', at + 11);
    return text.substr(at, line - at);
  };
  auto topo = run_command(bin() + " topo");
  auto report = run_command(bin() + " report");
  ASSERT_EQ(topo.exit_code, 0);
  ASSERT_EQ(report.exit_code, 0);
  EXPECT_NE(header(topo.output).find("free"), std::string::npos) << topo.output;
  EXPECT_EQ(header(report.output), header(topo.output)) << report.output;
}

TEST(Completion, ScriptsNameEveryCommandAndParse) {
  auto bash = run_command(bin() + " completion bash");
  ASSERT_EQ(bash.exit_code, 0);
  for (const char* word : {"topo", "place", "mig/plan", "--cpu-dedicated-set", "--topology"})
    EXPECT_NE(bash.output.find(word), std::string::npos) << word;
  TempDir tmp;
  std::ofstream(tmp.path() / "c.bash") << bash.output;
  // bash parses it, and completing "polyaccel mig p" offers plan and partition.
  auto r = run_command("bash -c 'source " + (tmp.path() / "c.bash").string() +
                       "; COMP_WORDS=(polyaccel mig p); COMP_CWORD=2; _polyaccel; echo "
                       "${COMPREPLY[*]}'");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "plan partition profiles\n");
  auto zsh = run_command(bin() + " completion zsh");
  EXPECT_EQ(zsh.exit_code, 0);
  EXPECT_EQ(zsh.output.rfind("#compdef polyaccel", 0), 0u);
  auto fish = run_command(bin() + " completion fish");
  EXPECT_EQ(fish.exit_code, 0);
  EXPECT_NE(fish.output.find("complete -c polyaccel -n '__fish_use_subcommand' -a topo"),
            std::string::npos);
  EXPECT_EQ(run_command(bin() + " completion tcsh 2>/dev/null").exit_code, 2);
}

// issue 32: after an enum option its values, after a device option the host's device ids (as
// kubectl completes resource names), after -o the formats (issue 29: not files).
TEST(Completion, EnumValuesAndDeviceIds) {
  auto bash = run_command(bin() + " completion bash");
  ASSERT_EQ(bash.exit_code, 0);
  TempDir tmp;
  std::ofstream(tmp.path() / "c.bash") << bash.output;
  std::string bin_dir = std::filesystem::path(bin()).parent_path().string();
  auto complete = [&](const std::string& words, int cword) {
    auto r = run_command("bash -c 'PATH=" + bin_dir + ":$PATH; source " +
                         (tmp.path() / "c.bash").string() + "; COMP_WORDS=(" + words +
                         "); COMP_CWORD=" + std::to_string(cword) +
                         "; _polyaccel; echo ${COMPREPLY[*]}'");
    EXPECT_EQ(r.exit_code, 0) << words;
    return r.output;
  };
  EXPECT_EQ(complete("polyaccel topo --accel-backends \"\"", 3), "auto on off\n");
  EXPECT_EQ(complete("polyaccel topo --color a", 3), "auto always\n");
  EXPECT_EQ(complete("polyaccel nccl-topo -o \"\"", 3), "table json yaml\n");
  EXPECT_EQ(complete("polyaccel cdi generate --format y", 4), "yaml\n");
  EXPECT_EQ(complete("polyaccel audit --role h", 3), "hypervisor\n");
  std::string topo = topology_fixture(kXe8640).string();
  EXPECT_EQ(complete("polyaccel topo --topology " + topo + " -C g", 5), "gpu0 gpu1 gpu2 gpu3\n");
  EXPECT_EQ(complete("polyaccel run --topology " + topo + " --gpu 0000:5", 5),
            "0000:5f:00.0 0000:5e:00.0\n");  // the GPU, and the NIC beside it
  auto fish = run_command(bin() + " completion fish");
  EXPECT_NE(fish.output.find("-l color -x -a 'auto always never'"), std::string::npos);
  EXPECT_NE(fish.output.find("-s C -l device -x -a '(polyaccel __devices)'"), std::string::npos);
  // The hidden command is no command a user is offered.
  EXPECT_EQ(bash.output.find("__devices'"), std::string::npos);
  auto r = run_command(bin() + " zzzzzzzz 2>&1");
  EXPECT_EQ(r.output.find("__devices"), std::string::npos) << r.output;
}

// issue 32: the man pages have the sections a man page has, not only --help as troff.
TEST(ManPages, ExamplesExitStatusFilesSeeAlso) {
  TempDir tmp;
  ASSERT_EQ(run_command(bin() + " man " + tmp.path().string()).exit_code, 0);
  for (const char* page :
       {"polyaccel.1", "polyaccel-place.1", "polyaccel-mig-plan.1", "polyaccel-sriov-set.1"}) {
    std::ifstream in(tmp.path() / page);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    for (const char* section :
         {".SH EXAMPLES\n", ".SH EXIT STATUS\n", ".SH FILES\n", ".SH SEE ALSO\n"}) {
      EXPECT_NE(text.find(section), std::string::npos) << page << " lacks " << section;
    }
  }
  std::ifstream in(tmp.path() / "polyaccel-place.1");
  std::string place((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(place.find("/var/lib/polyaccel/allocations.json"), std::string::npos);
  EXPECT_NE(place.find("\\-\\-hugepages\\-per\\-node"), std::string::npos);
  std::ifstream top(tmp.path() / "polyaccel.1");
  std::string root((std::istreambuf_iterator<char>(top)), {});
  EXPECT_NE(root.find("\\fBpolyaccel\\-topo\\fR(1)"), std::string::npos);
}

TEST(ManPages, OnePerCommandFromTheOptionDefinitions) {
  TempDir tmp;
  auto r = run_command(bin() + " man " + tmp.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* page :
       {"polyaccel.1", "polyaccel-topo.1", "polyaccel-mig-plan.1", "polyaccel-agent.1"}) {
    EXPECT_TRUE(std::filesystem::exists(tmp.path() / page)) << page;
  }
  std::ifstream in(tmp.path() / "polyaccel-place.1");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find(".TH POLYACCEL-PLACE 1"), std::string::npos);
  EXPECT_NE(text.find("\\-\\-cpu\\-dedicated\\-set"), std::string::npos);
  EXPECT_NE(text.find("Nova's cpu_dedicated_set"), std::string::npos);
  if (run_command("command -v man >/dev/null").exit_code == 0) {
    auto shown = run_command("MANWIDTH=80 man -l " + (tmp.path() / "polyaccel-place.1").string() +
                             " 2>&1 | head -5");
    EXPECT_NE(shown.output.find("polyaccel-place"), std::string::npos) << shown.output;
  }
}

TEST(AgentListen, BadAddressesInOurWords) {
  struct Case {
    const char* listen;
    const char* says;
  };
  for (const Case& c : {Case{"127.0.0.1:99999", "port 99999 is out of range"},
                        Case{"localhost:9477", "is not an IP address"},
                        Case{"::1:9477", "an IPv6 address needs brackets"},
                        Case{"[::1:9477", "needs brackets and a port"},
                        Case{"192.0.2.1:9477", "cannot listen: Cannot assign requested address"}}) {
    auto r = run_command(bin() + " agent --topology " + topology_fixture(kXe8640).string() +
                         " --kubelet-dir '' --pod-resources-socket '' --nfd-features-dir '' "
                         "--state '' --listen '" +
                         c.listen + "' 2>&1");
    EXPECT_EQ(r.exit_code, 2) << c.listen;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.listen << ": " << r.output;
    EXPECT_EQ(r.output.find("null context"), std::string::npos) << r.output;
  }
}

TEST(AgentJson, OnceJsonIsTheScrapeAndPlainJsonIsRefused) {
  std::string args = " agent --topology " + topology_fixture(kXe8640).string() +
                     " --kubelet-dir '' --pod-resources-socket '' --nfd-features-dir '' --state ''"
                     " --audit-interval off";
  auto r = run_command(bin() + args + " --once --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["schema_version"], 1);
  bool build_info = false;
  for (const auto& f : j["families"]) {
    if (f["name"] != "polyaccel_build_info") continue;
    build_info = true;
    EXPECT_EQ(f["type"], "gauge");
    EXPECT_EQ(f["samples"][0]["labels"]["build_type"], "Release");
    EXPECT_FALSE(f["samples"][0]["labels"]["revision"].get<std::string>().empty());
  }
  EXPECT_TRUE(build_info) << r.output.substr(0, 2000);
  r = run_command(bin() + args + " --json 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--once --json"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace polyaccel
