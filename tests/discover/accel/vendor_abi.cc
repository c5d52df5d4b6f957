#include "vendor_abi.h"

#include "discover/accel/amd_common.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <stdexcept>

namespace polyaccel::vendor_abi {

using nlohmann::json;

Kind make_integer(std::size_t size) {
  Kind k;
  k.cat = Kind::Cat::integer;
  k.size = size;
  return k;
}

Kind make_pointer(Kind pointee) {
  Kind k;
  k.cat = Kind::Cat::pointer;
  k.size = sizeof(void*);
  k.elem = std::make_shared<const Kind>(std::move(pointee));
  return k;
}

std::string Kind::str() const {
  switch (cat) {
    case Cat::void_type:
      return "void";
    case Cat::integer:
      return "i" + (size ? std::to_string(size) : std::string("?"));
    case Cat::floating:
      return "f" + std::to_string(size);
    case Cat::pointer:
      return "ptr(" + elem->str() + ")";
    case Cat::array: {
      std::string s = elem->str();
      for (std::size_t d : dims)
        s += "[" + std::to_string(d) + "]";
      return s;
    }
    case Cat::aggregate:
      return "agg" + (name.empty() ? std::string() : " " + name) + ":" + std::to_string(size);
    case Cat::opaque:
      return "opaque" + (name.empty() ? std::string() : " " + name);
  }
  return "?";
}

std::string Value::str() const {
  return (negative ? "-" : "") + std::to_string(magnitude);
}

namespace {

std::string trim(std::string s) {
  while (!s.empty() && s.front() == ' ')
    s.erase(s.begin());
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

Kind base_kind(const std::string& base, const json& version) {
  static const std::map<std::string, std::size_t> kIntegers = {
      {"char", 1},     {"bool", 1},    {"int8_t", 1},   {"uint8_t", 1}, {"int16_t", 2},
      {"uint16_t", 2}, {"int32_t", 4}, {"uint32_t", 4}, {"int64_t", 8}, {"uint64_t", 8},
      {"enum8", 1},    {"enum16", 2},  {"enum32", 4},   {"enum64", 8},  {"enum", 0}};
  if (auto it = kIntegers.find(base); it != kIntegers.end()) return make_integer(it->second);
  Kind k;
  if (base == "void") return k;
  if (base == "float" || base == "double") {
    k.cat = Kind::Cat::floating;
    k.size = base == "float" ? 4 : 8;
    return k;
  }
  for (const char* tag : {"struct ", "union "}) {
    if (!starts_with(base, tag)) continue;
    const std::string name = base.substr(std::string(tag).size());
    const json& structs = version.value("structs", json::object());
    for (const std::string& key : {name, base}) {
      if (structs.contains(key)) {
        k.cat = Kind::Cat::aggregate;
        k.size = structs.at(key).at("sizeof").get<std::size_t>();
        k.name = name;
        return k;
      }
    }
    k.cat = Kind::Cat::opaque;  // declared only (incomplete_types), or not recorded
    k.name = name;
    return k;
  }
  throw std::runtime_error("vendor-abi: unknown type \"" + base + "\"");
}

bool mentions(const json& list, const std::string& name) {
  if (!list.is_array()) return false;
  return std::any_of(list.begin(), list.end(),
                     [&](const json& n) { return n.is_string() && n.get<std::string>() == name; });
}

Value json_value(const json& v) {
  if (v.is_number_unsigned()) return Value{false, v.get<std::uint64_t>()};
  const auto i = v.get<std::int64_t>();
  return i < 0 ? Value{true, static_cast<std::uint64_t>(-(i + 1)) + 1}
               : Value{false, static_cast<std::uint64_t>(i)};
}

std::vector<std::string> split_params(const std::string& inside) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : inside) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  if (out.size() == 1 && out[0] == "void") out.clear();
  return out;
}

bool applies(const std::vector<std::string>& versions, const std::string& version) {
  return versions.empty() || std::find(versions.begin(), versions.end(), version) != versions.end();
}

// A pointer to a struct, with the struct's size raised to the largest any version of `all` has:
// a buffer we pass must hold what every version writes, including versions whose source has no
// prototypes (pyhlml's ctypes classes).
Kind widened(const Kind& k, const json& all) {
  if (k.cat != Kind::Cat::pointer || k.elem->cat != Kind::Cat::aggregate) return k;
  Kind pointee = *k.elem;
  for (const auto& [_, version] : all.at("versions").items()) {
    const json& structs = version.value("structs", json::object());
    if (structs.contains(pointee.name)) {
      pointee.size =
          std::max(pointee.size, structs.at(pointee.name).at("sizeof").get<std::size_t>());
    }
  }
  return make_pointer(std::move(pointee));
}

class Comparer {
 public:
  Comparer(const DeclaredApi& d, const json& all, std::vector<Difference>& out)
      : d_(d), all_(all), out_(out) {
    for (const char* list : {"constants", "structs", "types", "functions", "macro_functions"}) {
      for (const auto& n : all.at("names").value(list, json::array()))
        listed_.insert(n.get<std::string>());
    }
    enumerators_ = enumerator_names(all);
  }

