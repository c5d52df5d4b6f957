#include "nri/plugin.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/agent_parts.h"
#include "core/log.h"
#include "core/strings.h"
#include "kube/proto/nri_v1alpha1.pb.h"
#include "kube/proto/ttrpc.pb.h"
#include "nri/ttrpc.h"

namespace polyaccel::nri {
namespace {

namespace api = ::nri::pkg::api::v1alpha1;

constexpr const char* kPluginService = "nri.pkg.api.v1alpha1.Plugin";
constexpr const char* kRuntimeService = "nri.pkg.api.v1alpha1.Runtime";
// enum Event: the events this plugin is asked about.
constexpr int kCreateContainer = 4, kStopContainer = 10, kRemoveContainer = 11;
constexpr int kUnimplemented = 12, kInvalidArgument = 3;  // google.rpc.Code

Status write_all(int fd, const std::string& bytes) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error{ErrorCode::io, "the NRI socket", std::strerror(errno), {}};
    at += std::size_t(n);
  }
  return Ok{};
}

std::string container_name(const api::PodSandbox& pod, const api::Container& c) {
  return printable(pod.namespace_() + "/" + pod.name() + "/" + c.name());
}

ContainerView view_of(const api::PodSandbox& pod, const api::Container& c) {
  ContainerView v;
  v.id = c.id();
  v.name = container_name(pod, c);
  v.env.assign(c.env().begin(), c.env().end());
  v.cpus = c.linux().resources().cpu().cpus();
  for (const auto& h : c.linux().resources().hugepage_limits())
    v.hugepage_limits.push_back({h.page_size(), h.limit()});
  return v;
}

void fill(api::ContainerUpdate* u, const CpuUpdate& c, bool ignore_failure) {
  u->set_container_id(c.id);
  auto* cpu = u->mutable_linux()->mutable_resources()->mutable_cpu();
  cpu->set_cpus(c.cpus);
  if (!c.mems.empty()) cpu->set_mems(c.mems);
  // A container that is exiting cannot be updated: not a failure of the event being answered.
  u->set_ignore_failure(ignore_failure);
}

template <class Message>
Result<Message> parse(const std::string& payload, const std::string& method) {
  Message m;
  if (!m.ParseFromString(payload))
    return Error{ErrorCode::bad_input, "NRI " + method, "its request does not parse", {}};
  return m;
}

}  // namespace

NriPlugin::NriPlugin(NriOptions options)
    : options_(std::move(options)), policy_(options_.online, options_.nodes) {}

NriPlugin::~NriPlugin() {
  stop();
}

void NriPlugin::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { run_part("nri", [this] { run(); }); });
}

void NriPlugin::stop() {
  stopping_ = true;
  int fd = fd_.load();
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
}

NriStatus NriPlugin::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void NriPlugin::say(const std::string& problem) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.last_problem == problem) return;
    status_.last_problem = problem;
  }
  log_line("polyaccel agent: nri: " + problem);
}

