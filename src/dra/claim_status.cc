#include "dra/claim_status.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>

#include "core/file_io.h"
#include "core/json.h"
#include "dra/publisher.h"

namespace polyaccel::dra {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// What the API server takes (ValidateResourceClaimStatusUpdate): at most 16 IPs, an interface
// name of at most 256 bytes and a hardware address of at most 128.
constexpr size_t kMaxIps = 16;

bool is_mac(const std::string& s) {
  if (s.size() < 2 || s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) || c == ':';
  });
}

// Prefix length of a netmask (contiguous ones); -1 when it is not one.
int prefix_length(const unsigned char* mask, size_t bytes) {
  int n = 0;
  bool ended = false;
  for (size_t i = 0; i < bytes; ++i) {
    for (int b = 7; b >= 0; --b) {
      bool one = (mask[i] >> b) & 1;
      if (one && ended) return -1;
      if (one)
        ++n;
      else
        ended = true;
    }
  }
  return n;
}

std::string format_mac(const unsigned char* addr, size_t len) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, i ? ":%02x" : "%02x", addr[i]);
    out += buf;
  }
  return out;
}

}  // namespace

NetdevAddresses read_netdev_addresses(const std::string& root, const std::string& netdev) {
  NetdevAddresses out;
  if (netdev.empty() || netdev.size() >= IFNAMSIZ || netdev.find('/') != std::string::npos ||
      netdev == "." || netdev == "..")
    return out;
  auto mac =
      read_first_line(fs::path(root.empty() ? "/" : root) / "sys/class/net" / netdev / "address");
  if (!mac || !is_mac(*mac)) return out;
  out.hardware_address = *mac;
  // The addresses only where this process sees the same interface: its name with that MAC.
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  bool same = false;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !a->ifa_name || netdev != a->ifa_name) continue;
    if (a->ifa_addr->sa_family != AF_PACKET) continue;
    const auto* ll = reinterpret_cast<const sockaddr_ll*>(a->ifa_addr);
    if (ll->sll_halen <= sizeof ll->sll_addr && format_mac(ll->sll_addr, ll->sll_halen) == *mac)
      same = true;
  }
  for (ifaddrs* a = list; same && a && out.ips.size() < kMaxIps; a = a->ifa_next) {
    if (!a->ifa_addr || !a->ifa_netmask || !a->ifa_name || netdev != a->ifa_name) continue;
    char text[INET6_ADDRSTRLEN] = {};
    int prefix = -1;
    if (a->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      const auto* mask = reinterpret_cast<const sockaddr_in*>(a->ifa_netmask);
      if (!::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) continue;
      prefix = prefix_length(reinterpret_cast<const unsigned char*>(&mask->sin_addr), 4);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      const auto* mask = reinterpret_cast<const sockaddr_in6*>(a->ifa_netmask);
      if (!::inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text)) continue;
      prefix = prefix_length(mask->sin6_addr.s6_addr, 16);
    } else {
      continue;
    }
    if (prefix < 0) continue;
    std::string cidr = std::string(text) + "/" + std::to_string(prefix);
    if (std::find(out.ips.begin(), out.ips.end(), cidr) == out.ips.end()) out.ips.push_back(cidr);
  }
  ::freeifaddrs(list);
  return out;
}

