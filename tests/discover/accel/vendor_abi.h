// Compares our own declarations of the vendor C ABIs (src/discover/accel/*_abi.h) with the facts
// recorded from the vendors' headers in ../shared/reference/vendor-abi/ (format vendor-abi/1,
// described in that directory's README): every constant's value, every struct's size, alignment
// and the offset, size and machine kind of each field we declare, every function's parameters
// and return value, for every header version listed there.
//
// Our side is built from the compiled declarations: sizes and offsets by sizeof/offsetof, the
// kinds of fields and parameters from the declared C++ types by templates (kind_of<T>()), so a
// table entry cannot say something the declaration does not. The tables themselves are in
// vendor_abi_<api>.cc, one per API, each a list that is easy to extend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace polyaccel::vendor_abi {

// What the machine sees of a type: integers (enums and bool included) by size, floating point
// by size, pointers with their pointee, arrays with their dimensions, and structs or unions by
// size (opaque when never defined).
struct Kind {
  enum class Cat { void_type, integer, floating, pointer, array, aggregate, opaque };
  Cat cat = Cat::void_type;
  std::size_t size = 0;              // bytes; 0 for void, opaque, and a size that is not known
  std::vector<std::size_t> dims;     // arrays, outermost first
  std::shared_ptr<const Kind> elem;  // pointee of a pointer, element of an array
  std::string name;                  // aggregates and opaque types, as the vendor names them

  std::string str() const;  // "i4", "ptr(agg:52)", "i1[15]", for messages
};

Kind make_integer(std::size_t size);
Kind make_pointer(Kind pointee);

template <class T, class = void>
struct is_complete : std::false_type {};
template <class T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

template <class T>
Kind kind_of() {
  using U = std::remove_cv_t<std::remove_reference_t<T>>;
  Kind k;
  if constexpr (std::is_void_v<U>) {
    k.cat = Kind::Cat::void_type;
  } else if constexpr (std::is_pointer_v<U>) {
    k = make_pointer(kind_of<std::remove_pointer_t<U>>());
  } else if constexpr (std::is_array_v<U>) {
    Kind inner = kind_of<std::remove_extent_t<U>>();
    k.cat = Kind::Cat::array;
    k.size = sizeof(U);
    k.dims.push_back(std::extent_v<U>);
    if (inner.cat == Kind::Cat::array) {
      k.dims.insert(k.dims.end(), inner.dims.begin(), inner.dims.end());
      k.elem = inner.elem;
    } else {
      k.elem = std::make_shared<const Kind>(std::move(inner));
    }
  } else if constexpr (std::is_integral_v<U> || std::is_enum_v<U>) {
    k = make_integer(sizeof(U));
  } else if constexpr (std::is_floating_point_v<U>) {
    k.cat = Kind::Cat::floating;
    k.size = sizeof(U);
  } else if constexpr (is_complete<U>::value) {
    k.cat = Kind::Cat::aggregate;
    k.size = sizeof(U);
  } else {
    k.cat = Kind::Cat::opaque;
  }
  return k;
}

struct Signature {
  Kind ret;
  std::vector<Kind> params;
};

template <class F>
struct SignatureOf;
template <class R, class... A>
struct SignatureOf<R(A...)> {
  static Signature get() { return Signature{kind_of<R>(), {kind_of<A>()...}}; }
};
template <class F>
Signature signature_of() {
  return SignatureOf<F>::get();
}