void NriPlugin::run() {
  bool said_waiting = false;
  while (!stopping_) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, options_.socket.c_str(), sizeof(addr.sun_path) - 1);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      said_waiting = false;
      fd_ = fd;
      Status st = serve(fd);
      fd_ = -1;
      {
        std::lock_guard<std::mutex> lock(mu_);
        status_.connected = false;
      }
      if (!stopping_)
        say(st ? "the runtime closed the connection; reconnecting" : st.error().message());
    } else if (!said_waiting) {
      said_waiting = true;
      log_line("polyaccel agent: nri: waiting for the runtime's NRI socket " +
               printable(options_.socket) + " (" + std::strerror(errno) +
               "; is NRI enabled in containerd or CRI-O?)");
    }
    if (fd >= 0) ::close(fd);
    for (auto waited = std::chrono::milliseconds(0); waited < options_.retry && !stopping_;
         waited += std::chrono::milliseconds(100))
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status NriPlugin::serve(int fd) {
  std::uint32_t next_stream = 1;  // ours, on the runtime's service: odd
  auto call_runtime = [&](const std::string& method, const google::protobuf::Message& req) {
    ttrpc::Request r;
    r.set_service(kRuntimeService);
    r.set_method(method);
    r.set_payload(req.SerializeAsString());
    TtrpcMessage m{kRuntimeServiceConn, next_stream, MessageType::request, 0,
                   r.SerializeAsString()};
    next_stream += 2;
    return write_all(fd, encode_message(m));
  };
  api::RegisterPluginRequest reg;
  reg.set_plugin_name(options_.name);
  reg.set_plugin_idx(options_.index);
  Status st = call_runtime("RegisterPlugin", reg);
  if (!st) return st;
  MessageReader reader;
  std::vector<TtrpcMessage> messages;
  char buf[65536];
  while (!stopping_) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, 200);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Ok{};  // closed
    messages.clear();
    st = reader.feed(std::string_view(buf, std::size_t(n)), messages);
    if (!st) return st;
    for (const auto& m : messages) {
      if (m.conn == kRuntimeServiceConn && m.type == MessageType::response) {
        ttrpc::Response resp;
        if (!resp.ParseFromString(m.payload))
          return Error{
              ErrorCode::bad_input, "the NRI runtime", "an answer that does not parse", {}};
        if (resp.status().code() != 0) {
          const std::string what = m.stream == 1 ? "registration" : "container update";
          if (m.stream == 1) {
            return Error{
                ErrorCode::unsupported, "NRI " + what, printable(resp.status().message()),
                "is another plugin registered as " + options_.index + "-" + options_.name + "?"};
          }
          say(what + " refused: " + printable(resp.status().message()));
        }
        continue;
      }
      if (m.conn != kPluginServiceConn || m.type != MessageType::request) continue;
      ttrpc::Request req;
      ttrpc::Response resp;
      if (!req.ParseFromString(m.payload)) {
        resp.mutable_status()->set_code(kInvalidArgument);
        resp.mutable_status()->set_message("the request does not parse");
      } else if (req.service() != kPluginService) {
        resp.mutable_status()->set_code(kUnimplemented);
        resp.mutable_status()->set_message("no service " + req.service());
      } else {
        auto answer = handle(req.method(), req.payload());
        if (answer) {
          resp.set_payload(*answer);
        } else {
          resp.mutable_status()->set_code(
              answer.error().code == ErrorCode::unsupported ? kUnimplemented : kInvalidArgument);
          resp.mutable_status()->set_message(answer.error().message());
        }
      }
      TtrpcMessage out{kPluginServiceConn, m.stream, MessageType::response, 0,
                       resp.SerializeAsString()};
      st = write_all(fd, encode_message(out));
      if (!st) return st;
      if (req.method() == "Shutdown") return Ok{};
      // Pool growth after a removal that the runtime's answer cannot carry.
      std::vector<CpuUpdate> later;
      {
        std::lock_guard<std::mutex> lock(mu_);
        later.swap(pending_updates_);
      }
      if (!later.empty()) {
        api::UpdateContainersRequest u;
        for (const auto& c : later)
          fill(u.add_update(), c, true);
        st = call_runtime("UpdateContainers", u);
        if (!st) return st;
      }
    }
  }
  return Ok{};
}

