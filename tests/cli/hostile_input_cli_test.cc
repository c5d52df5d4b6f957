// Every bad input refused cleanly, through the real binary: exit code 2, one line on stderr that
// names the input, nothing written (the directory is compared before and after). A table per
// class: special and huge files for every file option, huge and wrapping numbers for every
// parser, non-UTF-8 and control characters in arguments and captures, unbounded requests.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using testing::polyaccel_binary;
using testing::read_text;
using testing::run_command;
using testing::TempDir;
using testing::topology_fixture;
using testing::xe8640_topology;

// Name, type, size, mode and content of everything under `dir`: what "nothing written" means.
std::map<std::string, std::string> snapshot(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           dir, std::filesystem::directory_options::none)) {
    struct stat st {};
    ::lstat(e.path().c_str(), &st);
    std::string what = std::to_string(st.st_mode) + " " + std::to_string(st.st_size);
    if (S_ISREG(st.st_mode) && st.st_size < (1 << 20)) what += " " + read_text(e.path());
    out[e.path().string()] = what;
  }
  return out;
}

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::chrono::milliseconds took{0};
};

// Runs polyaccel ARGS with stdout and stderr apart; `timeout` turns a hang into a failure.
Outcome polyaccel(const std::string& args, const std::filesystem::path& scratch) {
  auto out = scratch / ".out", err = scratch / ".err";
  auto start = std::chrono::steady_clock::now();
  auto r = run_command("timeout 60 " + polyaccel_binary() + " " + args + " >'" + out.string() +
                       "' 2>'" + err.string() + "'");
  Outcome o{r.exit_code, read_text(out), read_text(err),
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)};
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return o;
}

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// The promise for bad input, checked on one command.
void expect_refused(const std::string& args, const std::string& names,
                    const std::filesystem::path& dir, const std::filesystem::path& scratch) {
  auto before = snapshot(dir);
  auto o = polyaccel(args, scratch);
  EXPECT_EQ(o.exit_code, 2) << args << "\n" << o.err;
  EXPECT_EQ(lines(o.err), 1u) << args << "\n" << o.err;
  EXPECT_NE(o.err.find(names), std::string::npos) << args << "\n" << o.err;
  EXPECT_EQ(o.err.rfind("polyaccel", 0), 0u) << args << "\n" << o.err;
  EXPECT_EQ(snapshot(dir), before) << args;
}

class HostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path() / "work";
    scratch_ = tmp_.path() / "scratch";
    std::filesystem::create_directories(dir_);
    std::filesystem::create_directories(scratch_);
    state_ = (dir_ / "state.json").string();
  }
  void refused(const std::string& args, const std::string& names) {
    expect_refused(args, names, dir_, scratch_);
  }
  std::string file(const std::string& name, const std::string& content) {
    auto p = dir_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  std::string place(const std::string& args) {
    return "place --topology '" + xe8640_topology() + "' --state '" + state_ + "' " + args;
  }
  TempDir tmp_;
  std::filesystem::path dir_, scratch_;
  std::string state_;
};

// FIFO, character devices, directory, socket, link loop and a file past its limit, for every
// option that names a file. Each was a hang, a read of all memory or an uncaught exception.
TEST_F(HostileInput, SpecialAndHugeFilesForEveryFileOption) {
  const auto fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto loop = dir_ / "loop";
  std::filesystem::create_symlink(loop, loop);
  const auto huge = dir_ / "huge";
  { std::ofstream(huge) << "x"; }
  std::filesystem::resize_file(huge, std::uint64_t{80} << 20);  // sparse, past every limit
  const auto subdir = dir_ / "subdir";
  std::filesystem::create_directory(subdir);
  const auto sock = dir_ / "sock";
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);

  // A committed placement, for nccl-topo --libvirt.
  auto committed = polyaccel(place("--vcpus 2 --memory 1GiB --commit --name vm"), scratch_);
  ASSERT_EQ(committed.exit_code, 0) << committed.err;

  const std::map<std::string, std::string> bad_files = {
      {fifo.string(), "is a FIFO"},
      {"/dev/zero", "is a character device"},
      {"/dev/urandom", "is a character device"},
      {subdir.string(), "is a directory"},
      {sock.string(), "is a socket"},
      {loop.string(), "Too many levels of symbolic links"},
      {huge.string(), "limit"},
  };
  const std::string agent =
      "agent --listen 127.0.0.1:0 --pod-resources-socket '' --kubelet-dir '' "
      "--nfd-features-dir '' --state '' --accel-backends off ";
  const std::vector<std::string> commands = {
      "topo --topology '{}'",
      place("--vcpus 1 --memory 1GiB --flavor '{}'"),
      place("--vcpus 1 --memory 1GiB --pci-alias-file '{}'"),
      "place --topology '" + xe8640_topology() + "' --vcpus 1 --memory 1GiB --state '{}'",
      "nccl-topo --topology '" + xe8640_topology() + "' --state '" + state_ +
          "' --placement vm --libvirt '{}'",
      "mig plan --model H100-SXM5-80GB --gpus 1 -f '{}' -c all-1g.10gb",
      agent + "--topology '" + xe8640_topology() + "' --once --health-config '{}'",
      agent + "--topology '" + xe8640_topology() + "' --sharing-config '{}'",
      agent + "--topology '" + xe8640_topology() + "' --nic-config '{}'",
      // The state file as each command that reads or writes it takes it: no lock file is made
      // beside a refused one, and `run` refuses it as `place` does (it warned and went on).
      "place --topology '" + xe8640_topology() +
          "' --vcpus 1 --memory 1GiB --commit --name v --state '{}'",
      "release --topology '" + xe8640_topology() + "' --state '{}' vm",
      "run --topology '" + xe8640_topology() + "' --dry-run --gpus 1 --state '{}' -- true",
      "run --topology '" + xe8640_topology() +
          "' --dry-run --gpus 1 --reserve r --state '{}' -- true",
  };
  for (const auto& command : commands) {
    for (const auto& [path, problem] : bad_files) {
      std::string args = command;
      args.replace(args.find("{}"), 2, path);
      auto o = polyaccel(args, scratch_);
      SCOPED_TRACE(args);
      if (command.rfind("mig plan", 0) == 0 && o.exit_code == 2 &&
          o.err.find("-f FILE") != std::string::npos)
        continue;  // this polyaccel plans -f files only for the host's GPUs
      expect_refused(args, problem, dir_, scratch_);
      EXPECT_LT(o.took, std::chrono::seconds(20));
    }
  }
  ::close(fd);
}

