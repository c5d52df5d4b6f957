#include "audit/remedy_files.h"

#include <algorithm>

#include "core/strings.h"

namespace polyaccel {

namespace {

void add_once(std::vector<std::string>& list, const std::string& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

bool is_hugepage_write(const RuntimeWrite& w) {
  return w.path.rfind("sys/devices/system/node/", 0) == 0 &&
         w.path.find("/hugepages/") != std::string::npos;
}

}  // namespace

std::vector<std::string> merged_kernel_args(const std::vector<Finding>& findings) {
  const std::string acs = "pci=disable_acs_redir=";
  std::vector<std::string> args, acs_ports;
  for (const auto& f : findings) {
    for (const auto& a : f.remedy.kernel_args) {
      if (a.rfind(acs, 0) == 0) {
        add_once(acs_ports, a.substr(acs.size()));
      } else {
        add_once(args, a);
      }
    }
  }
  if (!acs_ports.empty()) args.push_back(acs + join(acs_ports, ";"));
  return args;
}

std::map<std::string, std::string> remedy_files(const std::vector<Finding>& findings) {
  std::map<std::string, std::string> files;
  const std::string header = "# Written by polyaccel audit --emit: review before installing.\n";

  if (auto args = merged_kernel_args(findings); !args.empty()) {
    files["kernel-cmdline.txt"] =
        header +
        "# Add to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, and reboot.\n" +
        join(args, " ") + "\n";
  }
  std::vector<std::string> sysctls, modprobe, modules, systemd, commands, hugepages;
  for (const auto& f : findings) {
    for (const auto& s : f.remedy.sysctls)
      add_once(sysctls, s);
    for (const auto& m : f.remedy.modprobe)
      add_once(modprobe, m);
    for (const auto& m : f.remedy.modules_load)
      add_once(modules, m);
    for (const auto& s : f.remedy.systemd)
      add_once(systemd, s);
    bool first = true;
    auto comment = [&] {
      if (first) commands.push_back("\n# " + f.id + ": " + f.subject);
      first = false;
    };
    for (const auto& w : f.remedy.runtime) {
      if (is_hugepage_write(w)) {
        add_once(hugepages, "ExecStart=/bin/sh -c 'echo " + w.value + " > /" + w.path + "'");
      } else {
        comment();
        commands.push_back("echo " + w.value + " > /" + w.path);
      }
    }
    for (const auto& c : f.remedy.commands) {
      comment();
      commands.push_back(c);
    }
  }
  auto lines = [](const std::vector<std::string>& v) { return join(v, "\n") + "\n"; };
  if (!sysctls.empty()) {
    files["sysctl.d/90-polyaccel.conf"] =
        header + "# Install in /etc/sysctl.d/, apply with sysctl --system.\n" + lines(sysctls);
  }
  if (!modprobe.empty()) {
    files["modprobe.d/polyaccel.conf"] =
        header + "# Install in /etc/modprobe.d/, then update-initramfs -u and reboot.\n" +
        lines(modprobe);
  }
  if (!modules.empty()) {
    files["modules-load.d/polyaccel.conf"] =
        header + "# Install in /etc/modules-load.d/: loaded at every boot.\n" + lines(modules);
  }
  if (!systemd.empty()) {
    files["systemd/system.conf.d/90-polyaccel.conf"] =
        header + "# Install in /etc/systemd/system.conf.d/, effective at the next boot.\n" +
        "[Manager]\n" + lines(systemd);
  }
  if (!hugepages.empty()) {
    files["systemd/polyaccel-hugepages.service"] =
        header +
        "# Install in /etc/systemd/system/, then systemctl enable polyaccel-hugepages.\n"
        "[Unit]\n"
        "Description=Reserve hugepages on each NUMA node (polyaccel audit)\n"
        "DefaultDependencies=no\n"
        "After=sysinit.target local-fs.target\n"
        "Before=libvirtd.service kubelet.service\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n" +
        lines(hugepages) + "\n[Install]\nWantedBy=sysinit.target\n";
  }
  if (!commands.empty()) {
    files["commands.sh"] = "#!/bin/sh\n" + header +
                           "# Commands the findings call for, one finding at a time. Not meant "
                           "to run unreviewed.\nexit 0\n" +
                           lines(commands);
  }
  return files;
}

}  // namespace polyaccel
