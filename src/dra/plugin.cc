#include "dra/plugin.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>

#include "core/file_io.h"
#include "core/json.h"
#include "core/log.h"
#include "core/number.h"
#include "core/socket_path.h"
#include "core/strings.h"
#include "dra/claim_status.h"
#include "dra/cpu_devices.h"
#include "kube/proto/dra_health_v1alpha1.grpc.pb.h"
#include "kube/proto/dra_v1.grpc.pb.h"
#include "kube/proto/dra_v1beta1.grpc.pb.h"
#include "kube/proto/pluginregistration_v1.grpc.pb.h"
#include "share/mig_profiles.h"

namespace polyaccel::dra {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
namespace drav1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

constexpr size_t kMaxCheckpointBytes = 16u << 20;
// kubelet cuts a health message at 1024 characters (dra-health v1alpha1, v0.36.0).
constexpr size_t kMaxHealthMessageBytes = 1024;
// What the registration advertises for the health service: the generated service's name.
constexpr const char* kHealthService = "v1alpha1.DRAResourceHealth";

// A claim UID goes into file and CDI device names: a UUID's characters only.
bool valid_uid(const std::string& uid) {
  if (uid.empty() || uid.size() > 64) return false;
  return std::all_of(uid.begin(), uid.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

bool valid_object_name(const std::string& s) {
  return !s.empty() && s.size() <= 253 && is_dns_subdomain(s);
}

// `polyaccel mig apply`'s lock (cli/mig_apply.cc), held while prepare or unprepare makes or
// destroys MIG instances, so that an apply and a claim never interleave on a GPU. A lock file
// that cannot be opened (not root, no /run/lock) is no lock, as nothing else can take it then.
class MigApplyLock {
 public:
  MigApplyLock() = default;
  MigApplyLock(const MigApplyLock&) = delete;
  MigApplyLock& operator=(const MigApplyLock&) = delete;
  ~MigApplyLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status acquire() {
    if (fd_ >= 0) return Ok{};
    const char* dir = std::getenv("POLYACCEL_LOCK_DIR");
    std::string path = std::string(dir && *dir ? dir : "/run/lock") + "/polyaccel-mig.lock";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Ok{};
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return Error{ErrorCode::io, path, "a polyaccel mig apply is running",
                   "kubelet retries the claim once it is done"};
    }
    fd_ = fd;
    return Ok{};
  }

 private:
  int fd_ = -1;
};

json prepared_json(const PreparedClaim& c) {
  json devices = json::array();
  for (const auto& d : c.devices) {
    json dj = {{"request", d.request}, {"pool", d.pool}, {"device", d.device}, {"cdi", d.cdi_ids}};
    if (!d.share_id.empty()) dj["shareID"] = d.share_id;
    if (d.created_mig) {
      dj["createdMig"] = {{"pciBusID", d.created_mig->pci_bus_id},
                          {"gpuInstance", d.created_mig->gpu_instance_id},
                          {"computeInstance", d.created_mig->compute_instance_id},
                          {"uuid", d.created_mig->uuid}};
    }
    devices.push_back(std::move(dj));
  }
  json out = {{"namespace", c.ns}, {"name", c.name}, {"cdiFile", c.cdi_file}, {"devices", devices}};
  if (!c.cpus.empty()) out["cpus"] = c.cpus.to_list();
  if (!c.mems.empty()) out["mems"] = c.mems.to_list();
  if (c.memory_bytes) out["memoryBytes"] = c.memory_bytes;
  if (!c.hugepage_bytes.empty()) {
    json h = json::object();
    for (const auto& [size, bytes] : c.hugepage_bytes)
      h[std::to_string(size)] = bytes;
    out["hugepageBytes"] = std::move(h);
  }
  return out;
}

}  // namespace

const char* to_string(Health health) {
  switch (health) {
    case Health::healthy:
      return "Healthy";
    case Health::unhealthy:
      return "Unhealthy";
    case Health::unknown:
      break;
  }
  return "Unknown";
}

std::string checkpoint_json(const std::map<std::string, PreparedClaim>& claims) {
  json j = {{"version", kCheckpointVersion}, {"claims", json::object()}};
  for (const auto& [uid, c] : claims)
    j["claims"][uid] = prepared_json(c);
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<std::map<std::string, PreparedClaim>> parse_checkpoint(const std::string& text,
                                                              const std::string& input) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("version") || j["version"] != kCheckpointVersion ||
      !j.contains("claims") || !j["claims"].is_object())
    return bad_input(input, "is not a polyaccel DRA checkpoint (version 1)");
  std::map<std::string, PreparedClaim> out;
  try {
    for (const auto& [uid, c] : j["claims"].items()) {
      if (!valid_uid(uid)) return bad_input(input, "holds a claim uid that is not one");
      PreparedClaim p;
      p.uid = uid;
      p.ns = c.at("namespace").get<std::string>();
      p.name = c.at("name").get<std::string>();
      p.cdi_file = c.at("cdiFile").get<std::string>();
      for (const auto& d : c.at("devices")) {
        PreparedDevice pd{d.at("request").get<std::string>(),
                          d.at("pool").get<std::string>(),
                          d.at("device").get<std::string>(),
                          d.at("cdi").get<std::vector<std::string>>(),
                          {},
                          d.value("shareID", std::string())};
        if (!pd.share_id.empty() && !valid_uid(pd.share_id))
          return bad_input(input, "holds a shareID of " + uid + " that is not a UID");
        if (d.contains("createdMig")) {
          const json& m = d.at("createdMig");
          auto gi = json_integer<unsigned>(m.at("gpuInstance"), "gpuInstance");
          auto ci = json_integer<unsigned>(m.at("computeInstance"), "computeInstance");
          if (!gi || !ci) return bad_input(input, "has a bad createdMig record of " + uid);
          pd.created_mig = CreatedMig{m.at("pciBusID").get<std::string>(), *gi, *ci,
                                      m.at("uuid").get<std::string>()};
        }
        p.devices.push_back(std::move(pd));
      }
      for (auto [key, set] : {std::pair{"cpus", &p.cpus}, std::pair{"mems", &p.mems}}) {
        if (!c.contains(key)) continue;
        auto parsed = CpuSet::parse_list(c.at(key).get<std::string>());
        if (!parsed) return bad_input(input, "has a bad " + std::string(key) + " list of " + uid);
        *set = *parsed;
      }
      // Integers in range only: a float or a negative number is refused, never converted.
      if (c.contains("memoryBytes")) {
        auto bytes = json_integer<std::uint64_t>(c.at("memoryBytes"), "memoryBytes");
        if (!bytes) return bad_input(input, "has a bad memoryBytes of " + uid);
        p.memory_bytes = *bytes;
      }
      if (c.contains("hugepageBytes")) {
        for (const auto& [size, bytes] : c.at("hugepageBytes").items()) {
          auto page = parse_unsigned(size, "hugepage size", 1);
          if (!page) return bad_input(input, "has a bad hugepage size of " + uid);
          auto n = json_integer<std::uint64_t>(bytes, "hugepageBytes");
          if (!n) return bad_input(input, "has bad hugepageBytes of " + uid);
          p.hugepage_bytes[*page] = *n;
        }
      }
      out[uid] = std::move(p);
    }
  } catch (const json::exception& e) {
    return bad_input(input, std::string("has a bad claim record: ") + e.what());
  }
  return out;
}

