// Builds the sysfs/procfs/etc files the audit reads under a temporary root, in the kernel's own
// formats and layout (PCI functions under sys/devices/pciDDDD:BB/... with the sys/bus/pci/devices
// links, driver and iommu_group links, binary config space), as in the gathered trees of
// ../shared/fixtures/topologies.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace polyaccel::testing {

class FakeHost {
 public:
  const std::filesystem::path& root() const { return dir_.path(); }
  std::string root_string() const { return dir_.path().string(); }

  void write(const std::string& relative, const std::string& content) const {
    auto path = root() / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  }
  void remove(const std::string& relative) const { std::filesystem::remove_all(root() / relative); }
  void link(const std::string& relative, const std::string& target) const {
    auto path = root() / relative;
    std::filesystem::create_directories(path.parent_path());
    std::filesystem::remove(path);
    std::filesystem::create_symlink(target, path);
  }

  // A PCI function below `bridges` (root port first), as sysfs lays it out.
  struct Function {
    Function(std::string b, std::string v = "0x10de", std::string d = "0x2330",
             std::string k = "0x030200")  // NOLINT(google-explicit-constructor)
        : bdf(std::move(b)), vendor(std::move(v)), device(std::move(d)), klass(std::move(k)) {}
    std::string bdf;  // "0000:3b:00.0"
    std::string vendor, device, klass;
    int numa_node = 0;
    std::string driver;  // "" for none
    std::string speed = "32.0 GT/s PCIe", max_speed = "32.0 GT/s PCIe";
    int width = 16, max_width = 16;
    std::string config;  // binary config space; 256 zero bytes when empty
  };
  // Returns the function's directory relative to the root.
  std::string add_pci(const Function& f, const std::vector<std::string>& bridges = {}) const {
    std::string bus = f.bdf.substr(0, 7);  // "0000:3b"
    std::string dir = "sys/devices/pci" + (bridges.empty() ? bus : bridges.front().substr(0, 7));
    for (const auto& b : bridges)
      dir += "/" + b;
    dir += "/" + f.bdf;
    write(dir + "/vendor", f.vendor + "\n");
    write(dir + "/device", f.device + "\n");
    write(dir + "/class", f.klass + "\n");
    write(dir + "/numa_node", std::to_string(f.numa_node) + "\n");
    write(dir + "/current_link_speed", f.speed + "\n");
    write(dir + "/max_link_speed", f.max_speed + "\n");
    write(dir + "/current_link_width", std::to_string(f.width) + "\n");
    write(dir + "/max_link_width", std::to_string(f.max_width) + "\n");
    write(dir + "/config", f.config.empty() ? std::string(256, '\0') : f.config);
    write(dir + "/driver_override", "(null)\n");
    link("sys/bus/pci/devices/" + f.bdf, "../../../" + dir.substr(4));
    if (!f.driver.empty()) bind(f.bdf, f.driver);
    return dir;
  }
  void bind(const std::string& bdf, const std::string& driver) const {
    write("sys/bus/pci/drivers/" + driver + "/.keep", "");
    link(device_dir(bdf) + "/driver", "/nonexistent/bus/pci/drivers/" + driver);
  }
  std::string device_dir(const std::string& bdf) const {
    return "sys/" + std::filesystem::read_symlink(root() / "sys/bus/pci/devices" / bdf)
                        .string()
                        .substr(9);  // "../../../devices/..." → "devices/..."
  }
  void iommu_group(unsigned group, const std::string& type, const std::vector<std::string>& bdfs) {
    std::string dir = "sys/kernel/iommu_groups/" + std::to_string(group);
    write(dir + "/type", type + "\n");
    for (const auto& bdf : bdfs) {
      link(dir + "/devices/" + bdf, "../../../../bus/pci/devices/" + bdf);
      link(device_dir(bdf) + "/iommu_group",
           "/nonexistent/kernel/iommu_groups/" + std::to_string(group));
    }
  }

  // A 4096-byte config space with an AER capability at 0x100 and ACS (control = `acs`) at 0x148.
  static std::string config_with_acs(std::uint16_t acs) {
    std::string c(4096, '\0');
    auto put32 = [&](size_t off, std::uint32_t v) {
      for (int i = 0; i < 4; ++i)
        c[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
    };
    put32(0x100, 0x0001u | (1u << 16) | (0x148u << 20));              // AER, version 1, next 0x148
    put32(0x148, 0x000Du | (1u << 16));                               // ACS, version 1, last
    put32(0x14c, 0x007fu | (static_cast<std::uint32_t>(acs) << 16));  // capability, control
    return c;
  }

 private:
  TempDir dir_;
};

// A gathered tree of ../shared/fixtures/topologies, extracted once for a whole test suite (the
// extraction is the slow part); what a test changes through write() is put back by restore().
class RestoringTree {
 public:
  explicit RestoringTree(const std::string& tarball)
      : root_(extract_tarball(topology_fixture(tarball), dir_.path())) {}
  const std::filesystem::path& root() const { return root_; }

  void write(const std::string& relative, const std::string& content) {
    auto path = root_ / relative;
    if (!saved_.count(relative)) {
      std::optional<std::string> old;
      if (std::filesystem::exists(path)) {
        std::ifstream in(path, std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        old = text.str();
      }
      saved_[relative] = old;
    }
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  }
  void restore() {
    for (const auto& [relative, old] : saved_) {
      if (old) {
        std::ofstream(root_ / relative, std::ios::binary | std::ios::trunc) << *old;
      } else {
        std::filesystem::remove(root_ / relative);
      }
    }
    saved_.clear();
  }

 private:
  TempDir dir_;
  std::filesystem::path root_;
  std::map<std::string, std::optional<std::string>> saved_;
};

// Test suites on the gathered NEC Vector Engine machine: one extraction for the suite, each
// test's changes undone after it.
class NecTreeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tree_ = new RestoringTree("sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2");
  }
  static void TearDownTestSuite() {
    delete tree_;
    tree_ = nullptr;
  }
  void TearDown() override { tree_->restore(); }
  static const std::filesystem::path& tree_root() { return tree_->root(); }
  static void write_tree(const std::string& relative, const std::string& content) {
    tree_->write(relative, content);
  }

 private:
  static inline RestoringTree* tree_ = nullptr;
};

}  // namespace polyaccel::testing