  void version(const std::string& name, const json& v) {
    version_ = name;
    facts_ = &v;
    constants();
    structs();
    types();
    functions();
    macros();
  }

 private:
  // A name the data does not list at all has no facts in any version: coverage_gaps() asks
  // for the reason, there is nothing to compare.
  bool known(const std::string& name) const { return listed_.count(name) > 0; }

  void add(const std::string& category, const std::string& what, const std::string& text) {
    out_.push_back(Difference{d_.api + "/" + version_ + "/" + category + "/" + what, text});
  }

  // The value of enumerator `name` in this version's enums, if one has it.
  std::optional<Value> enumerator(const std::string& name) const {
    if (!facts_->contains("enums")) return std::nullopt;
    for (const auto& [type, e] : facts_->at("enums").items()) {
      if (e.contains("enumerators") && e.at("enumerators").contains(name)) {
        return json_value(e.at("enumerators").at(name));
      }
    }
    return std::nullopt;
  }

  void constants() {
    const json& facts = facts_->value("constants", json::object());
    const json& absent = facts_->value("absent_constants", json::array());
    for (const DeclaredConstant& c : d_.constants) {
      if (!applies(c.versions, version_)) continue;
      if (!known(c.name)) {
        // Not listed as a constant: compared as the enumerator the data records it as.
        if (!enumerators_.count(c.name)) continue;
        auto theirs = enumerator(c.name);
        if (!theirs) {
          add("constant", c.name, "no enum of this version has it");
        } else if (!(*theirs == c.value)) {
          add("constant", c.name, "ours " + c.value.str() + ", vendor " + theirs->str());
        }
        continue;
      }
      if (!facts.contains(c.name)) {
        add("constant", c.name,
            mentions(absent, c.name) ? "not defined by this version; ours is " + c.value.str()
                                     : "no facts for it in this version");
        continue;
      }
      const Value theirs = json_value(facts.at(c.name).at("value"));
      if (!(theirs == c.value)) {
        add("constant", c.name, "ours " + c.value.str() + ", vendor " + theirs.str());
      }
    }
  }

  void structs() {
    const json& facts = facts_->value("structs", json::object());
    for (const DeclaredStruct& s : d_.structs) {
      if (!applies(s.versions, version_) || !known(s.name)) continue;
      if (!facts.contains(s.name)) {
        add("struct", s.name,
            mentions(facts_->value("absent_types", json::array()), s.name)
                ? "this version has no such struct"
                : "no facts for it in this version");
        continue;
      }
      const json& f = facts.at(s.name);
      const std::string key = s.name;
      const auto size = f.at("sizeof").get<std::size_t>();
      const auto align = f.at("alignof").get<std::size_t>();
      if (size != s.size) {
        add("struct", key + "/sizeof",
            s.ours + " is " + std::to_string(s.size) + " bytes, vendor " + std::to_string(size));
      }
      if (align != s.align) {
        add("struct", key + "/alignof",
            s.ours + " aligns to " + std::to_string(s.align) + ", vendor " + std::to_string(align));
      }
      for (const DeclaredField& field : s.fields) {
        const json* theirs = nullptr;
        for (const json& vf : f.at("fields")) {
          if (vf.at("name").get<std::string>() == field.name) theirs = &vf;
        }
        const std::string fkey = key + "/" + field.name;
        if (!theirs) {
          add("struct", fkey, "the vendor's struct has no field " + field.name);
          continue;
        }
        if (!theirs->contains("offset")) {
          add("struct", fkey, "the vendor's field is a bitfield");
          continue;
        }
        const auto offset = theirs->at("offset").get<std::size_t>();
        const auto fsize = theirs->at("size").get<std::size_t>();
        if (offset != field.offset) {
          add("struct", fkey + "/offset",
              "ours at " + std::to_string(field.offset) + ", vendor at " + std::to_string(offset));
        }
        if (fsize != field.size) {
          add("struct", fkey + "/size",
              "ours " + std::to_string(field.size) + " bytes, vendor " + std::to_string(fsize));
        }
        const Kind vk = parse_type(theirs->at("type").get<std::string>(), *facts_);
        if (auto why = compare_kinds(field.kind, vk, false)) add("struct", fkey + "/kind", *why);
      }
    }
  }