Result<std::vector<PreparedClaim>> read_prepared_claims(const std::string& plugin_dir) {
  std::error_code ec;
  const fs::path p = fs::path(plugin_dir) / "checkpoint.json";
  if (!fs::exists(p, ec)) return std::vector<PreparedClaim>{};
  auto text = read_input_file(p, kMaxCheckpointBytes, "DRA checkpoint");
  if (!text) return text.error();
  auto parsed = parse_checkpoint(*text, p.string());
  if (!parsed) return parsed.error();
  std::vector<PreparedClaim> out;
  for (auto& [uid, c] : *parsed)
    out.push_back(std::move(c));
  return out;
}

Result<ClaimInfo> parse_claim(const json& claim) {
  // The server's answer: a field of another type is no field (json_string), never a throw.
  if (json_string(claim, "kind") != "ResourceClaim")
    return bad_input("ResourceClaim", "the answer is not a ResourceClaim");
  ClaimInfo info;
  const json& meta = json_object(claim, "metadata");
  info.uid = json_string(meta, "uid");
  const std::string what = "ResourceClaim " + json_string(meta, "name");
  const json& status = json_object(claim, "status");
  if (!status.contains("allocation")) return bad_input(what, "is not allocated");
  try {
    const json& results = status.at("allocation").at("devices").at("results");
    for (const auto& r : results) {
      AllocatedDevice d;
      d.request = r.at("request").get<std::string>();
      d.driver = r.at("driver").get<std::string>();
      d.pool = r.at("pool").get<std::string>();
      d.device = r.at("device").get<std::string>();
      d.admin_access = r.value("adminAccess", false);
      // Goes into CDI device names: a UID's characters only.
      if (r.contains("shareID")) {
        d.share_id = r.at("shareID").get<std::string>();
        if (!valid_uid(d.share_id))
          return bad_input(what, "has an allocation result whose shareID is not a UID");
      }
      info.devices.push_back(std::move(d));
    }
  } catch (const json::exception& e) {
    return bad_input(what, std::string("has a bad allocation result: ") + e.what());
  }
  return info;
}

