// The allocation state: one JSON file recording each placement by name (default
// /var/lib/polyaccel/allocations.json). Every change runs under an exclusive flock on a lock
// file beside it and is written atomically (temp file, fsync, rename, fsync of the directory),
// so two concurrent commits never double-book and a kill leaves the old or the new state.
// A file that is not ours, or is broken, is refused and never overwritten.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "place/placement.h"

namespace polyaccel::place {

inline constexpr int kAllocationSchemaVersion = 1;
inline constexpr const char* kAllocationSchema = "polyaccel-allocations";
inline constexpr const char* kDefaultStatePath = "/var/lib/polyaccel/allocations.json";

struct AllocationState {
  std::string host;  // hostname of the host the placements belong to; empty until first commit
  std::vector<Placement> placements;  // polyaccel's own: what the file holds and is written back
  // The guests libvirt runs that no placement above records (a domain named as a placement and
  // pinned within its PUs is that placement, started from `place --libvirt`): read at each
  // load, never written.
  std::vector<Placement> domains;
  // A running domain named as a placement but pinned outside its PUs: another guest. It is in
  // `domains` (its PUs are held) and named here, one line each, printable.
  std::vector<std::string> name_clashes;

  // Among polyaccel's own placements.
  const Placement* find(const std::string& name) const;
  // What the host holds: the placements, then the domains.
  std::vector<Placement> all() const;
};

// A placement's name, the key the store records it by: 1 to 253 bytes of UTF-8 without control
// characters (so that it prints on one line as given, and a release finds it by the bytes the
// user types). `input` names where it came from ("--name", the state file).
Status check_placement_name(const std::string& name, const std::string& input);

Result<AllocationState> parse_state(const std::string& path, const std::string& text);
std::string serialize_state(const AllocationState& state);

class AllocationStore {
 public:
  // `libvirt_status_dir`: where libvirt's running domains are read (read_running_domains), empty
  // for none (a captured machine without them, or --libvirt-domains none).
  explicit AllocationStore(std::filesystem::path path,
                           std::filesystem::path libvirt_status_dir = {})
      : path_(std::move(path)), libvirt_status_dir_(std::move(libvirt_status_dir)) {}
  const std::filesystem::path& path() const { return path_; }

  // The current state, with the running domains; an absent file is an empty state.
  Result<AllocationState> load() const;

  // Runs `change` under the exclusive lock on the current state (domains read after the lock is
  // taken); writes the placements back when it returns true, leaves the file untouched when it
  // returns false or an error. The domains are never written.
  Status update(const std::function<Result<bool>(AllocationState&)>& change) const;

 private:
  Status add_domains(AllocationState& state) const;

  std::filesystem::path path_;
  std::filesystem::path libvirt_status_dir_;
};

}  // namespace polyaccel::place