  void types() {
    const json& facts = facts_->value("types", json::object());
    for (const DeclaredType& t : d_.types) {
      if (!known(t.name)) continue;
      if (!facts.contains(t.name)) {
        add("type", t.name, "no facts for it in this version");
        continue;
      }
      const json& size = facts.at(t.name).at("size");
      if (size.is_null()) continue;  // the ctypes source does not size its enums
      if (size.get<std::size_t>() != t.size) {
        add("type", t.name,
            "ours " + std::to_string(t.size) + " bytes, vendor " + size.dump() + " bytes");
      }
    }
  }

  void functions() {
    const json& facts = facts_->value("functions", json());
    if (facts.is_null()) return;  // a source without prototypes (pyhlml's ctypes)
    for (const DeclaredFunction& fn : d_.functions) {
      if (!known(fn.name)) continue;
      if (!facts.contains(fn.name)) {
        add("function", fn.name, "no facts for it in this version");
        continue;
      }
      const json& f = facts.at(fn.name);
      if (!f.value("present", false)) {
        add("function", fn.name, "this version does not declare it");
        continue;
      }
      const auto sig = f.at("signature").get<std::string>();
      const auto open = sig.find('(');
      if (open == std::string::npos || sig.back() != ')') {
        throw std::runtime_error("vendor-abi: bad signature " + sig);
      }
      const Kind ret = parse_type(trim(sig.substr(0, open)), *facts_);
      const auto params = split_params(sig.substr(open + 1, sig.size() - open - 2));
      if (auto why = compare_kinds(fn.signature.ret, ret, false)) {
        add("function", fn.name + "/return", *why);
      }
      if (params.size() != fn.signature.params.size()) {
        add("function", fn.name + "/arity",
            "ours takes " + std::to_string(fn.signature.params.size()) + " parameters, vendor " +
                std::to_string(params.size()) + ": " + sig);
        continue;
      }
      for (std::size_t i = 0; i < params.size(); ++i) {
        const Kind theirs = widened(parse_type(params[i], *facts_), all_);
        if (auto why = compare_kinds(fn.signature.params[i], theirs, false)) {
          add("function", fn.name + "/param" + std::to_string(i + 1), *why + " (" + sig + ")");
        }
      }
    }
  }

  void macros() {
    const json& facts = facts_->value("macro_functions", json::object());
    for (const DeclaredMacro& m : d_.macros) {
      if (!known(m.name)) continue;
      if (!facts.contains(m.name)) {
        add("macro", m.name, "no facts for it in this version");
        continue;
      }
      const json& f = facts.at(m.name);
      for (const auto& [arg, value] : m.values) {
        if (!f.contains(arg)) {
          add("macro", m.name + "/" + arg, "no facts for this argument");
        } else if (!(json_value(f.at(arg)) == value)) {
          add("macro", m.name + "/" + arg,
              "ours " + value.str() + ", vendor " + json_value(f.at(arg)).str());
        }
      }
    }
  }

  const DeclaredApi& d_;
  const json& all_;
  std::vector<Difference>& out_;
  std::set<std::string> listed_;
  std::set<std::string> enumerators_;  // every enumerator of every version
  std::string version_;
  const json* facts_ = nullptr;
};

}  // namespace