ClaimLookup api_claim_lookup(kube_api::KubeClient& client) {
  return [&client](const std::string& ns, const std::string& name) -> Result<ClaimInfo> {
    std::string path = "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name;
    auto r = client.request("GET", path);
    if (!r) return r.error();
    if (r->status != 200) {
      kube_api::HttpResponse resp = *r;
      Error e{ErrorCode::io, "GET " + path, "HTTP " + std::to_string(resp.status), {}};
      if (resp.status == 403)
        e.remedy =
            "grant the agent's service account resourceclaims get (deploy/kubernetes/overlays/dra)";
      return e;
    }
    return parse_claim(json::parse(r->body, nullptr, false));
  };
}

// ---- the gRPC services ----------------------------------------------------------------------

struct DraPlugin::Impl {
  DraPluginOptions options;
  mutable std::mutex mu;  // guards the state below; prepare and unprepare run one at a time
  HostModel model;
  Pool pool;
  CdiHost host;
  std::map<std::string, PreparedClaim> claims;  // by uid: the checkpoint
  unsigned registrations = 0;
  std::string registration_error;
  std::string status_said;  // the last problem writing a claim's status.devices

  std::unique_ptr<grpc::Service> v1, v1beta1, health_service, registration;
  std::unique_ptr<grpc::Server> dra_server, registration_server;

  // The health streams' state, apart from mu: a prepare that makes a MIG instance holds mu for
  // seconds, and a stream must not wait for it.
  mutable std::mutex health_mu;
  std::condition_variable health_cv;
  PoolHealth health;                 // under health_mu
  std::uint64_t health_version = 0;  // grows with every change of `health`
  unsigned health_streams = 0;
  std::uint64_t health_streams_opened = 0;
  bool health_stopping = false;

  explicit Impl(DraPluginOptions o) : options(std::move(o)) {}

  void log(const std::string& line) const {
    if (options.log) {
      options.log(line);
    } else {
      log_line("polyaccel agent: dra: " + line);
    }
  }

  std::string endpoint() const { return (fs::path(options.plugin_dir) / "dra.sock").string(); }
  std::string registration_socket() const {
    return (fs::path(options.registry_dir) / (options.driver + "-reg.sock")).string();
  }
  std::string checkpoint_path() const {
    return (fs::path(options.plugin_dir) / "checkpoint.json").string();
  }

  Status save() const { return write_file_atomically(checkpoint_path(), checkpoint_json(claims)); }

  Status load() {
    std::error_code ec;
    fs::path p = checkpoint_path();
    if (!fs::exists(p, ec)) return Ok{};
    auto text = read_input_file(p, kMaxCheckpointBytes, "DRA checkpoint");
    if (!text) return text.error();
    auto parsed = parse_checkpoint(*text, p.string());
    if (!parsed) return parsed.error();
    claims = std::move(*parsed);
    return Ok{};
  }

  // The MIG instance a device is, as the model we hold knows it, or added to that model: an
  // instance that prepare created (or found made since) exists now, and the monitor's next
  // snapshot says so too. `scratch` is the device with its instance index.
  const Device* with_instance(const Device& d, const CreatedMig& m, Device& scratch) {
    if (d.accelerator >= model.accelerators.size()) return nullptr;
    Accelerator& a = model.accelerators[d.accelerator];
    if (!a.inventory) return nullptr;
    auto& instances = a.inventory->mig_instances;
    auto it = std::find_if(instances.begin(), instances.end(), [&](const MigInstance& i) {
      return i.gpu_instance_id == m.gpu_instance_id &&
             i.compute_instance_id == m.compute_instance_id;
    });
    if (it == instances.end()) {
      MigInstance mi;
      mi.gpu_instance_id = m.gpu_instance_id;
      mi.compute_instance_id = m.compute_instance_id;
      mi.profile_name = d.mig_profile;
      mi.placement_start = d.mig_start;
      mi.placement_size = d.mig_size;
      mi.uuid = m.uuid;
      instances.push_back(std::move(mi));
      it = instances.end() - 1;
    }
    scratch = d;
    scratch.mig_instance = static_cast<size_t>(it - instances.begin());
    return &scratch;
  }

  // The GPU of a MIG device as the library sees it now.
  Result<MigGpu> live_gpu(const Device& d) {
    const std::string bdf = model.accelerators[d.accelerator].pci.address.to_string();
    auto gpus = options.mig->gpus();
    if (!gpus) return gpus.error();
    for (auto& g : *gpus)
      if (g.pci_bus_id == bdf) return std::move(g);
    return Error{ErrorCode::not_found, bdf, "is not a GPU that the MIG control library lists", {}};
  }

