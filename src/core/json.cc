#include "core/json.h"

#include "core/strings.h"

namespace polyaccel {
namespace {

Error not_whole(const nlohmann::json& v, std::string_view what) {
  return bad_input(std::string(what), quote_input(json_text(v, -1)) + " is not a whole number");
}

Error out_of_range(const nlohmann::json& v, std::string_view what, const std::string& range) {
  return bad_input(std::string(what),
                   quote_input(json_text(v, -1)) + " is out of range (" + range + ")");
}

const nlohmann::json* member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

}  // namespace

std::string json_string(const nlohmann::json& object, std::string_view key, std::string fallback) {
  const nlohmann::json* m = member(object, key);
  return m && m->is_string() ? m->get<std::string>() : fallback;
}

bool json_bool(const nlohmann::json& object, std::string_view key, bool fallback) {
  const nlohmann::json* m = member(object, key);
  return m && m->is_boolean() ? m->get<bool>() : fallback;
}

const nlohmann::json& json_object(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json* m = member(object, key);
  return m && m->is_object() ? *m : empty;
}

const nlohmann::json& json_array(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json empty = nlohmann::json::array();
  const nlohmann::json* m = member(object, key);
  return m && m->is_array() ? *m : empty;
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::uint64_t> json_unsigned(const nlohmann::json& v, std::string_view what,
                                    std::uint64_t min, std::uint64_t max) {
  std::string range = std::to_string(min) + ".." + std::to_string(max);
  if (v.is_number_unsigned()) {
    auto n = v.get<std::uint64_t>();
    if (n < min || n > max) return out_of_range(v, what, range);
    return n;
  }
  if (v.is_number_integer()) {  // signed: a negative, or a value built in code
    auto n = v.get<std::int64_t>();
    if (n < 0 || static_cast<std::uint64_t>(n) < min || static_cast<std::uint64_t>(n) > max)
      return out_of_range(v, what, range);
    return static_cast<std::uint64_t>(n);
  }
  // nlohmann reads a number beyond 64 bits as a float: out of range, not "not a number".
  if (v.is_number_float() && v.get<double>() >= 1.8e19) return out_of_range(v, what, range);
  return not_whole(v, what);
}

Result<std::int64_t> json_signed(const nlohmann::json& v, std::string_view what, std::int64_t min,
                                 std::int64_t max) {
  std::string range = std::to_string(min) + ".." + std::to_string(max);
  if (v.is_number_unsigned()) {
    auto n = v.get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(max)) return out_of_range(v, what, range);
    return static_cast<std::int64_t>(n);
  }
  if (v.is_number_integer()) {
    auto n = v.get<std::int64_t>();
    if (n < min || n > max) return out_of_range(v, what, range);
    return n;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d >= 9.2e18 || d <= -9.2e18) return out_of_range(v, what, range);
  }
  return not_whole(v, what);
}

}  // namespace polyaccel
