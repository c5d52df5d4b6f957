// YAML documents as JSON values, typed as the Kubernetes API server reads them (YAML 1.2's core
// schema): a quoted or block scalar is a string, a plain one an integer, a number, a boolean or
// null when it reads as one, else a string. For comparing manifests with schemas and with each
// other (tests/deploy). Header-only; the test links yaml-cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace polyaccel::testing {

inline nlohmann::json plain_scalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  // [-+]?[0-9]+ is an integer; what strtod reads whole (and has a digit) a number.
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i < s.size() && s.find_first_not_of("0123456789", i) == std::string::npos)
    return nlohmann::json::parse(s[0] == '+' ? s.substr(1) : s);
  if (s.find_first_of("0123456789") != std::string::npos &&
      s.find_first_not_of("0123456789+-.eE") == std::string::npos) {
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end == s.c_str() + s.size()) return d;
  }
  return s;
}

inline nlohmann::json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : n)
        out[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& e : n)
        out.push_back(yaml_to_json(e));
      return out;
    }
    case YAML::NodeType::Scalar:
      // "!" is the tag of a quoted or block scalar, "?" of a plain one.
      return n.Tag() == "!" ? nlohmann::json(n.Scalar()) : plain_scalar(n.Scalar());
    default:
      return nullptr;
  }
}

// Every non-empty document of a YAML stream.
inline std::vector<nlohmann::json> yaml_documents(const std::string& text) {
  std::vector<nlohmann::json> out;
  for (const auto& doc : YAML::LoadAll(text)) {
    if (doc.IsNull()) continue;
    out.push_back(yaml_to_json(doc));
  }
  return out;
}

}  // namespace polyaccel::testing