  // A MIG device's instance: the one at its placement if it exists, else a new one (GPU
  // instance and compute instance) when the placement is free. `created` is set when this call
  // made it.
  Result<CreatedMig> ensure_mig_instance(const Device& d, bool& created) {
    created = false;
    auto gpu = live_gpu(d);
    if (!gpu) return gpu.error();
    const std::string where = "MIG " + d.mig_profile + " at memory slice " +
                              std::to_string(d.mig_start) + " of GPU " + gpu->pci_bus_id;
    for (const auto& i : gpu->instances) {
      if (i.profile == d.mig_profile && i.start == d.mig_start && i.has_compute_instance)
        return CreatedMig{gpu->pci_bus_id, i.gpu_instance_id, i.compute_instance_id, i.uuid};
    }
    for (const auto& i : gpu->instances) {
      bool overlap = i.start < d.mig_start + d.mig_size && d.mig_start < i.start + i.size;
      if (overlap) {
        return Error{ErrorCode::unsupported, "device " + d.name,
                     where + " is taken by MIG " + i.profile + " (GPU instance " +
                         std::to_string(i.gpu_instance_id) + ") at memory slice " +
                         std::to_string(i.start),
                     "destroy that instance or let the scheduler pick a free placement"};
      }
    }
    if (!gpu->mig_enabled)
      return Error{ErrorCode::unsupported, "device " + d.name, where + ": MIG mode is off", {}};
    const MigProfile* profile =
        gpu->library_geometry ? gpu->library_geometry->profile(d.mig_profile) : nullptr;
    if (!profile) {
      const MigGeometry* g = find_mig_geometry(gpu->pci_id);
      if (!g) g = find_mig_geometry(gpu->name);
      if (g) profile = g->profile(d.mig_profile);
    }
    if (!profile)
      return Error{ErrorCode::not_found, "device " + d.name, where + ": unknown profile", {}};
    auto made = options.mig->create(gpu->index, profile->profile_id, d.mig_start);
    if (!made) return made.error();
    created = true;
    log("created " + where + " (GPU instance " + std::to_string(made->gpu_instance_id) +
        ", compute instance " + std::to_string(made->compute_instance_id) + ") for device " +
        d.name);
    return CreatedMig{gpu->pci_bus_id, made->gpu_instance_id, made->compute_instance_id,
                      made->uuid};
  }

  // Destroys an instance prepare created; one that is gone already is fine.
  Status destroy_mig_instance(const CreatedMig& m) {
    if (!options.mig) {
      return Error{ErrorCode::unsupported, "MIG instance " + m.uuid,
                   "was created for the claim, and this agent has no MIG control to destroy it",
                   "run the agent with --dra-mig-devices all"};
    }
    auto gpus = options.mig->gpus();
    if (!gpus) return gpus.error();
    for (const auto& g : *gpus) {
      if (g.pci_bus_id != m.pci_bus_id) continue;
      for (const auto& i : g.instances) {
        if (i.gpu_instance_id != m.gpu_instance_id) continue;
        Status st = options.mig->destroy(g.index, m.gpu_instance_id);
        if (!st) return st;
        log("destroyed MIG GPU instance " + std::to_string(m.gpu_instance_id) + " of GPU " +
            m.pci_bus_id);
      }
    }
    // Our model no longer holds it either.
    for (auto& a : model.accelerators) {
      if (!a.inventory || a.pci.address.to_string() != m.pci_bus_id) continue;
      auto& v = a.inventory->mig_instances;
      v.erase(std::remove_if(v.begin(), v.end(),
                             [&](const MigInstance& i) {
                               return i.gpu_instance_id == m.gpu_instance_id &&
                                      i.compute_instance_id == m.compute_instance_id;
                             }),
              v.end());
    }
    return Ok{};
  }