Result<std::string> NriPlugin::handle(const std::string& method, const std::string& payload) {
  std::vector<std::string> problems;
  std::string out;
  if (method == "Configure") {
    auto req = parse<api::ConfigureRequest>(payload, method);
    if (!req) return req.error();
    api::ConfigureResponse resp;
    resp.set_events((1 << (kCreateContainer - 1)) | (1 << (kStopContainer - 1)) |
                    (1 << (kRemoveContainer - 1)));
    out = resp.SerializeAsString();
    std::lock_guard<std::mutex> lock(mu_);
    status_.runtime = printable(req->runtime_name() + " " + req->runtime_version());
  } else if (method == "Synchronize") {
    auto req = parse<api::SynchronizeRequest>(payload, method);
    if (!req) return req.error();
    std::map<std::string, const api::PodSandbox*> pods;
    for (const auto& p : req->pods())
      pods[p.id()] = &p;
    api::PodSandbox none;
    for (const auto& c : req->containers()) {
      auto p = pods.find(c.pod_sandbox_id());
      sync_.push_back(view_of(p == pods.end() ? none : *p->second, c));
    }
    api::SynchronizeResponse resp;
    if (!req->more()) {
      std::vector<ContainerView> all;
      all.swap(sync_);
      std::lock_guard<std::mutex> lock(mu_);
      std::string moved;
      for (const auto& u : policy_.synchronize(all, problems)) {
        fill(resp.add_update(), u, true);
        ++status_.updated;
        for (const auto& v : all)
          if (v.id == u.id) moved += (moved.empty() ? "" : " ") + v.name;
      }
      status_.connected = true;
      log_line("polyaccel agent: nri: registered with " + status_.runtime + " as " +
               options_.index + "-" + options_.name + ": " + std::to_string(all.size()) +
               " containers, " + std::to_string(policy_.claimed().size()) +
               " with claimed CPUs; shared pool " + policy_.shared_pool().to_list() + ", " +
               std::to_string(resp.update_size()) + " moved" +
               (moved.empty() ? "" : " (" + moved + ")"));
    }
    out = resp.SerializeAsString();
  } else if (method == "CreateContainer") {
    auto req = parse<api::CreateContainerRequest>(payload, method);
    if (!req) return req.error();
    api::CreateContainerResponse resp;
    const ContainerView view = view_of(req->pod(), req->container());
    // The nodes' pages now (an operator may have changed nr_hugepages), read only for a
    // container that asks for some.
    NodeHugepages pages;
    if (options_.read_hugepages &&
        std::any_of(view.hugepage_limits.begin(), view.hugepage_limits.end(),
                    [](const HugepageLimit& h) { return h.limit > 0; }))
      pages = options_.read_hugepages();
    std::lock_guard<std::mutex> lock(mu_);
    auto created = policy_.create(view, problems, pages);
    if (created.adjust) {
      auto* resources = resp.mutable_adjust()->mutable_linux()->mutable_resources();
      resources->mutable_cpu()->set_cpus(created.adjust->cpus);
      if (!created.adjust->mems.empty()) resources->mutable_cpu()->set_mems(created.adjust->mems);
      for (const auto& h : created.adjust->hugepages) {
        auto* limit = resources->add_hugepage_limits();
        limit->set_page_size(h.page_size);
        limit->set_limit(h.limit);
      }
      ++status_.adjusted;
    }
    for (const auto& u : created.updates) {
      fill(resp.add_update(), u, true);
      ++status_.updated;
    }
    out = resp.SerializeAsString();
  } else if (method == "StopContainer" || method == "RemoveContainer") {
    const bool stop = method == "StopContainer";
    api::StopContainerRequest req;  // RemoveContainerRequest has the same fields
    if (!req.ParseFromString(payload))
      return Error{ErrorCode::bad_input, "NRI " + method, "its request does not parse", {}};
    std::lock_guard<std::mutex> lock(mu_);
    auto updates = policy_.remove(req.container().id());
    status_.updated += updates.size();
    if (stop) {
      api::StopContainerResponse resp;
      for (const auto& u : updates)
        fill(resp.add_update(), u, true);
      out = resp.SerializeAsString();
    } else {
      pending_updates_.insert(pending_updates_.end(), updates.begin(), updates.end());
      out = api::RemoveContainerResponse().SerializeAsString();
    }
  } else if (method == "Shutdown" || method == "StateChange") {
    out = api::Empty().SerializeAsString();
  } else {
    return Error{ErrorCode::unsupported, "NRI " + printable(method), "not served", {}};
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++status_.events;
    status_.claimed = policy_.claimed();
    status_.shared_pool = policy_.shared_pool();
    status_.shared_containers = policy_.shared_count();
  }
  for (const auto& p : problems)
    say(p);
  return out;
}

}  // namespace polyaccel::nri
