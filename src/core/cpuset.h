// A set of CPU (PU) or NUMA node OS indexes, printed and parsed in the kernel's list format
// ("0-3,8,10-11"), as /sys/devices/system/node/node0/cpulist writes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace polyaccel {

class CpuSet {
 public:
  CpuSet() = default;
  CpuSet(std::initializer_list<unsigned> indexes);

  // Parses "0-3,8"; an empty string is the empty set. nullopt on malformed input.
  static std::optional<CpuSet> parse_list(std::string_view text);

  void set(unsigned index);
  void clear(unsigned index);
  bool test(unsigned index) const;
  bool empty() const;
  unsigned count() const;
  std::optional<unsigned> first() const;
  // Sorted indexes.
  std::vector<unsigned> to_vector() const;
  // Without allocating a set: the count of this set less o, and its indexes appended to out.
  unsigned count_without(const CpuSet& o) const;
  void append_without(const CpuSet& o, std::vector<unsigned>& out) const;
  // "0-3,8", empty string for the empty set.
  std::string to_list() const;

  CpuSet operator|(const CpuSet& o) const;
  CpuSet operator&(const CpuSet& o) const;
  CpuSet operator-(const CpuSet& o) const;  // in this set, not in o
  CpuSet& operator|=(const CpuSet& o);
  bool intersects(const CpuSet& o) const;
  bool contains(const CpuSet& o) const;  // o is a subset of this
  bool operator==(const CpuSet& o) const;

 private:
  void trim();
  std::vector<std::uint64_t> words_;
};

}  // namespace polyaccel