  // Caller holds mu.
  PrepareOutcome prepare_one(const ClaimRef& ref) {
    PrepareOutcome out;
    if (!valid_uid(ref.uid) || !valid_object_name(ref.ns) || !valid_object_name(ref.name)) {
      out.error = "claim " + ref.ns + "/" + ref.name + ": namespace, name or uid is not valid";
      return out;
    }
    auto known = claims.find(ref.uid);
    if (known != claims.end()) {
      // Prepared before (a repeat, or kubelet or we restarted): the same answer, and the CDI
      // spec put back if someone removed it.
      std::error_code ec;
      if (!fs::exists(fs::path(options.cdi_dir) / known->second.cdi_file, ec)) {
        std::vector<const Device*> devices;
        std::vector<std::string> shares;
        std::vector<Device> scratch(known->second.devices.size());
        for (size_t i = 0; i < known->second.devices.size(); ++i) {
          const auto& d = known->second.devices[i];
          const Device* pd = pool.device(d.device);
          if (pd && d.created_mig) pd = with_instance(*pd, *d.created_mig, scratch[i]);
          if (pd) devices.push_back(pd);
          shares.push_back(d.share_id);
        }
        if (devices.size() == known->second.devices.size()) {
          auto spec = claim_spec(model, devices, host, ref.uid, options.cdi, shares);
          if (spec) (void)write_cdi_spec(options.cdi_dir, *spec);
        }
      }
      out.devices = known->second.devices;
      return out;
    }
    if (!options.lookup) {
      out.error = "no API server to read claim " + ref.ns + "/" + ref.name + " from";
      return out;
    }
    auto info = options.lookup(ref.ns, ref.name);
    if (!info) {
      out.error = info.error().message();
      return out;
    }
    if (!info->uid.empty() && info->uid != ref.uid) {
      out.error = "claim " + ref.ns + "/" + ref.name + " has uid " + info->uid + ", not " +
                  ref.uid + " (deleted and made again?)";
      return out;
    }
    std::vector<const Device*> devices;
    std::vector<PreparedDevice> prepared;
    std::vector<Device> scratch;
    scratch.reserve(info->devices.size());  // devices point into it
    MigApplyLock mig_lock;                  // taken before the first MIG device, kept to the end
    std::vector<CreatedMig> created;        // by this call: destroyed again if it fails
    auto fail = [&](const std::string& error) {
      for (const auto& m : created)
        if (Status st = destroy_mig_instance(m); !st) log(st.error().message());
      out.error = error;
      return out;
    };
    // Devices other claims hold: by name, with the shares held of each ("" for a whole one).
    std::map<std::string, std::set<std::string>> held;
    for (const auto& [uid, c] : claims)
      for (const auto& d : c.devices)
        held[d.device].insert(d.share_id);
    std::vector<std::string> shares;
    for (const auto& a : info->devices) {
      if (a.driver != options.driver || a.pool != pool.node) continue;
      const Device* d = pool.device(a.device);
      if (!d) {
        out.error = "device " + a.device + " of claim " + ref.ns + "/" + ref.name +
                    " is not on this node now";
        return out;
      }
      if (!a.share_id.empty() && !d->allow_multiple_allocations) {
        return fail("device " + a.device + " is allocated as share " + a.share_id +
                    " but is not published as shared (--dra-nic-shares)");
      }
      if (held.count(a.device) && !a.admin_access) {
        // Shares of a shared device live side by side; a whole device, or the same share
        // twice, does not.
        const auto& taken = held.at(a.device);
        if (a.share_id.empty() || taken.count("") || taken.count(a.share_id))
          return fail("device " + a.device + " is prepared for another claim already");
      }
      PreparedDevice pd{a.request, a.pool, a.device, {}, {}, a.share_id};
      if (d->kind == DeviceKind::mig && options.mig) {
        // The library is the truth: the instance may have been made or destroyed since the
        // pool was built.
        if (Status l = mig_lock.acquire(); !l) return fail(l.error().message());
        bool made = false;
        auto m = ensure_mig_instance(*d, made);
        if (!m) return fail(m.error().message());
        if (made) {
          created.push_back(*m);
          pd.created_mig = *m;
        }
        scratch.emplace_back();
        d = with_instance(*d, *m, scratch.back());
        if (!d) return fail("device " + a.device + ": its GPU is not in the model");
      }
      devices.push_back(d);
      shares.push_back(a.share_id);
      prepared.push_back(std::move(pd));
    }
    PreparedClaim record{ref.uid, ref.ns, ref.name, {}, {}, {}, {}, 0, {}};
    const CpuGrant grant = grant_of(model, devices);
    record.cpus = grant.cpus;
    record.mems = grant.mems;
    record.hugepage_bytes = grant.hugepage_bytes;
    for (const Device* d : devices)
      if (d->kind == DeviceKind::memory)
        if (const NumaNode* n = model.numa_node(d->numa_node))
          record.memory_bytes += n->memory_bytes;
    if (!devices.empty()) {
      auto spec = claim_spec(model, devices, host, ref.uid, options.cdi, shares);
      if (!spec) return fail(spec.error().message());
      for (size_t i = 0; i < prepared.size(); ++i)
        prepared[i].cdi_ids.push_back(spec->qualified_name(spec->devices[i].name));
      Status w = write_cdi_spec(options.cdi_dir, *spec);
      if (!w) return fail(w.error().message());
      record.cdi_file = spec->file_name();
    }
    record.devices = prepared;
    claims[ref.uid] = record;
    Status saved = save();
    if (!saved) {
      claims.erase(ref.uid);
      if (!record.cdi_file.empty()) (void)remove_cdi_spec(options.cdi_dir, record.cdi_file);
      return fail(saved.error().message());
    }
    write_status(ref, prepared);
    out.devices = std::move(prepared);
    return out;
  }