// A directory the agent only looks for (kubelet's, node-feature-discovery's) that is a link
// loop is "not there", as an absent one: it aborted with an uncaught filesystem_error.
TEST_F(HostileInput, AgentDirectoriesThatAreLinkLoops) {
  const auto loop = dir_ / "loop";
  std::filesystem::create_symlink(loop, loop);
  auto o = polyaccel(
      "agent --once --accel-backends off --pod-resources-socket '' --state '' "
      "--topology '" +
          xe8640_topology() + "' --kubelet-dir '" + loop.string() + "' --nfd-features-dir '" +
          loop.string() + "'",
      scratch_);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.err.find("terminate"), std::string::npos) << o.err;
}

// A bad --nic-config fails the agent's start in one line, before the device plugin says
// anything (it was read after the plugin had logged its device list strategy).
TEST_F(HostileInput, BadNicConfigIsOneLineAtStart) {
  auto kubelet = dir_ / "kubelet";
  std::filesystem::create_directory(kubelet);
  auto nic = file("nic.yaml",
                  "configList:\n  - resourceName: hca\n    rdmaHcaMax: 4294967296\n"
                  "    selectors:\n      ifNames: [ib0]\n");
  refused(
      "agent --listen 127.0.0.1:0 --pod-resources-socket '' --nfd-features-dir '' --state '' "
      "--accel-backends off --topology '" +
          xe8640_topology() + "' --kubelet-dir '" + kubelet.string() + "' --nic-config '" + nic +
          "'",
      "rdmaHcaMax");
}

// The state file through a link: the lock is taken beside the file the writer replaces, so that
// two paths to one state file take one lock (it was "<link>.lock" for one, "<file>.lock" for
// the other).
TEST_F(HostileInput, StateLockFollowsTheLink) {
  auto target = dir_ / "real.json";
  auto link = dir_ / "link.json";
  std::filesystem::create_symlink(target, link);
  auto o =
      polyaccel("place --topology '" + xe8640_topology() +
                    "' --vcpus 1 --memory 1GiB --commit --name vm --state '" + link.string() + "'",
                scratch_);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_TRUE(std::filesystem::is_regular_file(target));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "real.json.lock"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "link.json.lock"));
}

