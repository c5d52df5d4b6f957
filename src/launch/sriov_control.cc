#include "launch/sriov_control.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/file_io.h"
#include "core/number.h"
#include "core/strings.h"
#include "discover/sriov.h"

namespace polyaccel {

namespace fs = std::filesystem;

namespace {

std::optional<PciAddress> device_link_address(const fs::path& class_entry) {
  std::error_code ec;
  fs::path target = fs::read_symlink(class_entry / "device", ec);
  if (ec) return std::nullopt;
  return PciAddress::parse(target.filename().string());
}

Error write_error(const fs::path& path, unsigned value, int err) {
  std::string remedy;
  if (err == EACCES || err == EPERM) remedy = "run as root";
  if (err == EBUSY) remedy = "VFs are in use (bound to a guest or a driver): release them first";
  return Error{ErrorCode::io, path.string(),
               "writing " + std::to_string(value) + " failed: " + std::strerror(err), remedy};
}

// One value into a sysfs attribute at offset 0 (a regular file in a test tree is truncated).
Status write_value(int fd, const fs::path& path, unsigned value) {
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::ftruncate(fd, 0) != 0) {
    return write_error(path, value, errno);
  }
  std::string text = std::to_string(value) + "\n";
  ssize_t n = ::pwrite(fd, text.data(), text.size(), 0);
  if (n < 0) return write_error(path, value, errno);
  return Ok{};
}

}  // namespace

Result<PciAddress> resolve_pci_function(const fs::path& root, const std::string& name) {
  if (auto a = PciAddress::parse(name)) {
    std::error_code ec;
    if (!fs::exists(pci_device_dir(root, *a), ec)) {
      return bad_input(name, "no such PCI function", "list them with `polyaccel topo`");
    }
    return *a;
  }
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return bad_input("PF '" + name + "'", "not a PCI address, netdev or RDMA device name");
  }
  for (const char* cls : {"sys/class/net", "sys/class/infiniband"}) {
    if (auto a = device_link_address(root / cls / name)) return *a;
  }
  return bad_input(name, "no PCI function, netdev or RDMA device of that name",
                   "give a PCI address as `polyaccel topo` prints it");
}

Result<SriovChange> set_sriov_vf_count(const fs::path& root, const std::string& pf,
                                       const std::string& count) {
  auto address = resolve_pci_function(root, pf);
  if (!address) return address.error();
  auto requested = parse_integer<unsigned>(count, "COUNT", 0, 65535);  // PCIe: 16-bit TotalVFs
  if (!requested)
    return bad_input("COUNT " + quote_input(count), "not a non-negative whole number (0..65535)");
  auto facts = read_sriov_facts(root, *address);
  if (!facts) return facts.error();
  const std::optional<Sriov>& sriov = *facts;
  if (!sriov) {
    return bad_input(pf, address->to_string() + " is not an SR-IOV physical function",
                     "its sysfs directory has no sriov_totalvfs");
  }
  if (*requested > sriov->total_vfs) {
    return bad_input("COUNT " + count, address->to_string() + " supports at most " +
                                           std::to_string(sriov->total_vfs) + " VFs");
  }
  const fs::path attribute = pci_device_dir(root, *address) / "sriov_numvfs";
  // sysfs reaches devices through links (bus/pci/devices/X -> ../../../devices/...), all inside
  // the tree: whatever the links, the attribute we write must stay under the root, so that a
  // captured or hostile tree cannot make us write elsewhere.
  std::error_code ec;
  fs::path real_root = fs::canonical(root.empty() ? fs::path("/") : root, ec);
  fs::path real = ec ? fs::path() : fs::canonical(attribute, ec);
  if (ec) return write_error(attribute, *requested, ec.value());
  auto [root_end, real_it] =
      std::mismatch(real_root.begin(), real_root.end(), real.begin(), real.end());
  if (root_end != real_root.end() && !(real_root == "/")) {
    return bad_input(attribute.string(),
                     "resolves to " + real.string() + ", outside " + real_root.string());
  }
  (void)real_it;
  int fd = ::open(real.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return write_error(attribute, *requested, errno);
  ::flock(fd, LOCK_EX);
  SriovChange change{*address, sriov->total_vfs, 0, *requested, {}};
  // Read again under the lock: another command may have changed it meanwhile.
  auto current = read_sriov_num_vfs(root, *address, sriov->total_vfs);
  if (!current) {
    ::close(fd);
    return current.error();
  }
  change.previous_vfs = *current;
  Status status = Ok{};
  if (change.previous_vfs != *requested) {
    if (change.previous_vfs != 0 && *requested != 0) {
      status = write_value(fd, attribute, 0);
      if (status) change.writes.push_back(0);
    }
    if (status) {
      status = write_value(fd, attribute, *requested);
      if (status) change.writes.push_back(*requested);
    }
  }
  ::close(fd);  // releases the lock
  if (!status) return status.error();
  return change;
}

}  // namespace polyaccel