  // status.devices for the claim's NICs (claim_status.h): said once per distinct problem.
  void write_status(const ClaimRef& ref, const std::vector<PreparedDevice>& prepared) {
    if (!options.write_status) return;
    std::vector<StatusDevice> devices;
    for (const auto& d : prepared)
      devices.push_back({d.device, d.share_id});
    const std::string root = options.root;
    auto entries = nic_device_statuses(
        model, pool, devices, kube_api::now_rfc3339(),
        [&root](const std::string& n) { return read_netdev_addresses(root, n); });
    if (entries.empty()) return;
    Status st = options.write_status(ref, entries);
    std::string problem = st ? "" : st.error().message();
    if (!problem.empty() && problem != status_said)
      log("claim " + ref.ns + "/" + ref.name + ": device status not written: " + problem);
    status_said = problem;
  }

  std::string unprepare_one(const ClaimRef& ref) {
    auto it = claims.find(ref.uid);
    if (it == claims.end()) return {};
    // The instances we made first: one still in use fails the call and keeps the record, so
    // that kubelet's retry finds it.
    MigApplyLock mig_lock;
    for (const auto& d : it->second.devices) {
      if (!d.created_mig) continue;
      if (Status l = mig_lock.acquire(); !l) return l.error().message();
      Status st = destroy_mig_instance(*d.created_mig);
      if (!st) return st.error().message();
    }
    if (!it->second.cdi_file.empty()) {
      Status r = remove_cdi_spec(options.cdi_dir, it->second.cdi_file);
      if (!r) return r.error().message();
    }
    PreparedClaim keep = it->second;
    claims.erase(it);
    Status saved = save();
    if (!saved) {
      claims[ref.uid] = keep;
      return saved.error().message();
    }
    return {};
  }
};

namespace {

template <class Request>
std::vector<ClaimRef> refs_of(const Request& req) {
  std::vector<ClaimRef> out;
  for (const auto& c : req.claims())
    out.push_back({c.namespace_(), c.uid(), c.name()});
  return out;
}

// DRAPlugin for one version's generated types (v1 and v1beta1 carry the same messages).
template <class ServiceBase, class PrepareRequest, class PrepareResponse, class UnprepareRequest,
          class UnprepareResponse>
class DraService final : public ServiceBase {
 public:
  explicit DraService(DraPlugin& plugin) : plugin_(plugin) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*, const PrepareRequest* req,
                                    PrepareResponse* resp) override {
    for (auto& [uid, outcome] : plugin_.prepare(refs_of(*req))) {
      auto& claim = (*resp->mutable_claims())[uid];
      if (!outcome.error.empty()) {
        claim.set_error(outcome.error);
        continue;
      }
      for (const auto& d : outcome.devices) {
        auto* dev = claim.add_devices();
        if (!d.request.empty()) dev->add_request_names(d.request);
        dev->set_pool_name(d.pool);
        dev->set_device_name(d.device);
        // v1 has share_id (1.35+); v1beta1 has not: kubelet there knows no shares.
        if constexpr (requires { dev->set_share_id(d.share_id); })
          if (!d.share_id.empty()) dev->set_share_id(d.share_id);
        for (const auto& id : d.cdi_ids)
          dev->add_cdi_device_ids(id);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const UnprepareRequest* req,
                                      UnprepareResponse* resp) override {
    for (auto& [uid, error] : plugin_.unprepare(refs_of(*req))) {
      auto& claim = (*resp->mutable_claims())[uid];
      if (!error.empty()) claim.set_error(error);
    }
    return grpc::Status::OK;
  }

 private:
  DraPlugin& plugin_;
};

using V1Service =
    DraService<drav1::DRAPlugin::Service, drav1::NodePrepareResourcesRequest,
               drav1::NodePrepareResourcesResponse, drav1::NodeUnprepareResourcesRequest,
               drav1::NodeUnprepareResourcesResponse>;
using V1beta1Service =
    DraService<drav1beta1::DRAPlugin::Service, drav1beta1::NodePrepareResourcesRequest,
               drav1beta1::NodePrepareResourcesResponse, drav1beta1::NodeUnprepareResourcesRequest,
               drav1beta1::NodeUnprepareResourcesResponse>;

namespace health = ::v1alpha1;

health::HealthStatus wire_health(Health h) {
  switch (h) {
    case Health::healthy:
      return health::HEALTHY;
    case Health::unhealthy:
      return health::UNHEALTHY;
    case Health::unknown:
      break;
  }
  return health::UNKNOWN;
}

// DRAResourceHealth: one stream per kubelet, the full state on connect, on every change and every
// health_resend; ended when the plugin stops or the kubelet goes.
class HealthService final : public health::DRAResourceHealth::Service {
 public:
  explicit HealthService(DraPlugin::Impl& impl) : impl_(impl) {}

  grpc::Status NodeWatchResources(
      grpc::ServerContext* ctx, const health::NodeWatchResourcesRequest*,
      grpc::ServerWriter<health::NodeWatchResourcesResponse>* writer) override {
    using clock = std::chrono::steady_clock;
    const auto resend = std::max(impl_.options.health_resend, std::chrono::milliseconds(10));
    // kubelet's own default (30 s) unless we resend more rarely than a third of it.
    const auto timeout_s = std::max<std::int64_t>(
        30, 3 * std::chrono::duration_cast<std::chrono::seconds>(resend).count());
    std::unique_lock<std::mutex> lock(impl_.health_mu);
    if (impl_.health_stopping)
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the polyaccel agent is stopping");
    if (impl_.health_streams >= impl_.options.max_health_streams) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          std::to_string(impl_.health_streams) +
                              " health streams are open already; the limit is " +
                              std::to_string(impl_.options.max_health_streams));
    }
    ++impl_.health_streams;
    ++impl_.health_streams_opened;
    bool first = true;
    std::uint64_t sent = 0;
    auto next = clock::now();
    while (!impl_.health_stopping && !ctx->IsCancelled()) {
      if (first || impl_.health_version != sent || clock::now() >= next) {
        health::NodeWatchResourcesResponse resp;
        const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count();
        for (const auto& [name, report] : impl_.health.devices) {
          auto* d = resp.add_devices();
          d->mutable_device()->set_pool_name(impl_.health.pool);
          d->mutable_device()->set_device_name(name);
          d->set_health(wire_health(report.health));
          d->set_last_updated_time(now);
          d->set_health_check_timeout_seconds(timeout_s);
          if (!report.message.empty())
            d->set_message(std::string(utf8_prefix(report.message, kMaxHealthMessageBytes)));
        }
        sent = impl_.health_version;
        first = false;
        lock.unlock();
        const bool written = writer->Write(resp);
        lock.lock();
        if (!written) break;  // the kubelet went
        next = clock::now() + resend;
        continue;
      }
      // Woken by a change or stop(); a kubelet that went is seen within 200 ms.
      impl_.health_cv.wait_until(lock,
                                 std::min(next, clock::now() + std::chrono::milliseconds(200)));
    }
    --impl_.health_streams;
    impl_.health_cv.notify_all();
    return grpc::Status::OK;
  }