// Numbers past every type's range, for every parser: extra specs, flavor JSON and YAML, the
// state file, CLI options, durations. Each one wrapped, aborted or hung before.
TEST_F(HostileInput, HugeAndWrappingNumbers) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // zero is a value given, not a value missing
      {"--vcpus 0 --memory 4GiB", "--vcpus 0: must be 1 or more"},
      {"--vcpus 4 --memory 0", "--memory 0: must be more than 0"},
      {"--vcpus 4 --memory 0GiB", "--memory 0GiB: must be more than 0"},
      {"--vcpus 4 --memory 4GiB --spec hw:numa_nodes=4294967296", "hw:numa_nodes"},
      {"--vcpus 4 --memory 4GiB --spec hw:numa_nodes=4294967297", "hw:numa_nodes"},
      {"--vcpus 4 --memory 4GiB --spec hw:numa_nodes=18446744073709551617", "hw:numa_nodes"},
      {"--vcpus 4 --memory 4GiB --spec hw:numa_nodes=2 --spec "
       "hw:numa_cpus.99999999999999999999=0-3",
       "hw:numa_cpus.99999999999999999999"},
      {"--vcpus 4 --memory 4GiB --spec hw:numa_nodes=1 --spec hw:numa_cpus.4294967296=0-3",
       "hw:numa_cpus.4294967296"},
      {"--vcpus 4 --memory 4GiB --spec hw:numa_nodes=1 --spec hw:numa_cpus.0=0-3 --spec "
       "hw:numa_mem.0=99999999999999999999",
       "hw:numa_mem.0"},
      {"--vcpus 4 --memory 4GiB --spec hw:mem_page_size=99999999999999999999", "hw:mem_page_size"},
      {"--vcpus 4 --memory 4GiB --spec hw:mem_page_size=9999999999999999GB", "hw:mem_page_size"},
      {"--vcpus 4 --memory 4GiB --spec polyaccel:rdma_nics=4294967297", "polyaccel:rdma_nics"},
      {"--vcpus 4 --memory 4GiB --spec resources:PCPU=99999999999999999999", "resources:PCPU"},
      {"--vcpus 4 --memory 4GiB --pci-alias h100=10de:2330 --spec "
       "pci_passthrough:alias=h100:4294967297",
       "pci_passthrough:alias"},
      {"--vcpus 4000000000 --memory 4GiB --spec hw:cpu_policy=dedicated", "--vcpus 4000000000"},
      {"--vcpus 100000000 --memory 4GiB", "--vcpus 100000000"},
      {"--vcpus 1e8 --memory 4GiB", "--vcpus"},
      {"--vcpus 4294967296 --memory 4GiB", "--vcpus"},
      {"--vcpus -1 --memory 4GiB", "--vcpus"},
      {"--vcpus 4 --memory 99999999999999999999GiB", "--memory"},
      {"--vcpus 4 --memory 4GiB --cpu-allocation-ratio nan", "--cpu-allocation-ratio"},
      {"--vcpus 4 --memory 4GiB --cpu-allocation-ratio inf", "--cpu-allocation-ratio"},
      {"--vcpus 4 --memory 4GiB --ram-allocation-ratio 1e300", "--ram-allocation-ratio"},
  };
  for (const auto& [args, names] : cases) {
    auto start = std::chrono::steady_clock::now();
    refused(place(args), names);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << args;
  }

  // Flavor files: JSON and YAML, each count too large, negative, fractional or zero.
  const std::vector<std::pair<std::string, std::string>> flavors = {
      {R"({"vcpus": 4294967297, "ram": 1024})", "vcpus"},
      {R"({"vcpus": 0, "ram": 1024})", "vcpus"},
      {R"({"vcpus": -1, "ram": 1024})", "vcpus"},
      {R"({"vcpus": 1.5, "ram": 1024})", "vcpus"},
      {R"({"vcpus": 2, "ram": 99999999999999999999})", "ram"},
      {R"({"vcpus": 2, "ram": 17592186044416})", "ram"},
      {"vcpus: 4294967297\nram: 1024\n", "vcpus"},
      {"vcpus: 0\nram: 1024\n", "vcpus"},
      {"vcpus: 2\nram: 18446744073709551616\n", "ram"},
  };
  int n = 0;
  for (const auto& [content, field] : flavors) {
    auto path =
        file("flavor" + std::to_string(n++) + (content[0] == '{' ? ".json" : ".yaml"), content);
    // Named by the file and the field, not by an option the user did not give.
    refused(place("--flavor '" + path + "'"), path + ": " + field);
  }

  // The state file: numbers that a 32-bit read would wrap to a valid value.
  const std::string prefix = R"({"schema": "polyaccel-allocations", "schema_version": )";
  for (const char* version : {"4294967297", "-4294967295", "1.0", "99999999999999999999"}) {
    auto path = file("state-v.json", prefix + version + R"(, "placements": []})");
    refused("place --topology '" + xe8640_topology() + "' --vcpus 1 --memory 1GiB --state '" +
                path + "'",
            "schema_version");
  }
  // A committed placement's own fields: the one out of range is the one named, with its value,
  // not a later check on the default it left (which said "'cells' and 'devices' must be arrays").
  auto committed =
      polyaccel(place("--vcpus 2 --memory 1GiB --spec hw:cpu_policy=dedicated --commit --name vm1"),
                scratch_);
  ASSERT_EQ(committed.exit_code, 0) << committed.err;
  const auto state = nlohmann::json::parse(read_text(state_));
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> fields = {
      {"/vcpus", 4294967296ULL, "field 'vcpus': '4294967296'"},
      {"/vcpus", -1, "field 'vcpus': '-1'"},
      {"/memory_bytes", 18446744073709551616.0, "field 'memory_bytes'"},
      {"/memory_bytes", -4096, "field 'memory_bytes': '-4096'"},
      {"/cells/0/host_numa_node", 4294967296ULL, "field 'cells[0].host_numa_node': '4294967296'"},
      {"/cells/0/guest_cell", 4294967296ULL, "field 'cells[0].guest_cell': '4294967296'"},
      {"/cells/0/vcpus/0", 1e20, "field 'cells[0].vcpus[0]': '1e+20'"},
  };
  for (const auto& [pointer, value, names] : fields) {
    auto bad = state;
    bad["placements"][0][nlohmann::json::json_pointer(pointer)] = value;
    auto path = file("state-field.json", bad.dump());
    refused("allocations --topology '" + xe8640_topology() + "' --state '" + path + "'",
            "placement vm1: " + names);
  }
  // Durations of the agent: each made its samplers spin.
  for (const char* interval : {"nan", "inf", "1e300", "9e12s", "-1", "0", "1e-9s", "10parsecs"}) {
    for (const char* option : {"--interval", "--audit-interval"}) {
      refused(std::string("agent --once --accel-backends off --topology '") + xe8640_topology() +
                  "' " + option + " " + interval,
              option);
    }
  }
}