// A constant's value: exact for every 64-bit value, signed or not.
struct Value {
  bool negative = false;
  std::uint64_t magnitude = 0;
  bool operator==(const Value& o) const {
    return negative == o.negative && magnitude == o.magnitude;
  }
  std::string str() const;
};
template <class T>
Value value_of(T v) {
  if constexpr (std::is_enum_v<T>) {
    return value_of(static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_signed_v<T>) {
    if (v < 0) return Value{true, static_cast<std::uint64_t>(-(static_cast<long long>(v) + 1)) + 1};
    return Value{false, static_cast<std::uint64_t>(v)};
  } else {
    return Value{false, static_cast<std::uint64_t>(v)};
  }
}

// Our declarations of one API. `versions`, where given, names the header versions an entry
// stands for (a struct or constant of which we declare one copy per layout); empty: all.
struct DeclaredConstant {
  std::string name;  // the vendor's name
  Value value;
  std::vector<std::string> versions;
};
struct DeclaredField {
  std::string name;  // the vendor's, dotted for a member of a nested struct
  std::size_t offset;
  std::size_t size;
  Kind kind;
};
struct DeclaredStruct {
  std::string name;  // the vendor's
  std::string ours;  // the C++ type, for messages
  std::size_t size;
  std::size_t align;
  std::vector<DeclaredField> fields;
  std::vector<std::string> versions;
};
struct DeclaredType {
  std::string name;  // a vendor typedef that is not a struct (enums, handles)
  std::size_t size;
};
struct DeclaredFunction {
  std::string name;  // the symbol we resolve
  Signature signature;
};
struct DeclaredMacro {
  std::string name;  // a function-like macro, evaluated for the arguments the data has
  std::vector<std::pair<std::string, Value>> values;
};
struct DeclaredApi {
  std::string api;  // "nvml", the name of the JSON file without .json
  std::vector<DeclaredConstant> constants;
  std::vector<DeclaredStruct> structs;
  std::vector<DeclaredType> types;
  std::vector<DeclaredFunction> functions;
  std::vector<DeclaredMacro> macros;
};

// One fact where our declaration and a header version differ, keyed
// "<api>/<version>/<constant|struct|type|function|macro>/<name>[/<detail>]".
struct Difference {
  std::string key;
  std::string text;
};

// A difference our code handles on purpose: every difference whose key starts with `key`
// (a whole key, or a prefix ending at a '/'), with why it is harmless.
struct Handled {
  std::string key;
  std::string reason;
};

// A name we declare that the data has no facts for, with why.
struct Undocumented {
  std::string name;
  std::string reason;
};

// Parses a normalized type string of the data ("const struct nvmlPciInfo_t*", "uint64_t[8][8]",
// "enum32") in the context of one header version (for struct sizes and opaque types).
Kind parse_type(const std::string& type, const nlohmann::json& version);

// The machine-level comparison of one parameter or return value: nullopt when the ABI is the
// same, else why not. A pointer is the same when either pointee is void, when both point to
// the same kind, or when ours points to a buffer at least as large as the vendor's struct
// (or union, or same-size integer).
std::optional<std::string> compare_kinds(const Kind& ours, const Kind& vendor, bool by_pointer);

// Every difference between `declared` and `facts` (one parsed JSON file), in every version.
std::vector<Difference> compare(const DeclaredApi& declared, const nlohmann::json& facts);

// The names `facts` lists (names.constants, structs, types, functions, macro_functions) that
// `declared` lacks and `not_declared` does not explain, the names `declared` has that facts lists
// nowhere and `undocumented` does not explain, and entries of either list that are not so.
std::vector<std::string> coverage_gaps(const DeclaredApi& declared, const nlohmann::json& facts,
                                       const std::vector<Undocumented>& undocumented,
                                       const std::vector<Undocumented>& not_declared = {});

// The differences no entry of `handled` covers, and the entries of `handled` that cover none
// (a stale entry is a mistake as well).
struct Verdict {
  std::vector<Difference> unhandled;
  std::vector<Handled> stale;
};
Verdict judge(const std::vector<Difference>& differences, const std::vector<Handled>& handled);

nlohmann::json load_facts(const std::string& api);  // ../shared/reference/vendor-abi/<api>.json

// The tables, one per API (vendor_abi_<api>.cc), with their handled differences and the names
// the data lacks.
struct ApiTables {
  DeclaredApi declared;
  std::vector<Handled> handled;
  std::vector<Undocumented> undocumented;  // we declare them, the data has no facts
  std::vector<Undocumented> not_declared;  // the data has them, we do not declare them
};
// The fields of amd::GpuMetricsPrefix (the part of rsmi_gpu_metrics_t and amdsmi_gpu_metrics_t
// that both backends read), by the vendor's names.
std::vector<DeclaredField> gpu_metrics_prefix_fields();
// The fields of amd::GpuMetrics, the whole v1.x table as amd-smi 26 and rocm-smi-lib 7 declare
// it (4544 bytes): the prefix's and those v1.4 to v1.7 appended.
std::vector<DeclaredField> gpu_metrics_fields();
// The enumerators of every enum of every version of `facts`: constants the data records only
// as members of an enum a covered prototype uses (AMDSMI_MEM_TYPE_GTT of amdsmi_memory_type_t).
std::set<std::string> enumerator_names(const nlohmann::json& facts);

ApiTables nvml_tables();
ApiTables rocm_smi_tables();
ApiTables amd_smi_tables();
ApiTables hlml_tables();

}  // namespace polyaccel::vendor_abi

// A field of C++ type TYPE, member MEMBER (a dotted path for a nested member), named VENDOR in
// the data. offsetof with a nested member designator is accepted by GCC and Clang.
#define POLYACCEL_ABI_FIELD(TYPE, MEMBER, VENDOR)                                  \
  ::polyaccel::vendor_abi::DeclaredField {                                         \
    VENDOR, offsetof(TYPE, MEMBER), sizeof(std::declval<TYPE&>().MEMBER),          \
        ::polyaccel::vendor_abi::kind_of<decltype(std::declval<TYPE&>().MEMBER)>() \
  }