 private:
  DraPlugin::Impl& impl_;
};

class RegistrationService final : public pluginregistration::Registration::Service {
 public:
  RegistrationService(DraPlugin::Impl& impl, std::string endpoint)
      : impl_(impl), endpoint_(std::move(endpoint)) {}

  grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                       pluginregistration::PluginInfo* info) override {
    info->set_type("DRAPlugin");
    info->set_name(impl_.options.driver);
    info->set_endpoint(endpoint_);
    // kubelet takes the first it knows: v1 (1.34+), else v1beta1 (1.32, 1.33).
    info->add_supported_versions("v1.DRAPlugin");
    info->add_supported_versions("v1beta1.DRAPlugin");
    // The health stream is served too: kubelets that open it only when advertised see it here,
    // the others ignore a version they do not know.
    info->add_supported_versions(kHealthService);
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*,
                                        const pluginregistration::RegistrationStatus* status,
                                        pluginregistration::RegistrationStatusResponse*) override {
    std::lock_guard<std::mutex> lock(impl_.mu);
    if (status->plugin_registered()) {
      ++impl_.registrations;
      impl_.registration_error.clear();
      impl_.log("registered with kubelet as " + impl_.options.driver);
    } else {
      impl_.registration_error = status->error();
      impl_.log("kubelet refused the registration: " + status->error());
    }
    return grpc::Status::OK;
  }

 private:
  DraPlugin::Impl& impl_;
  std::string endpoint_;
};

}  // namespace