// What goes with the segfault of issue 18: --gpus 0 on a host without GPUs.
TEST_F(HostileInput, RunWithZeroGpus) {
  refused("run --gpus 0 -- true", "--gpus");
  refused(
      "run --topology '" +
          topology_fixture("2socket-2numa-36core-cpuonly-omnipath_xeon-e5-2695v4.xml").string() +
          "' --dry-run --gpus 0 -- true",
      "--gpus");
}

// Bytes we did not choose: non-UTF-8 and control characters in arguments and in a capture.
TEST_F(HostileInput, NonUtf8AndControlCharacters) {
  // /bin/sh is dash: printf makes the bytes ($'...' is bash's).
  // A placement name is the key the state records and `release` looks up: non-UTF-8 bytes (once
  // stored as U+FFFD, so that a second name collided with the first and broke the file) and
  // control characters (printed raw by `allocations`) are refused at the door, wherever a name
  // comes from.
  refused(place("--vcpus 1 --memory 1GiB --commit --name \"$(printf 'bad\\377')\" --json"),
          "--name 'bad\\xff': is not UTF-8");
  refused(place("--vcpus 1 --memory 1GiB --commit --name \"$(printf 'a\\033[31mx')\""),
          "--name 'a\\x1b[31mx': holds a control character");
  refused(place("--vcpus 1 --memory 1GiB --commit --name \"$(printf 'a\\nb')\""),
          "holds a control character");
  refused("run --topology '" + xe8640_topology() + "' --dry-run --gpus 1 --state '" + state_ +
              "' --reserve \"$(printf 'r\\377')\" -- true",
          "--reserve 'r\\xff': is not UTF-8");
  auto o = polyaccel(place("--vcpus 1 --memory 1GiB --commit --name vm1"), scratch_);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  std::string text = read_text(state_);
  text.replace(text.find("\"vm1\""), 5, "\"v\\u0007m\"");
  file("state.json", text);
  refused("allocations --state '" + state_ + "'", "placement name 'v\\x07m': holds a control");
  refused(place("--vcpus 1 --memory 1GiB --commit --name vm2"), "holds a control character");

  // A newline or escape sequence in a value: one line on stderr, escaped.
  refused(place("--vcpus 1 --memory 1GiB --spec \"$(printf 'hw:cpu_policy=ded\\nicated')\""),
          "ded\\nicated");
  refused(place("--vcpus 1 --memory 1GiB --spec \"$(printf 'hw:cpu_policy=\\033[31mred')\""),
          "\\x1b[31mred");
  refused("topo --topology \"$(printf '/nonexistent/new\\nline\\377.xml')\"",
          "new\\nline\\xff.xml");
  refused(place("--vcpus \"$(printf '1\\n2')\" --memory 1GiB"), "--vcpus");

  // An hwloc capture with 0xff in its HostName: topo --json prints valid JSON. (A control
  // character is refused before hwloc reads the file: HwlocBitmapsAndControlBytesAreRefused.)
  std::string xml = read_text(xe8640_topology());
  auto at = xml.find("<object type=\"Machine\"");
  ASSERT_NE(at, std::string::npos);
  auto end = xml.find('>', at);
  xml.insert(end + 1, "\n<info name=\"HostName\" value=\"node\xff\xfe\"/>");
  auto capture = file("hostname.xml", xml);
  o = polyaccel("topo --json --topology '" + capture + "'", scratch_);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(nlohmann::json::accept(o.out));
  o = polyaccel("topo --topology '" + capture + "'", scratch_);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out.find('\xff'), std::string::npos);
}

