#include "place/allocation_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/file_io.h"
#include "core/format_control.h"
#include "core/json.h"
#include "core/strings.h"
#include "place/libvirt_domains.h"

namespace polyaccel::place {

const Placement* AllocationState::find(const std::string& name) const {
  for (const auto& p : placements) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<Placement> AllocationState::all() const {
  std::vector<Placement> out = placements;
  out.insert(out.end(), domains.begin(), domains.end());
  return out;
}

Status check_placement_name(const std::string& name, const std::string& input) {
  const std::string what = input + " " + quote_input(name);
  if (name.empty()) return bad_input(input, "a placement name cannot be empty");
  if (name.starts_with(kLibvirtNamePrefix))
    return bad_input(what,
                     std::string("starts with '") + kLibvirtNamePrefix +
                         "', which names the guests libvirt runs",
                     "choose another name");
  if (name.size() > 253) return bad_input(what, "is longer than 253 bytes");
  if (!valid_utf8(name)) return bad_input(what, "is not UTF-8");
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return bad_input(what, "holds a control character");
  }
  if (auto cp = format_control_in(name)) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "U+%04X", static_cast<unsigned>(*cp));
    return bad_input(what, std::string("holds ") + hex +
                               ", a control or bidi character that changes what a terminal shows");
  }
  return Ok{};
}

Result<AllocationState> parse_state(const std::string& path, const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  const std::string remedy = "move it away or point --state at another file";
  if (j.is_discarded() || !j.is_object())
    return bad_input(path, "is not a polyaccel allocation state (not a JSON object)", remedy);
  if (!j.contains("schema") || j["schema"] != kAllocationSchema)
    return bad_input(path,
                     std::string("is not a polyaccel allocation state (no \"schema\": \"") +
                         kAllocationSchema + "\")",
                     remedy);
  if (!j.contains("schema_version") || !j["schema_version"].is_number_integer())
    return bad_input(path, "has no schema_version", remedy);
  // Compared as the number written: read as int, 4294967297 would pass for 1.
  auto version = json_signed(j["schema_version"], "schema_version", INT64_MIN, INT64_MAX);
  if (!version || *version != kAllocationSchemaVersion)
    return bad_input(path,
                     "has schema_version " + json_text(j["schema_version"], -1) +
                         ", this polyaccel reads " + std::to_string(kAllocationSchemaVersion),
                     remedy);
  AllocationState s;
  if (j.contains("host") && j["host"].is_string()) s.host = j["host"].get<std::string>();
  if (!j.contains("placements") || !j["placements"].is_array())
    return bad_input(path, "has no \"placements\" array", remedy);
  std::set<std::string> names;
  for (const auto& pj : j["placements"]) {
    auto p = placement_from_json(pj);
    if (!p) return bad_input(path, p.error().message(), remedy);
    if (auto ok = check_placement_name(p->name, "placement name"); !ok)
      return bad_input(path, ok.error().message(), remedy);
    if (!names.insert(p->name).second)
      return bad_input(path, "holds placement name '" + p->name + "' twice or empty", remedy);
    s.placements.push_back(std::move(*p));
  }
  return s;
}

std::string serialize_state(const AllocationState& state) {
  nlohmann::json j;
  j["schema"] = kAllocationSchema;
  j["schema_version"] = kAllocationSchemaVersion;
  j["host"] = state.host;
  j["placements"] = nlohmann::json::array();
  for (const auto& p : state.placements)
    j["placements"].push_back(to_json(p));
  return json_text(j) + "\n";
}

namespace {

// An flock on "<state>.lock": the state file itself is replaced by rename, so it cannot carry
// the lock. Released when the object goes away (or the process dies).
class FileLock {
 public:
  static Result<FileLock> take(const std::filesystem::path& state) {
    std::string lock_path = state.string() + ".lock";
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return Error{ErrorCode::io, lock_path,
                   std::string("cannot open the lock file: ") + std::strerror(errno),
                   "run as a user who may write the state directory"};
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      Error e{ErrorCode::io, lock_path, std::string("cannot lock: ") + std::strerror(errno), {}};
      ::close(fd);
      return e;
    }
    return FileLock(fd);
  }
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// A writer killed between creating its temporary file and renaming it leaves that file behind
// (write_file_atomically names it ".<name>.XXXXXX"). Under the lock no one else is writing, so
// any such file is stale.
void remove_stale_temporaries(const std::filesystem::path& path) {
  std::error_code ec;
  const std::string prefix = "." + path.filename().string() + ".";
  auto dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == prefix.size() + 6 && name.compare(0, prefix.size(), prefix) == 0)
      std::filesystem::remove(entry.path(), ec);
  }
}

Result<AllocationState> read_state(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return AllocationState{};  // first use
  auto text = read_input_file(path, kMaxStateFileBytes, "allocation state");
  if (!text) return text.error();
  return parse_state(path.string(), *text);
}

}  // namespace

Status AllocationStore::add_domains(AllocationState& state) const {
  if (libvirt_status_dir_.empty()) return Ok{};
  auto domains = read_running_domains(libvirt_status_dir_);
  if (!domains) return domains.error();
  for (auto& d : *domains) {
    // `place --libvirt --name X` renders <name>X</name>: the running domain X is placement X
    // when it runs where X was placed. One pinned to other PUs is another guest that took the
    // name (issue 40, 6): both hold their PUs, so both count, and the clash is reported.
    const std::string name = d.name.substr(std::string_view(kLibvirtNamePrefix).size());
    const Placement* placed = state.find(name);
    if (placed && placed->held_pus.contains(d.held_pus)) continue;
    if (placed)
      state.name_clashes.push_back("libvirt guest " + quote_input(name) + " runs on PUs " +
                                   d.held_pus.to_list() + ", not on placement " +
                                   quote_input(name) + "'s " + placed->held_pus.to_list() +
                                   ": both are counted");
    state.domains.push_back(std::move(d));
  }
  return Ok{};
}

Result<AllocationState> AllocationStore::load() const {
  // No lock: every write is a rename, so a reader sees a whole old or new file, and a user who
  // may not write the state directory can still ask for a fit.
  auto state = read_state(path_);
  if (!state) return state;
  if (auto s = add_domains(*state); !s) return s.error();
  return state;
}

Status AllocationStore::update(const std::function<Result<bool>(AllocationState&)>& change) const {
  // The file the atomic writer replaces: links resolved, so that two paths to one state file
  // take one lock and clean one directory.
  auto resolved = resolve_links(path_);
  if (!resolved) return resolved.error();
  const std::filesystem::path& target = *resolved;
  // A state path that exists must be a regular file of a sane size: refused here, before the
  // lock file or the directory is made, so that a refused --state leaves nothing behind.
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 &&
      (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) > kMaxStateFileBytes)) {
    auto refused = read_input_file(path_, kMaxStateFileBytes, "allocation state");
    if (!refused) return refused.error();
  }
  std::error_code ec;
  auto dir = target.parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec)
    return Error{
        ErrorCode::io, dir.string(), "cannot create the state directory: " + ec.message(), {}};
  auto lock = FileLock::take(target);
  if (!lock) return lock.error();
  remove_stale_temporaries(target);
  auto state = read_state(path_);
  if (!state) return state.error();
  if (auto s = add_domains(*state); !s) return s.error();
  auto write = change(*state);
  if (!write) return write.error();
  if (!*write) return Ok{};
  return write_file_atomically(path_, serialize_state(*state));
}

}  // namespace polyaccel::place