Kind parse_type(const std::string& type_in, const json& version) {
  std::string type = trim(type_in);
  if (starts_with(type, "const ")) type = trim(type.substr(6));
  std::vector<std::size_t> dims;
  if (const auto bracket = type.find('['); bracket != std::string::npos) {
    std::string rest = type.substr(bracket);
    type = trim(type.substr(0, bracket));
    while (!rest.empty()) {
      const auto close = rest.find(']');
      if (rest.front() != '[' || close == std::string::npos) {
        throw std::runtime_error("vendor-abi: bad array type \"" + type_in + "\"");
      }
      dims.push_back(std::stoul(rest.substr(1, close - 1)));
      rest = rest.substr(close + 1);
    }
  }
  std::size_t stars = 0;
  while (!type.empty() && (type.back() == '*' || type.back() == ' ')) {
    if (type.back() == '*') ++stars;
    type.pop_back();
  }
  if (type.size() > 6 && type.compare(type.size() - 6, 6, " const") == 0) {
    type = trim(type.substr(0, type.size() - 6));
  }
  Kind k = base_kind(type, version);
  for (std::size_t i = 0; i < stars; ++i)
    k = make_pointer(std::move(k));
  if (!dims.empty()) {
    Kind a;
    a.cat = Kind::Cat::array;
    a.dims = dims;
    a.size = k.size;
    for (std::size_t d : dims)
      a.size *= d;
    a.elem = std::make_shared<const Kind>(std::move(k));
    return a;
  }
  return k;
}

std::optional<std::string> compare_kinds(const Kind& ours, const Kind& vendor, bool by_pointer) {
  using Cat = Kind::Cat;
  const std::string both = " (ours " + ours.str() + ", vendor " + vendor.str() + ")";
  if (by_pointer) {
    // What a pointer points to: void on either side says nothing; a buffer at least as large
    // as the vendor's struct holds whatever it writes.
    if (ours.cat == Cat::void_type || vendor.cat == Cat::void_type) return std::nullopt;
    if (vendor.cat == Cat::aggregate) {
      if ((ours.cat == Cat::aggregate || ours.cat == Cat::integer) && ours.size >= vendor.size) {
        return std::nullopt;
      }
      return "points to a buffer smaller than the vendor's " + vendor.name + both;
    }
    if (vendor.cat == Cat::opaque && ours.cat == Cat::opaque) return std::nullopt;
  }
  if (ours.cat != vendor.cat) return "a different kind of value" + both;
  switch (ours.cat) {
    case Cat::void_type:
    case Cat::opaque:
      return std::nullopt;
    case Cat::integer:
    case Cat::floating:
      if (vendor.size != 0 && ours.size != vendor.size) return "a different size" + both;
      return std::nullopt;
    case Cat::pointer:
      if (auto why = compare_kinds(*ours.elem, *vendor.elem, true)) {
        return "pointee: " + *why;
      }
      return std::nullopt;
    case Cat::array:
      if (ours.dims != vendor.dims) return "different array dimensions" + both;
      return compare_kinds(*ours.elem, *vendor.elem, false);
    case Cat::aggregate:
      if (ours.size != vendor.size) return "a struct of a different size" + both;
      return std::nullopt;
  }
  return std::nullopt;
}

std::vector<Difference> compare(const DeclaredApi& declared, const json& facts) {
  std::vector<Difference> out;
  Comparer comparer(declared, facts, out);
  for (const auto& [name, version] : facts.at("versions").items()) {
    comparer.version(name, version);
  }
  return out;
}