// hwloc XML shapes that crash libhwloc 2.9 itself: refused before hwloc reads them.
TEST_F(HostileInput, HwlocShapesThatCrashHwloc) {
  std::string xml = read_text(xe8640_topology());
  auto pu = xml.find("<object type=\"PU\"");
  ASSERT_NE(pu, std::string::npos);
  auto attr = xml.find(" complete_cpuset=\"", pu);
  auto attr_end = xml.find('"', attr + 18);
  std::string no_complete = xml;
  no_complete.erase(attr, attr_end + 1 - attr);
  auto path = file("no-complete-cpuset.xml", no_complete);
  refused("topo --topology '" + path + "'", "complete_cpuset");
  std::string no_cpuset = xml;
  auto cpuset = no_cpuset.find(" cpuset=\"", pu);
  no_cpuset.erase(cpuset, no_cpuset.find('"', cpuset + 9) + 1 - cpuset);
  path = file("no-cpuset.xml", no_cpuset);
  // A nodeset without its complete_nodeset (the Machine here, a NUMANode alike): found by fuzzing.
  std::string no_complete_nodeset = xml;
  auto machine = no_complete_nodeset.find("<object type=\"Machine\"");
  ASSERT_NE(machine, std::string::npos);
  auto nodes = no_complete_nodeset.find(" complete_nodeset=\"", machine);
  ASSERT_LT(nodes, no_complete_nodeset.find('>', machine));
  no_complete_nodeset.erase(nodes, no_complete_nodeset.find('"', nodes + 19) + 1 - nodes);
  path = file("no-complete-nodeset.xml", no_complete_nodeset);
  refused("topo --topology '" + path + "'", "Machine has a nodeset but no complete_nodeset");

  // CPU and node numbers beyond what Linux has (fuzzing: a PU without os_index, which hwloc takes
  // as 4294967295, made every CPU set of the model 512 MiB): refused by line, at once.
  auto pu_os_index = xml.find(" os_index=\"", pu);
  auto pu_os_index_end = xml.find('"', pu_os_index + 11);
  for (const std::string& index : {std::string("4000000000"), std::string("16384")}) {
    std::string big = xml;
    big.replace(pu_os_index, pu_os_index_end + 1 - pu_os_index, " os_index=\"" + index + "\"");
    refused("topo --topology '" + file("pu-" + index + ".xml", big) + "'",
            "PU has os_index " + index + ", not a number up to 16383");
  }
  std::string no_index = xml;
  no_index.erase(pu_os_index, pu_os_index_end + 1 - pu_os_index);
  refused("topo --topology '" + file("pu-no-index.xml", no_index) + "'", "PU has no os_index");
  auto node = xml.find("<object type=\"NUMANode\"");
  ASSERT_NE(node, std::string::npos);
  auto node_index = xml.find(" os_index=\"", node);
  std::string big_node = xml;
  big_node.replace(node_index, xml.find('"', node_index + 11) + 1 - node_index,
                   " os_index=\"70000\"");
  refused("topo --topology '" + file("node-70000.xml", big_node) + "'",
          "NUMANode has os_index 70000");
  // A cpuset of 600 32-bit words names CPUs past 16383.
  auto pu_cpuset = xml.find(" cpuset=\"", pu);
  std::string wide = xml;
  wide.insert(pu_cpuset + 9, "0x1" + std::string(600, ','));
  refused("topo --topology '" + file("wide-cpuset.xml", wide) + "'", "cpuset beyond CPU 16383");
  // Values hwloc loads into its enums unchecked (fuzzing: bridge_type 2-1, UBSan): refused.
  for (const auto& [attribute, value] :
       {std::pair<std::string, std::string>{"bridge_type", "2-1"}, {"cache_type", "7"}}) {
    std::string odd = xml;
    auto at = odd.find(" " + attribute + "=\"");
    ASSERT_NE(at, std::string::npos) << attribute;
    odd.replace(at, odd.find('"', at + attribute.size() + 3) + 1 - at,
                " " + attribute + "=\"" + value + "\"");
    refused("topo --topology '" + file(attribute + ".xml", odd) + "'",
            "has " + attribute + " " + value);
  }
}