DraPlugin::DraPlugin(DraPluginOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

DraPlugin::~DraPlugin() {
  stop();
}

Status DraPlugin::start(HostModel model, Pool pool, CdiHost host) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.model = std::move(model);
    m.pool = std::move(pool);
    m.host = std::move(host);
  }
  std::error_code ec;
  fs::create_directories(m.options.plugin_dir, ec);
  if (ec) return Error{ErrorCode::io, m.options.plugin_dir, "cannot create: " + ec.message(), {}};
  {
    std::lock_guard<std::mutex> lock(m.mu);
    Status st = m.load();
    if (!st) return st;
  }
  // Our own stale sockets only: both names are ours.
  std::string endpoint = m.endpoint();
  if (Status st = prepare_socket_path(endpoint); !st) return st;
  m.v1 = std::make_unique<V1Service>(*this);
  m.v1beta1 = std::make_unique<V1beta1Service>(*this);
  m.health_service = std::make_unique<HealthService>(m);
  {
    std::lock_guard<std::mutex> lock(m.health_mu);
    m.health_stopping = false;
  }
  {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + endpoint, grpc::InsecureServerCredentials());
    b.RegisterService(m.v1.get());
    b.RegisterService(m.v1beta1.get());
    b.RegisterService(m.health_service.get());
    m.dra_server = b.BuildAndStart();
    if (!m.dra_server)
      return Error{ErrorCode::io, endpoint, "cannot serve the DRA API on it",
                   "is the kubelet plugins directory writable?"};
  }
  // The registration socket last: kubelet dials dra.sock as soon as it sees it.
  fs::create_directories(m.options.registry_dir, ec);
  std::string reg = m.registration_socket();
  if (Status st = prepare_socket_path(reg); !st) {
    m.dra_server->Shutdown();
    m.dra_server.reset();
    ::unlink(endpoint.c_str());
    return st;
  }
  m.registration = std::make_unique<RegistrationService>(m, endpoint);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + reg, grpc::InsecureServerCredentials());
  b.RegisterService(m.registration.get());
  m.registration_server = b.BuildAndStart();
  if (!m.registration_server) {
    m.dra_server->Shutdown();
    m.dra_server.reset();
    return Error{ErrorCode::io, reg, "cannot serve the plugin registration API on it",
                 "is kubelet's plugins_registry directory writable?"};
  }
  return Ok{};
}

void DraPlugin::stop() {
  Impl& m = *impl_;
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(2); };
  if (m.registration_server) {
    // Removing the socket is what tells kubelet we are gone.
    std::string reg = m.registration_socket();
    ::unlink(reg.c_str());
    m.registration_server->Shutdown(deadline());
    m.registration_server->Wait();
    m.registration_server.reset();
  }
  {
    // Every health stream ends now (the kubelet sees its end and reports Unknown), so that the
    // server's shutdown does not wait for them.
    std::lock_guard<std::mutex> lock(m.health_mu);
    m.health_stopping = true;
  }
  m.health_cv.notify_all();
  if (m.dra_server) {
    m.dra_server->Shutdown(deadline());
    m.dra_server->Wait();
    m.dra_server.reset();
    std::string endpoint = m.endpoint();
    ::unlink(endpoint.c_str());
  }
}

void DraPlugin::set_devices(HostModel model, Pool pool, CdiHost host) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->model = std::move(model);
  impl_->pool = std::move(pool);
  impl_->host = std::move(host);
}

void DraPlugin::set_health(PoolHealth health) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.health_mu);
    // A device that is gone (a MIG instance destroyed, a GPU off the bus) is Unknown, not
    // silently dropped: a pod that holds it must not keep its last Healthy.
    if (health.pool == m.health.pool) {
      for (const auto& [name, report] : m.health.devices) {
        if (health.devices.count(name)) continue;
        health.devices[name] = {Health::unknown, "device " + name + " is not on this node now"};
      }
    }
    if (health == m.health) return;
    m.health = std::move(health);
    ++m.health_version;
  }
  m.health_cv.notify_all();
}

PoolHealth DraPlugin::health() const {
  std::lock_guard<std::mutex> lock(impl_->health_mu);
  return impl_->health;
}

unsigned DraPlugin::health_streams() const {
  std::lock_guard<std::mutex> lock(impl_->health_mu);
  return impl_->health_streams;
}

std::uint64_t DraPlugin::health_streams_opened() const {
  std::lock_guard<std::mutex> lock(impl_->health_mu);
  return impl_->health_streams_opened;
}

std::map<std::string, PrepareOutcome> DraPlugin::prepare(const std::vector<ClaimRef>& claims) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::map<std::string, PrepareOutcome> out;
  for (const auto& c : claims)
    out[c.uid] = impl_->prepare_one(c);
  return out;
}

std::map<std::string, std::string> DraPlugin::unprepare(const std::vector<ClaimRef>& claims) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::map<std::string, std::string> out;
  for (const auto& c : claims)
    out[c.uid] = impl_->unprepare_one(c);
  return out;
}

std::vector<PreparedClaim> DraPlugin::prepared() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<PreparedClaim> out;
  for (const auto& [uid, c] : impl_->claims)
    out.push_back(c);
  return out;
}

unsigned DraPlugin::registrations() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->registrations;
}

std::string DraPlugin::registration_error() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->registration_error;
}

std::string DraPlugin::endpoint() const {
  return impl_->endpoint();
}

std::string DraPlugin::registration_socket() const {
  return impl_->registration_socket();
}

}  // namespace polyaccel::dra
