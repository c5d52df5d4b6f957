// A small walker of Kubernetes' OpenAPI v3 schemas (../shared/reference/kubernetes/*-openapi.json)
// and of CustomResourceDefinitions' openAPIV3Schema: checks an object against a schema — required
// fields, JSON types, no unknown fields (unless x-kubernetes-preserve-unknown-fields), enums,
// int-or-string, oneOf/anyOf of types — and the limits resource.k8s.io/v1 documents in its
// descriptions that every version shares (128 devices a slice, attributes and capacities per
// device, taints, DNS names, value lengths; the counter rules, which differ by version, are
// tests/dra/slice_validation.h's). Header-only, for the DRA tests and the manifest tests
// (tests/deploy).
#pragma once

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace polyaccel::testing {

class K8sSchema {
 public:
  // resource.k8s.io/v1 alone: what the DRA tests write.
  K8sSchema() : K8sSchema(std::vector<std::string>{"resource.k8s.io-v1-openapi.json"}) {}

  // The named OpenAPI v3 documents of ../shared/reference/kubernetes, their component schemas
  // merged (the apimachinery ones each document repeats are the same).
  explicit K8sSchema(const std::vector<std::string>& documents) {
    for (const auto& name : documents) {
      std::ifstream in(shared_dir() / "reference/kubernetes" / name);
      auto doc = nlohmann::json::parse(in);
      for (auto& [k, v] : doc.at("components").at("schemas").items()) {
        for (const auto& gvk : v.value("x-kubernetes-group-version-kind", nlohmann::json::array()))
          kinds_[gvk_key(gvk.value("group", ""), gvk.value("version", ""), gvk.value("kind", ""))] =
              k;
        schemas_[k] = std::move(v);
      }
    }
  }

  // A CustomResourceDefinition (as JSON): every served version's openAPIV3Schema.
  void add_crd(const nlohmann::json& crd) {
    const auto& spec = crd.at("spec");
    std::string group = spec.at("group").get<std::string>();
    std::string kind = spec.at("names").at("kind").get<std::string>();
    for (const auto& v : spec.at("versions"))
      crds_[gvk_key(group, v.at("name").get<std::string>(), kind)] =
          v.at("schema").at("openAPIV3Schema");
  }

  // Problems found, one line each; empty when the object is valid.
  std::vector<std::string> validate(
      const nlohmann::json& value,
      const std::string& component = "io.k8s.api.resource.v1.ResourceSlice") const {
    std::vector<std::string> errors;
    walk(value, schemas_.at(component), component, errors);
    if (component == "io.k8s.api.resource.v1.ResourceSlice") check_slice_limits(value, errors);
    return errors;
  }

  // An object by its apiVersion and kind: the component that declares that group, version and
  // kind, or a CRD's schema (its metadata checked as ObjectMeta, as the API server does). An
  // object of a kind none of the loaded schemas knows is itself a problem.
  std::vector<std::string> validate_object(const nlohmann::json& object) const {
    std::string api = object.value("apiVersion", "");
    std::string kind = object.value("kind", "");
    auto slash = api.find('/');
    std::string group = slash == std::string::npos ? "" : api.substr(0, slash);
    std::string version = slash == std::string::npos ? api : api.substr(slash + 1);
    std::string key = gvk_key(group, version, kind);
    std::string where =
        kind + "/" + object.value("metadata", nlohmann::json::object()).value("name", "");
    std::vector<std::string> errors;
    if (auto it = kinds_.find(key); it != kinds_.end()) {
      walk(object, schemas_.at(it->second), where, errors);
    } else if (auto crd = crds_.find(key); crd != crds_.end()) {
      nlohmann::json rest = object;
      rest.erase("metadata");
      walk(rest, crd->second, where, errors);
      if (object.contains("metadata"))
        walk(object["metadata"], schemas_.at("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
             where + ".metadata", errors);
    } else {
      errors.push_back(where + ": no schema for " + api + " " + kind);
    }
    return errors;
  }

  bool has_component(const std::string& name) const { return schemas_.contains(name); }

 private:
  static std::string gvk_key(const std::string& group, const std::string& version,
                             const std::string& kind) {
    return group + "/" + version + "/" + kind;
  }

  const nlohmann::json& resolve(const nlohmann::json& s) const {
    const nlohmann::json* cur = &s;
    while (true) {
      if (cur->contains("$ref")) {
        std::string ref = (*cur)["$ref"].get<std::string>();
        cur = &schemas_.at(ref.substr(ref.rfind('/') + 1));
      } else if (cur->contains("allOf") && (*cur)["allOf"].size() == 1 && !cur->contains("type") &&
                 !cur->contains("properties")) {
        cur = &(*cur)["allOf"][0];
      } else {
        return *cur;
      }
    }
  }

  void walk(const nlohmann::json& v, const nlohmann::json& raw, const std::string& path,
            std::vector<std::string>& errors) const {
    const nlohmann::json& s = resolve(raw);
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
      errors.push_back(path + ": " + v.dump() + " is not one of " + s["enum"].dump());
    // IntOrString (the core API's format, a CRD's extension), Quantity: one of some types.
    if (s.value("x-kubernetes-int-or-string", false) || s.value("format", "") == "int-or-string") {
      if (!v.is_number_integer() && !v.is_string())
        errors.push_back(path + ": neither an integer nor a string");
      return;
    }
    for (const char* any : {"oneOf", "anyOf"}) {
      if (!s.contains(any) || s.contains("type") || s.contains("properties")) continue;
      bool one = std::any_of(s[any].begin(), s[any].end(), [&](const nlohmann::json& alt) {
        std::vector<std::string> e;
        walk(v, alt, path, e);
        return e.empty();
      });
      if (!one) errors.push_back(path + ": " + v.dump() + " matches none of " + any);
    }
    std::string type = s.value("type", "");
    // RawExtension and x-kubernetes-preserve-unknown-fields without a type: anything.
    if (type.empty() && s.contains("properties")) type = "object";
    if (type.empty()) return;
    if (type == "object") {
      if (!v.is_object()) {
        errors.push_back(path + ": not an object");
        return;
      }
      for (const auto& r : s.value("required", nlohmann::json::array())) {
        if (!v.contains(r.get<std::string>()))
          errors.push_back(path + ": required field " + r.get<std::string>() + " is missing");
      }
      const auto props = s.value("properties", nlohmann::json::object());
      // An object with neither properties nor additionalProperties is free-form (RawExtension
      // and FieldsV1 are written so in the OpenAPI v3 documents): the server keeps any field.
      const bool preserve = s.value("x-kubernetes-preserve-unknown-fields", false) ||
                            (!s.contains("properties") && !s.contains("additionalProperties"));
      for (const auto& [k, child] : v.items()) {
        if (props.contains(k)) {
          walk(child, props[k], path + "." + k, errors);
        } else if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
          walk(child, s["additionalProperties"], path + "[" + k + "]", errors);
        } else if (!preserve && s.value("additionalProperties", nlohmann::json(false)) != true) {
          errors.push_back(path + ": unknown field " + k);
        }
      }
    } else if (type == "array") {
      if (!v.is_array()) {
        errors.push_back(path + ": not an array");
        return;
      }
      for (size_t i = 0; i < v.size(); ++i)
        walk(v[i], s.at("items"), path + "[" + std::to_string(i) + "]", errors);
    } else if (type == "string") {
      if (!v.is_string()) errors.push_back(path + ": not a string");
    } else if (type == "integer") {
      if (!v.is_number_integer()) errors.push_back(path + ": not an integer");
    } else if (type == "boolean") {
      if (!v.is_boolean()) errors.push_back(path + ": not a boolean");
    } else if (type == "number") {
      if (!v.is_number()) errors.push_back(path + ": not a number");
    }
  }

  // Character scans, not std::regex: regex_match recurses per character, and under ASan at -O0
  // its frames overflowed the fake API server's thread stack.
  static bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
  static bool digit(char c) { return c >= '0' && c <= '9'; }
  // [a-z0-9]([-a-z0-9]*[a-z0-9])?
  static bool label_chars(std::string_view s) {
    if (s.empty() || !lower_alnum(s.front()) || !lower_alnum(s.back())) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return lower_alnum(c) || c == '-'; });
  }
  static bool dns_label(const std::string& s) { return s.size() <= 63 && label_chars(s); }
  // Labels joined by '.'.
  static bool dns_subdomain(const std::string& s) {
    if (s.size() > 253) return false;
    std::string_view rest = s;
    for (;;) {
      auto dot = rest.find('.');
      if (!label_chars(rest.substr(0, dot))) return false;
      if (dot == std::string_view::npos) return true;
      rest.remove_prefix(dot + 1);
    }
  }
  // QualifiedName: a C identifier of at most 32, optionally "<DNS subdomain of at most 63>/".
  static bool qualified_name(const std::string& s) {
    auto slash = s.find('/');
    std::string name = slash == std::string::npos ? s : s.substr(slash + 1);
    if (slash != std::string::npos) {
      std::string domain = s.substr(0, slash);
      if (domain.size() > 63 || !dns_subdomain(domain)) return false;
    }
    auto id_char = [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || digit(c);
    };
    return !name.empty() && name.size() <= 32 && !digit(name.front()) &&
           std::all_of(name.begin(), name.end(), id_char);
  }
  // [+-]?[0-9]+(\.[0-9]+)?([KMGTPE]i|[mkMGTPE]|[eE][+-]?[0-9]+)?
  static bool quantity(const nlohmann::json& v) {
    if (!v.is_string()) return false;
    const std::string& s = v.get_ref<const std::string&>();
    size_t i = 0;
    auto digits = [&] {
      size_t start = i;
      while (i < s.size() && digit(s[i]))
        ++i;
      return i > start;
    };
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      if (!digits()) return false;
    }
    std::string_view suffix = std::string_view(s).substr(i);
    if (suffix.empty()) return true;
    if (suffix.size() == 2 && suffix[1] == 'i')
      return std::string_view("KMGTPE").find(suffix[0]) != std::string_view::npos;
    if (suffix.size() == 1)
      return std::string_view("mkMGTPE").find(suffix[0]) != std::string_view::npos;
    if (suffix[0] != 'e' && suffix[0] != 'E') return false;
    i += 1;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    return digits() && i == s.size();
  }

  // The limits of ResourceSliceSpec, Device, CounterSet and DeviceCounterConsumption that the
  // schema states in prose (the API server's validation enforces them).
  static void check_slice_limits(const nlohmann::json& slice, std::vector<std::string>& errors) {
    if (!slice.is_object() || !slice.contains("spec")) return;
    const auto& spec = slice["spec"];
    auto name = slice.value("metadata", nlohmann::json::object()).value("name", "");
    if (!dns_subdomain(name)) errors.push_back("metadata.name " + name + " is not a DNS subdomain");
    if (!dns_subdomain(spec.value("driver", "")))
      errors.push_back("spec.driver is not a DNS subdomain");
    int selectors = spec.contains("nodeName") + spec.contains("nodeSelector") +
                    spec.value("allNodes", false) + spec.value("perDeviceNodeSelection", false);
    if (selectors != 1)
      errors.push_back("exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection");
    const auto devices = spec.value("devices", nlohmann::json::array());
    if (devices.size() > 128) errors.push_back("more than 128 devices");
    std::set<std::string> sets;
    for (const auto& cs : spec.value("sharedCounters", nlohmann::json::array())) {
      std::string n = cs.value("name", "");
      if (!dns_label(n)) errors.push_back("counter set " + n + " is not a DNS label");
      if (!sets.insert(n).second) errors.push_back("counter set " + n + " twice");
      const nlohmann::json counters = cs.value("counters", nlohmann::json::object());
      for (const auto& [cn, c] : counters.items()) {
        if (!dns_label(cn)) errors.push_back("counter " + cn + " is not a DNS label");
        if (!quantity(c.value("value", nlohmann::json())))
          errors.push_back("counter " + cn + " value");
      }
    }
    std::set<std::string> names;
    for (const auto& d : devices) {
      std::string dn = d.value("name", "");
      if (!dns_label(dn)) errors.push_back("device " + dn + " is not a DNS label");
      if (!names.insert(dn).second) errors.push_back("device " + dn + " twice");
      const auto attrs = d.value("attributes", nlohmann::json::object());
      const auto caps = d.value("capacity", nlohmann::json::object());
      if (attrs.size() + caps.size() > 32)
        errors.push_back(dn + ": more than 32 attributes+capacities");
      for (const auto& [k, a] : attrs.items()) {
        if (!qualified_name(k)) errors.push_back(dn + ": attribute name " + k);
        if (a.size() != 1)
          errors.push_back(dn + ": attribute " + k + " must set exactly one value");
        for (const char* m : {"string", "version"})
          if (a.contains(m) && a[m].get<std::string>().size() > 64)
            errors.push_back(dn + ": attribute " + k + " longer than 64");
      }
      for (const auto& [k, c] : caps.items()) {
        if (!qualified_name(k)) errors.push_back(dn + ": capacity name " + k);
        if (!quantity(c.value("value", nlohmann::json()))) errors.push_back(dn + ": capacity " + k);
      }
      const auto taints = d.value("taints", nlohmann::json::array());
      if (taints.size() > 4) errors.push_back(dn + ": more than 4 taints");
      std::set<std::string> used;
      for (const auto& c : d.value("consumesCounters", nlohmann::json::array())) {
        std::string set = c.value("counterSet", "");
        if (!dns_label(set)) errors.push_back(dn + ": counter set " + set + " is not a DNS label");
        if (!used.insert(set).second) errors.push_back(dn + ": counter set " + set + " twice");
        const auto counters = c.value("counters", nlohmann::json::object());
        for (const auto& [cn, v] : counters.items())
          if (!dns_label(cn) || !quantity(v.value("value", nlohmann::json())))
            errors.push_back(dn + ": consumed counter " + cn);
      }
    }
    // Where counter sets may be and how many counters they and the devices hold differ by
    // Kubernetes version: tests/dra/slice_validation.h.
  }

  nlohmann::json schemas_ = nlohmann::json::object();  // component name -> schema
  std::map<std::string, std::string> kinds_;           // "group/version/Kind" -> component
  std::map<std::string, nlohmann::json> crds_;         // "group/version/Kind" -> openAPIV3Schema
};

}  // namespace polyaccel::testing