// Attribute syntax libhwloc's reader does not accept: it stops reading the tag there and 2.9 then
// crashes on the cpusets it never set (fuzzing found an unquoted value). Each is refused by line.
TEST_F(HostileInput, HwlocMalformedAttributesAreRefused) {
  std::string xml = read_text(xe8640_topology());
  auto pu = xml.find("<object type=\"PU\"");
  ASSERT_NE(pu, std::string::npos);
  auto attr = xml.find(" complete_cpuset=\"", pu);
  ASSERT_NE(attr, std::string::npos);
  auto value_end = xml.find('"', attr + 18);
  const std::string value = xml.substr(attr + 18, value_end - attr - 18);
  const size_t line = 1 + static_cast<size_t>(std::count(xml.begin(), xml.begin() + pu, '\n'));
  struct Case {
    const char* name;
    std::string attribute;  // replaces ` complete_cpuset="VALUE"`
    const char* said;
  };
  const Case cases[] = {
      {"unquoted", " complete_cpuset=" + value, "malformed attribute"},
      {"unquoted-then-repeated",
       " complete_cpuset=x" + value + "\" complete_cpuset=\"" + value + "\"",
       "malformed attribute"},
      {"no-equals", " complete_cpuset \"" + value + "\"", "malformed attribute"},
      {"single-quoted", " complete_cpuset='" + value + "'", "malformed attribute"},
      {"upper-case-name", " Complete_cpuset=\"" + value + "\"", "malformed attribute"},
      {"repeated", " complete_cpuset=\"" + value + "\" complete_cpuset=\"" + value + "\"",
       "repeats the attribute complete_cpuset"},
      {"no-space", "complete_cpuset=\"" + value + "\"", "no space before an attribute"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string bad = xml;
    bad.replace(attr, value_end + 1 - attr, c.attribute);
    auto path = file(std::string(c.name) + ".xml", bad);
    refused("topo --topology '" + path + "'", c.said);
    refused("topo --topology '" + path + "'", "line " + std::to_string(line));
  }
  // An element left open at the end of the file.
  std::string open_tag =
      xml.substr(0, xml.rfind("</topology>")) + "</topology>\n<object type=\"PU\"";
  refused("topo --topology '" + file("open.xml", open_tag) + "'", "is not closed");
  // A declaration, comment or end tag left open: libhwloc reads on past it, so the pre-check
  // must too (fuzzing: "<?xml " without "?>" hid an object without complete_cpuset, SEGV).
  for (const std::string& opener :
       {std::string("<?xml "), std::string("<!-- "), std::string("</x ")}) {
    std::string hidden = xml.substr(0, pu) + opener + xml.substr(pu);
    hidden.replace(hidden.find(" complete_cpuset=\"", pu), 1, " x");
    refused("topo --topology '" + file("unclosed.xml", hidden) + "'",
            "line " + std::to_string(line) + ": a declaration, comment or end tag is not closed");
  }
}

// Bitmaps hwloc_bitmap_sscanf cannot read (it leaves the object without that set; libhwloc 2.9
// then dereferences it: fuzzing found "0x00000400,&0x0", SEGV in hwloc_bitmap_compare_first) and
// control characters (a NUL ends libhwloc's C string mid-tag: fuzzing, a read past the buffer):
// refused by line before hwloc reads the file; every form hwloc itself writes still loads.
TEST_F(HostileInput, HwlocBitmapsAndControlBytesAreRefused) {
  std::string xml = read_text(xe8640_topology());
  auto pu = xml.find("<object type=\"PU\"");
  ASSERT_NE(pu, std::string::npos);
  const size_t line = 1 + static_cast<size_t>(std::count(xml.begin(), xml.begin() + pu, '\n'));
  for (const std::string attribute : {"complete_cpuset", "nodeset"}) {
    auto at = xml.find(" " + attribute + "=\"", pu);
    ASSERT_NE(at, std::string::npos) << attribute;
    auto value_at = at + attribute.size() + 3;
    auto value_end = xml.find('"', value_at);
    for (const std::string value : {"0x00000400,&0x0", "1x00000002", "0x", "0x000000001", ",0x1",
                                    "0x1,", "0x1,,", "0xg", "+0x1", " 0x1", "0x1 "}) {
      SCOPED_TRACE(attribute + "=" + value);
      std::string bad = xml;
      bad.replace(value_at, value_end - value_at, value);
      auto path = file("bitmap.xml", bad);
      refused("topo --topology '" + path + "'", "not a bitmap as hwloc writes it");
      refused("topo --topology '" + path + "'", "line " + std::to_string(line));
    }
  }
  for (const char byte : {'\0', '\x01', '\x16', '\x7f'}) {
    SCOPED_TRACE(static_cast<int>(byte));
    std::string bad = xml;
    bad.insert(pu + 10, 1, byte);
    refused("topo --topology '" + file("control.xml", bad) + "'",
            "line " + std::to_string(line) + " has a control character");
  }
}

// A gathered tree (--fsroot) is not pre-checked as XML is: what hwloc read from it is bounded
// after the load. The NEC machine's real tree with one CPU renumbered past 16383, or one NUMA
// node past 4095, as a hostile or corrupt capture could have them.
TEST_F(HostileInput, GatheredTreeBeyondTheCpuAndNodeBoundsIsRefused) {
  namespace fs = std::filesystem;
  auto gathered = [&](const std::string& name) {
    fs::path into = tmp_.path() / name;
    fs::create_directories(into);
    return testing::extract_tarball(
        topology_fixture("sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"), into);
  };
  auto write = [](const fs::path& p, const std::string& text) {
    fs::remove(p);
    std::ofstream(p) << text << "\n";
  };
  // The tree as captured loads.
  fs::path plain = gathered("plain");
  EXPECT_EQ(polyaccel("topo --fsroot '" + plain.string() + "'", scratch_).exit_code, 0);

  fs::path cpu_tree = gathered("cpu");
  fs::path sys = cpu_tree / "sys/devices/system";
  for (const char* f : {"present", "online"})
    write(sys / "cpu" / f, "0-30,20000");
  write(sys / "cpu/possible", "0-20000");
  fs::rename(sys / "cpu/cpu31", sys / "cpu/cpu20000");
  for (const char* f : {"thread_siblings_list", "core_cpus_list"})
    write(sys / "cpu/cpu20000/topology" / f, "15,20000");
  write(sys / "node/node1/cpulist", "8-15,24-30,20000");
  fs::remove(sys / "node/node1/cpu31");
  fs::create_directory_symlink("../../cpu/cpu20000", sys / "node/node1/cpu20000");
  refused("topo --fsroot '" + cpu_tree.string() + "'", "names CPU 20000, beyond CPU 16383");
  refused(
      "place --fsroot '" + cpu_tree.string() + "' --vcpus 2 --memory 1GiB --state '" + state_ + "'",
      "names CPU 20000, beyond CPU 16383");

  fs::path node_tree = gathered("node");
  sys = node_tree / "sys/devices/system";
  fs::rename(sys / "node/node1", sys / "node/node5000");
  for (const char* f : {"online", "possible", "has_cpu", "has_memory", "has_normal_memory"})
    write(sys / "node" / f, "0,5000");
  for (const auto& cpu : fs::directory_iterator(sys / "cpu")) {
    if (fs::is_symlink(cpu.path() / "node1")) fs::remove(cpu.path() / "node1");
  }
  refused("topo --fsroot '" + node_tree.string() + "'", "names NUMA node 5000, beyond node 4095");
}

// A FIFO (or a link to one, a socket) inside a gathered tree: hwloc opened it with a plain
// open(2) and `topo` and `audit` waited for ever (issue 29). Refused before hwloc reads the tree,
// naming the file, for every command that reads a root.
TEST_F(HostileInput, FifoInsideAGatheredTreeIsRefusedNotWaitedOn) {
  namespace fs = std::filesystem;
  fs::path into = tmp_.path() / "tree";
  fs::create_directories(into);
  const fs::path tree = testing::extract_tarball(
      topology_fixture("sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"), into);
  const std::vector<std::string> files = {
      "sys/devices/system/cpu/online",
      "proc/meminfo",
      "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
      "sys/devices/system/node/node1/meminfo",
      "sys/devices/pci0000:17/0000:17:00.0/class",
  };
  bool first = true;
  for (const auto& relative : files) {
    const fs::path file = tree / relative;
    ASSERT_TRUE(fs::exists(file)) << relative;
    fs::rename(file, tmp_.path() / "kept");
    ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
    const std::string names = "holds a FIFO at " + relative;
    refused("topo --fsroot '" + tree.string() + "'", names);
    refused("audit --root '" + tree.string() + "'", names);
    if (first) {
      refused("audit --topology '" + xe8640_topology() + "' --root '" + tree.string() + "'", names);
      refused(
          "place --fsroot '" + tree.string() + "' --vcpus 1 --memory 1GiB --state '" + state_ + "'",
          names);
      first = false;
    }
    fs::remove(file);
    fs::rename(tmp_.path() / "kept", file);
  }
  EXPECT_EQ(polyaccel("topo --fsroot '" + tree.string() + "'", scratch_).exit_code, 0);
  // A link in the tree that leads to a FIFO outside it, and a socket.
  const auto outside = dir_ / "outside-fifo";
  ASSERT_EQ(::mkfifo(outside.c_str(), 0600), 0);
  fs::remove(tree / "proc/cpuinfo");
  fs::create_symlink(outside, tree / "proc/cpuinfo");
  refused("topo --fsroot '" + tree.string() + "'", "holds a link to a FIFO at proc/cpuinfo");
  fs::remove(tree / "proc/cpuinfo");
  int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock_path = (tree / "proc/cpuinfo").string();
  ASSERT_LT(sock_path.size(), sizeof addr.sun_path);
  std::copy(sock_path.begin(), sock_path.end(), addr.sun_path);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  refused("topo --fsroot '" + tree.string() + "'", "holds a socket at proc/cpuinfo");
  ::close(sock);
}

// Issue 29: errors name the option at fault. A page size larger than any kernel's is the page
// size's fault, not the reserve's (flavors) or the per-node size's (audit).
TEST_F(HostileInput, TheOptionAtFaultIsNamed) {
  refused("flavors --topology '" + xe8640_topology() + "' --page-size 1TiB", "--page-size 1TiB");
  refused("flavors --topology '" + xe8640_topology() + "' --page-size 64GiB", "--page-size 64GiB");
  refused("audit --topology '" + xe8640_topology() +
              "' --hugepage-size 64GiB --hugepages-per-node 8GiB",
          "--hugepage-size: '64GiB' is not a page size");
  refused(
      "audit --topology '" + xe8640_topology() + "' --hugepage-size 1GiB --hugepages-per-node 8MiB",
      "--hugepages-per-node: '8MiB' is less than one --hugepage-size page (1 GiB)");
  for (const char* args : {"flavors --page-size 1TiB",
                           "audit --hugepage-size 64GiB "
                           "--hugepages-per-node 8GiB"}) {
    auto o = polyaccel(std::string(args) + " --topology '" + xe8640_topology() + "'", scratch_);
    EXPECT_EQ(o.err.find("--reserve-memory-per-node"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("--hugepages-per-node"), std::string::npos) << o.err;
  }
}

// Issue 29: a value from the config file is refused naming the file and line, not an option
// nobody typed (listen: "127.0.0.1:99999" was blamed on --listen).
TEST_F(HostileInput, ConfigFileValuesAreBlamedOnTheirFileAndLine) {
  const std::string agent =
      "agent --topology '" + xe8640_topology() +
      "' --accel-backends off --pod-resources-socket '' --kubelet-dir '' --nfd-features-dir '' "
      "--state '' --config ";
  for (const char* listen : {"127.0.0.1:99999", "127.0.0.1:4294967297", "not an address"}) {
    const auto config =
        file("polyaccel.yaml", std::string("interval: 1s\nlisten: \"") + listen + "\"\n");
    auto o = polyaccel(agent + "'" + config + "'", scratch_);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_EQ(lines(o.err), 1u) << o.err;
    EXPECT_NE(o.err.find(config + ":2: listen"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("--listen"), std::string::npos) << o.err;
  }
  const auto config = file("polyaccel.yaml", "interval: 0s\n");
  auto o = polyaccel(agent + "'" + config + "'", scratch_);
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find(config + ":1: interval"), std::string::npos) << o.err;
  // A path the file gave, refused by the layer that opens it.
  std::filesystem::create_directories(dir_ / "state-dir");
  const auto state_config =
      file("place.yaml", "cpu_allocation_ratio: 2\nstate: " + (dir_ / "state-dir").string() + "\n");
  refused("--config '" + state_config + "' place --topology '" + xe8640_topology() +
              "' --vcpus 1 --memory 1GiB",
          state_config + ":2: state " + (dir_ / "state-dir").string() + ": is a directory");
}

// --fsroot checked the same way by every command that takes it, before any reads it: a
// command that reads only a few files of the tree (mig partition, sriov set) took a missing one
// for a host without such devices and exited 0.
TEST_F(HostileInput, BadFsrootForEveryCommand) {
  const auto fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto loop = dir_ / "loop";
  std::filesystem::create_symlink(loop, loop);
  const auto plain = file("plain", "x");
  const auto empty = dir_ / "empty";
  std::filesystem::create_directories(empty / "sys/bus/pci/devices");
  const std::vector<std::pair<std::string, std::string>> roots = {
      {"/nonexistent/tree", "/nonexistent/tree: no such directory"},
      {fifo.string(), fifo.string() + ": is not a directory"},
      {loop.string(), loop.string() + ": Too many levels of symbolic links"},
      {plain, plain + ": is not a directory"},
      {empty.string(), empty.string() + ": holds no sys/devices/system/cpu"},
  };
  // Each command's words, then its other arguments (after --fsroot: run's CMD comes last).
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"topo", ""},
      {"topo", "--of xml"},
      {"report", ""},
      {"mig show", ""},
      {"mig partition", ""},
      {"mig partition", "--gpu 0000:0c:00.0 --compute CPX"},
      {"sriov set", "0000:01:00.0 1"},
      {"place", "--vcpus 1 --memory 1GiB --state '" + state_ + "'"},
      {"allocations", "--state '" + state_ + "'"},
      {"release", "vm --state '" + state_ + "'"},
      {"flavors", ""},
      {"nccl-topo", ""},
      {"audit", ""},
      {"run", "--dry-run --gpus 1 -- true"},
      {"agent",
       "--once --accel-backends off --listen 127.0.0.1:0 --pod-resources-socket '' "
       "--kubelet-dir '' --nfd-features-dir '' --state ''"},
      {"dra slices", ""},
      {"cdi generate", ""},
  };
  for (const auto& [words, rest] : commands) {
    for (const auto& [root, names] : roots) {
      for (const char* json : {"", "--json "}) {
        refused(words + " " + json + "--fsroot '" + root + "' " + rest, names);
      }
    }
  }
}

// CLI11's own errors are one line too (no "Run with --help for more information.").
TEST_F(HostileInput, ParserErrorsAreOneLine) {
  refused("place --no-such-option", "--no-such-option");
  refused("topo --accel-backends sometimes", "--accel-backends");
  refused("nosuchcommand", "nosuchcommand");
  // An unknown command with a newline or an escape sequence in it: escaped, one line.
  refused("\"$(printf 'tp\\noo')\"", "unknown command 'tp\\noo'");
  refused("mig \"$(printf 'pl\\033[2Jan\\377')\"", "unknown command 'pl\\x1b[2Jan\\xff'");
}

}  // namespace
}  // namespace polyaccel