std::vector<std::string> coverage_gaps(const DeclaredApi& declared, const json& facts,
                                       const std::vector<Undocumented>& undocumented,
                                       const std::vector<Undocumented>& not_declared) {
  auto listed = [](const std::vector<Undocumented>& list, const std::string& name) {
    return std::any_of(list.begin(), list.end(),
                       [&](const Undocumented& u) { return u.name == name; });
  };
  std::set<std::string> ours;
  for (const auto& c : declared.constants)
    ours.insert(c.name);
  for (const auto& s : declared.structs)
    ours.insert(s.name);
  for (const auto& t : declared.types)
    ours.insert(t.name);
  for (const auto& f : declared.functions)
    ours.insert(f.name);
  for (const auto& m : declared.macros)
    ours.insert(m.name);
  std::set<std::string> theirs;
  const json& names = facts.at("names");
  for (const char* list : {"constants", "structs", "types", "functions", "macro_functions"}) {
    for (const auto& n : names.value(list, json::array()))
      theirs.insert(n.get<std::string>());
  }
  std::vector<std::string> gaps;
  for (const auto& n : theirs) {
    if (!ours.count(n) && !listed(not_declared, n)) {
      gaps.push_back(n + ": in the data, not declared by us and no reason why");
    }
  }
  const std::set<std::string> enumerators = enumerator_names(facts);
  for (const auto& n : ours) {
    if (!theirs.count(n) && !enumerators.count(n) && !listed(undocumented, n)) {
      gaps.push_back(n + ": declared by us, no facts in the data and no reason why");
    }
  }
  for (const auto& u : not_declared) {
    if (ours.count(u.name)) gaps.push_back(u.name + ": listed as not declared, but declared");
    if (!theirs.count(u.name)) gaps.push_back(u.name + ": listed as not declared, not in the data");
  }
  for (const auto& u : undocumented) {
    if (theirs.count(u.name))
      gaps.push_back(u.name + ": listed as undocumented, but the data has it");
    if (!ours.count(u.name)) gaps.push_back(u.name + ": listed as undocumented, but not declared");
  }
  return gaps;
}

Verdict judge(const std::vector<Difference>& differences, const std::vector<Handled>& handled) {
  auto covers = [](const Handled& h, const Difference& d) {
    return d.key == h.key || (starts_with(d.key, h.key) && d.key[h.key.size()] == '/');
  };
  Verdict v;
  for (const auto& d : differences) {
    if (std::none_of(handled.begin(), handled.end(),
                     [&](const Handled& h) { return covers(h, d); })) {
      v.unhandled.push_back(d);
    }
  }
  for (const auto& h : handled) {
    if (std::none_of(differences.begin(), differences.end(),
                     [&](const Difference& d) { return covers(h, d); })) {
      v.stale.push_back(h);
    }
  }
  return v;
}

std::vector<DeclaredField> gpu_metrics_prefix_fields() {
  using amd::GpuMetricsPrefix;
  return {
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, structure_size, "common_header.structure_size"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, format_revision, "common_header.format_revision"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, content_revision, "common_header.content_revision"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, temperature_edge, "temperature_edge"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, temperature_hotspot, "temperature_hotspot"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, temperature_mem, "temperature_mem"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, temperature_vrgfx, "temperature_vrgfx"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, temperature_vrsoc, "temperature_vrsoc"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, temperature_vrmem, "temperature_vrmem"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_gfx_activity, "average_gfx_activity"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_umc_activity, "average_umc_activity"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_mm_activity, "average_mm_activity"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_socket_power, "average_socket_power"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, energy_accumulator, "energy_accumulator"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, system_clock_counter, "system_clock_counter"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_clocks[0], "average_gfxclk_frequency"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_clocks[1], "average_socclk_frequency"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_clocks[2], "average_uclk_frequency"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_clocks[3], "average_vclk0_frequency"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_clocks[4], "average_dclk0_frequency"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_clocks[5], "average_vclk1_frequency"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, average_clocks[6], "average_dclk1_frequency"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, current_clocks[0], "current_gfxclk"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, current_clocks[1], "current_socclk"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, current_clocks[2], "current_uclk"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, current_clocks[3], "current_vclk0"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, current_clocks[4], "current_dclk0"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, current_clocks[5], "current_vclk1"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, current_clocks[6], "current_dclk1"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, throttle_status, "throttle_status"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, current_fan_speed, "current_fan_speed"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, pcie_link_width, "pcie_link_width"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, pcie_link_speed, "pcie_link_speed"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, gfx_activity_acc, "gfx_activity_acc"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, mem_activity_acc, "mem_activity_acc"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, temperature_hbm, "temperature_hbm"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, firmware_timestamp, "firmware_timestamp"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, voltage_soc, "voltage_soc"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, voltage_gfx, "voltage_gfx"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, voltage_mem, "voltage_mem"),
      POLYACCEL_ABI_FIELD(GpuMetricsPrefix, indep_throttle_status, "indep_throttle_status"),
  };
}