std::vector<json> nic_device_statuses(
    const HostModel& model, const Pool& pool, const std::vector<StatusDevice>& devices,
    const std::string& now,
    const std::function<NetdevAddresses(const std::string& netdev)>& addresses) {
  std::vector<json> out;
  for (const auto& sd : devices) {
    const Device* d = pool.device(sd.device);
    if (!d || (d->kind != DeviceKind::nic && d->kind != DeviceKind::vf)) continue;
    if (d->nic >= model.nics.size()) continue;
    const Nic& nic = model.nics[d->nic];
    std::vector<std::string> netdevs = nic.netdevs, rdma = nic.rdma_devices;
    std::string bus = nic.pci.address.to_string();
    if (d->vf) {
      if (!nic.pci.sriov || *d->vf >= nic.pci.sriov->vfs.size()) continue;
      const VirtualFunction& vf = nic.pci.sriov->vfs[*d->vf];
      netdevs = vf.netdevs;
      rdma = vf.rdma_devices;
      bus = vf.address.to_string();
    }
    json e = {{"driver", pool.driver}, {"pool", pool.node}, {"device", d->name}};
    if (!sd.share_id.empty()) e["shareID"] = sd.share_id;
    std::string message = rdma.empty() ? "the NIC's device nodes are in the container"
                                       : "RDMA device " + rdma.front() + " is in the container";
    if (!sd.share_id.empty()) message += ", shared with other claims";
    e["conditions"] = json::array({{{"type", "Ready"},
                                    {"status", "True"},
                                    {"reason", "Prepared"},
                                    {"message", message},
                                    {"lastTransitionTime", now}}});
    json data = {{"pciBusID", bus}, {"rdmaDevices", rdma}};
    if (!nic.fabric.empty()) data["fabric"] = nic.fabric;
    e["data"] = data;
    if (!netdevs.empty() && netdevs.front().size() <= 256) {
      json net = {{"interfaceName", netdevs.front()}};
      NetdevAddresses a = addresses ? addresses(netdevs.front()) : NetdevAddresses{};
      if (!a.hardware_address.empty()) net["hardwareAddress"] = a.hardware_address;
      if (!a.ips.empty()) net["ips"] = a.ips;
      e["networkData"] = net;
    }
    out.push_back(std::move(e));
  }
  return out;
}

json merge_device_statuses(const json& current, const std::string& driver,
                           const std::vector<json>& ours) {
  // What the server answers is not trusted: a field of another type is no key of ours.
  auto text = [](const json& e, const char* field) { return json_string(e, field, "\x01"); };
  auto key = [&](const json& e) {
    return text(e, "driver") + "/" + text(e, "pool") + "/" + text(e, "device") + "/" +
           (e.contains("shareID") ? text(e, "shareID") : "");
  };
  std::set<std::string> replaced;
  for (const auto& e : ours)
    replaced.insert(key(e));
  json out = json::array();
  if (current.is_array()) {
    for (const auto& e : current) {
      if (e.is_object() && text(e, "driver") == driver && replaced.count(key(e))) continue;
      out.push_back(e);
    }
  }
  for (const auto& e : ours)
    out.push_back(e);
  return out;
}

Status write_claim_device_status(kube_api::KubeClient& client, const std::string& ns,
                                 const std::string& name, const std::string& uid,
                                 const std::string& driver, const std::vector<json>& ours) {
  if (ours.empty()) return Ok{};
  const std::string path = "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name;
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto got = client.request("GET", path);
    if (!got) return got.error();
    if (got->status != 200) return api_error("GET " + path, *got);
    json claim = json::parse(got->body, nullptr, false);
    if (!claim.is_object() || !claim["metadata"].is_object())
      return Error{ErrorCode::io, "GET " + path, "is not a ResourceClaim", {}};
    const std::string stored_uid = json_string(claim["metadata"], "uid");
    if (stored_uid != uid) {
      return Error{ErrorCode::not_found,
                   "claim " + ns + "/" + name,
                   "is not the one prepared (uid " + stored_uid + ", not " + uid + ")",
                   {}};
    }
    json& status = claim["status"];
    if (!status.is_object()) status = json::object();
    json before = status.contains("devices") ? status["devices"] : json::array();
    json merged = merge_device_statuses(before, driver, ours);
    // Stamps aside, the same entries: nothing to write (a repeat after a restart).
    auto unstamped = [](json devices) {
      if (!devices.is_array()) return devices;
      for (auto& e : devices)
        if (e.is_object() && e.contains("conditions") && e["conditions"].is_array())
          for (auto& c : e["conditions"])
            if (c.is_object()) c.erase("lastTransitionTime");
      return devices;
    };
    if (unstamped(merged) == unstamped(before)) return Ok{};
    status["devices"] = merged;
    auto put = client.request("PUT", path + "/status", claim.dump());
    if (!put) return put.error();
    if (put->status == 409) continue;  // written by someone else since: read again
    if (put->status < 200 || put->status >= 300) {
      Error e = api_error("PUT " + path + "/status", *put);
      if (put->status == 403) {
        e.remedy =
            "grant the agent's service account resourceclaims/status get/update and, from "
            "Kubernetes 1.36, resourceclaims/driver associated-node:update for " +
            driver + " (deploy/kubernetes/components/dra/rbac.yaml)";
      }
      return e;
    }
    return Ok{};
  }
  return Error{ErrorCode::io,
               "PUT " + path + "/status",
               "kept conflicting with other writers (4 tries)",
               {}};
}

}  // namespace polyaccel::dra
