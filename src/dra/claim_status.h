// ResourceClaim device status (DRAResourceClaimDeviceStatus; beta from 1.33, GA in 1.37): after a
// claim is prepared, the driver writes status.devices for the RDMA NICs (and VFs, and shares of
// a shared NIC) it gave the claim, so that `kubectl get resourceclaim -o yaml` and other
// controllers see which interface the pod got:
//
//   {driver, pool, device, shareID?,
//    conditions: [Ready True Prepared "RDMA device mlx5_2 (uverbs2)"],
//    data: {pciBusID, rdmaDevices, fabric},
//    networkData: {interfaceName, hardwareAddress, ips}}
//
// The MAC is read from <root>/sys/class/net/<if>/address; the IPs (CIDR) only when the agent
// shares the host's network namespace (the same interface name with the same MAC in
// getifaddrs): never another namespace's addresses.
//
// Writing: GET the claim, replace our driver's entries for these devices, keep every other
// entry (another driver's, or ours of another device), PUT .../status with the claim's
// resourceVersion; a conflict reads again (a few times). Kubernetes 1.36 also asks for the
// synthetic permission resourceclaims/driver `associated-node:update` named for our driver
// (deploy/kubernetes/components/dra/rbac.yaml). A refusal never fails the prepare: the pod runs
// without the status (the caller says it once).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/host_model.h"
#include "dra/slices.h"
#include "kube_api/client.h"

namespace polyaccel::dra {

// One allocated device of a claim as status.devices names it.
struct StatusDevice {
  std::string device;    // the pool device's name
  std::string share_id;  // empty: allocated whole
};

// A network interface of the host: its MAC and, when this process is in the host's network
// namespace, its addresses in CIDR notation.
struct NetdevAddresses {
  std::string hardware_address;  // "b8:ce:f6:12:34:56", or empty
  std::vector<std::string> ips;  // "192.0.2.5/24", "2001:db8::5/64"
};
NetdevAddresses read_netdev_addresses(const std::string& root, const std::string& netdev);

// status.devices entries for the NICs and VFs among `devices` (others are left out), with
// conditions stamped `now` (RFC 3339). `addresses` reads an interface (tests pass their own).
std::vector<nlohmann::json> nic_device_statuses(
    const HostModel& model, const Pool& pool, const std::vector<StatusDevice>& devices,
    const std::string& now,
    const std::function<NetdevAddresses(const std::string& netdev)>& addresses);

// The claim's status.devices with `ours` (entries of `driver`) in place of our earlier entries
// for the same devices; every other entry kept, in its order.
nlohmann::json merge_device_statuses(const nlohmann::json& current, const std::string& driver,
                                     const std::vector<nlohmann::json>& ours);

// Writes `ours` into claim ns/name's status.devices (GET, merge, PUT .../status; at most 4 tries
// on a conflict). Not found, or a claim whose uid is not `uid` (deleted and made again), is an
// Error; so is a refusal (403: the remedy names the RBAC rule).
Status write_claim_device_status(kube_api::KubeClient& client, const std::string& ns,
                                 const std::string& name, const std::string& uid,
                                 const std::string& driver,
                                 const std::vector<nlohmann::json>& ours);

}  // namespace polyaccel::dra