std::vector<DeclaredField> gpu_metrics_fields() {
  using amd::GpuMetrics;
  std::vector<DeclaredField> fields = gpu_metrics_prefix_fields();
  const std::vector<DeclaredField> appended = {
      POLYACCEL_ABI_FIELD(GpuMetrics, current_socket_power, "current_socket_power"),
      POLYACCEL_ABI_FIELD(GpuMetrics, vcn_activity, "vcn_activity"),
      POLYACCEL_ABI_FIELD(GpuMetrics, gfxclk_lock_status, "gfxclk_lock_status"),
      POLYACCEL_ABI_FIELD(GpuMetrics, xgmi_link_width, "xgmi_link_width"),
      POLYACCEL_ABI_FIELD(GpuMetrics, xgmi_link_speed, "xgmi_link_speed"),
      POLYACCEL_ABI_FIELD(GpuMetrics, pcie_bandwidth_acc, "pcie_bandwidth_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, pcie_bandwidth_inst, "pcie_bandwidth_inst"),
      POLYACCEL_ABI_FIELD(GpuMetrics, pcie_l0_to_recov_count_acc, "pcie_l0_to_recov_count_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, pcie_replay_count_acc, "pcie_replay_count_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, pcie_replay_rover_count_acc, "pcie_replay_rover_count_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, xgmi_read_data_acc, "xgmi_read_data_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, xgmi_write_data_acc, "xgmi_write_data_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, current_gfxclks, "current_gfxclks"),
      POLYACCEL_ABI_FIELD(GpuMetrics, current_socclks, "current_socclks"),
      POLYACCEL_ABI_FIELD(GpuMetrics, current_vclk0s, "current_vclk0s"),
      POLYACCEL_ABI_FIELD(GpuMetrics, current_dclk0s, "current_dclk0s"),
      POLYACCEL_ABI_FIELD(GpuMetrics, jpeg_activity, "jpeg_activity"),
      POLYACCEL_ABI_FIELD(GpuMetrics, pcie_nak_sent_count_acc, "pcie_nak_sent_count_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, pcie_nak_rcvd_count_acc, "pcie_nak_rcvd_count_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, accumulation_counter, "accumulation_counter"),
      POLYACCEL_ABI_FIELD(GpuMetrics, prochot_residency_acc, "prochot_residency_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, ppt_residency_acc, "ppt_residency_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, socket_thm_residency_acc, "socket_thm_residency_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, vr_thm_residency_acc, "vr_thm_residency_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, hbm_thm_residency_acc, "hbm_thm_residency_acc"),
      POLYACCEL_ABI_FIELD(GpuMetrics, num_partition, "num_partition"),
      POLYACCEL_ABI_FIELD(GpuMetrics, xcp_stats, "xcp_stats"),
      POLYACCEL_ABI_FIELD(GpuMetrics, pcie_lc_perf_other_end_recovery,
                          "pcie_lc_perf_other_end_recovery"),
      POLYACCEL_ABI_FIELD(GpuMetrics, vram_max_bandwidth, "vram_max_bandwidth"),
      POLYACCEL_ABI_FIELD(GpuMetrics, xgmi_link_status, "xgmi_link_status"),
  };
  fields.insert(fields.end(), appended.begin(), appended.end());
  return fields;
}

std::set<std::string> enumerator_names(const json& facts) {
  std::set<std::string> names;
  for (const auto& [version, v] : facts.at("versions").items()) {
    if (!v.contains("enums")) continue;
    for (const auto& [name, e] : v.at("enums").items()) {
      if (!e.contains("enumerators")) continue;
      for (const auto& [enumerator, value] : e.at("enumerators").items())
        names.insert(enumerator);
    }
  }
  return names;
}

json load_facts(const std::string& api) {
  const std::string path = std::string(VENDOR_ABI_DIR) + "/" + api + ".json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  return json::parse(in);
}

}  // namespace polyaccel::vendor_abi
