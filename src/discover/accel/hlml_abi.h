// Our own declarations of the part of Intel Gaudi's HLML C ABI (hlml.h, libhlml.so) that the
// hlml backend uses. No vendor header is needed to build: names, values and layouts follow
// hlml.h as vendored by HabanaAI/gohlml (v1.14 to v1.16 and HEAD) and, where current Gaudi
// software differs, the hlml.h that Intel's pyhlml types are generated from. The test build of
// libhlml.so (tests/inject/hlml) defines its functions with these types, so the two cannot
// drift apart silently; tests/discover/accel/vendor_abi_test.cc compares them with the facts in
// ../shared/reference/vendor-abi/hlml.json.
#pragma once

#include <cstddef>
#include <cstdint>

namespace polyaccel::hlml {

inline constexpr unsigned kPciLinkInfoLen = 10;  // PCI_LINK_INFO_LEN, the same in both layouts

// Two layouts of the PCI and utilization structs. Current Gaudi software made PCI_DOMAIN_LEN 9
// (so PCI_ADDR_LEN 19, which moves every field after bus_id), added the maximum link speed and
// width to the PCI caps, pci_rev and pci_subsys_id to the PCI info, and memory to the
// utilization. HLML has no call that names its layout (and the release that changed it is not
// known), so the backend always passes a buffer of the larger layout and reads the fields by the
// layout the library is seen to write (hlml.cc, probe_layout_locked).
enum class Layout {
  gohlml_v1_16,  // hlml.h of HabanaAI/gohlml v1.16.0: pci_info 52 bytes, utilization 4
  current,       // current Gaudi software (pyhlml's generated types): 84 and 8
};

namespace gohlml_v1_16 {
inline constexpr unsigned kPciDomainLen = 5;                 // PCI_DOMAIN_LEN
inline constexpr unsigned kPciAddrLen = kPciDomainLen + 10;  // PCI_ADDR_LEN

struct hlml_pci_cap_t {
  char link_speed[kPciLinkInfoLen];
  char link_width[kPciLinkInfoLen];
};

struct hlml_pci_info_t {
  unsigned int bus;
  char bus_id[kPciAddrLen];  // "0000:19:00.0", NUL-terminated
  unsigned int device;
  unsigned int domain;
  unsigned int pci_device_id;  // device id << 16 | vendor id (0x1da3)
  hlml_pci_cap_t caps;
};

struct hlml_utilization_t {
  unsigned int aip;  // percent of time the AI processor was busy
};
}  // namespace gohlml_v1_16

namespace current {
inline constexpr unsigned kPciDomainLen = 9;                 // PCI_DOMAIN_LEN
inline constexpr unsigned kPciAddrLen = kPciDomainLen + 10;  // PCI_ADDR_LEN

struct hlml_pci_cap_t {
  char link_speed[kPciLinkInfoLen];
  char link_width[kPciLinkInfoLen];
  char link_max_speed[kPciLinkInfoLen];
  char link_max_width[kPciLinkInfoLen];
};

struct hlml_pci_info_t {
  unsigned int bus;
  char bus_id[kPciAddrLen];
  unsigned int device;
  unsigned int domain;
  unsigned int pci_device_id;
  hlml_pci_cap_t caps;
  unsigned int pci_rev;
  unsigned int pci_subsys_id;
};

struct hlml_utilization_t {
  unsigned int aip;
  unsigned int memory;  // percent of time the memory was busy
};
}  // namespace current

// The buffers we hand the library: the larger layout, so that neither can write past them.
using hlml_pci_info_t = current::hlml_pci_info_t;
using hlml_utilization_t = current::hlml_utilization_t;
static_assert(sizeof(hlml_pci_info_t) >= sizeof(gohlml_v1_16::hlml_pci_info_t));
static_assert(sizeof(hlml_utilization_t) >= sizeof(gohlml_v1_16::hlml_utilization_t));

// C enums: int-sized on every ABI HLML ships for.
enum hlml_return_t : int {
  HLML_SUCCESS = 0,
  HLML_ERROR_UNINITIALIZED = 1,
  HLML_ERROR_INVALID_ARGUMENT = 2,
  HLML_ERROR_NOT_SUPPORTED = 3,
  HLML_ERROR_ALREADY_INITIALIZED = 5,
  HLML_ERROR_NOT_FOUND = 6,
  HLML_ERROR_INSUFFICIENT_SIZE = 7,
  HLML_ERROR_DRIVER_NOT_LOADED = 9,
  HLML_ERROR_TIMEOUT = 10,
  HLML_ERROR_AIP_IS_LOST = 15,
  HLML_ERROR_MEMORY = 20,
  HLML_ERROR_NO_DATA = 21,
  HLML_ERROR_UNKNOWN = 49,
};

// The enumerator's name, "HLML_ERROR_AIP_IS_LOST"; nullptr for a value hlml.h does not list.
inline const char* return_name(int rc) {
  switch (rc) {
    case HLML_SUCCESS:
      return "HLML_SUCCESS";
    case HLML_ERROR_UNINITIALIZED:
      return "HLML_ERROR_UNINITIALIZED";
    case HLML_ERROR_INVALID_ARGUMENT:
      return "HLML_ERROR_INVALID_ARGUMENT";
    case HLML_ERROR_NOT_SUPPORTED:
      return "HLML_ERROR_NOT_SUPPORTED";
    case HLML_ERROR_ALREADY_INITIALIZED:
      return "HLML_ERROR_ALREADY_INITIALIZED";
    case HLML_ERROR_NOT_FOUND:
      return "HLML_ERROR_NOT_FOUND";
    case HLML_ERROR_INSUFFICIENT_SIZE:
      return "HLML_ERROR_INSUFFICIENT_SIZE";
    case HLML_ERROR_DRIVER_NOT_LOADED:
      return "HLML_ERROR_DRIVER_NOT_LOADED";
    case HLML_ERROR_TIMEOUT:
      return "HLML_ERROR_TIMEOUT";
    case HLML_ERROR_AIP_IS_LOST:
      return "HLML_ERROR_AIP_IS_LOST";
    case HLML_ERROR_MEMORY:
      return "HLML_ERROR_MEMORY";
    case HLML_ERROR_NO_DATA:
      return "HLML_ERROR_NO_DATA";
    case HLML_ERROR_UNKNOWN:
      return "HLML_ERROR_UNKNOWN";
    default:
      return nullptr;
  }
}

enum hlml_clock_type_t : int {
  HLML_CLOCK_SOC = 0,
  HLML_CLOCK_IC = 1,
  HLML_CLOCK_MME = 2,
  HLML_CLOCK_TPC = 3,
};

struct hlml_memory_t {
  unsigned long long free;
  unsigned long long total;
  unsigned long long used;
};

enum hlml_temperature_sensors_t : int {
  HLML_TEMPERATURE_ON_AIP = 0,
  HLML_TEMPERATURE_ON_BOARD = 1,
  HLML_TEMPERATURE_OTHER = 2,
  HLML_TEMPERATURE_HBM = 3,  // current layout only (gohlml's hlml.h lacks it); older ones refuse it
};

enum hlml_enable_state_t : int {
  HLML_FEATURE_DISABLED = 0,
  HLML_FEATURE_ENABLED = 1,
};

enum hlml_memory_error_type_t : int {
  HLML_MEMORY_ERROR_TYPE_CORRECTED = 0,  // "Not supported" per hlml.h
  HLML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
};

enum hlml_ecc_counter_type_t : int {
  HLML_VOLATILE_ECC = 0,
  HLML_AGGREGATE_ECC = 1,
};

enum hlml_row_replacement_cause_t : int {
  HLML_ROW_REPLACEMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
  HLML_ROW_REPLACEMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
};

struct hlml_row_address_t {
  std::uint8_t hbm_idx;
  std::uint8_t pc;
  std::uint8_t sid;
  std::uint8_t bank_idx;
  std::uint16_t row_addr;
};

using hlml_device_t = void*;
using hlml_event_set_t = void*;

struct hlml_event_data_t {
  hlml_device_t device;           // the device the event occurred on
  unsigned long long event_type;  // one HLML_EVENT_* bit
};

// Event masks (hlml.h #defines).
inline constexpr unsigned long long HLML_EVENT_ECC_ERR = 1ULL << 0;  // same bit as ECC_DERR
inline constexpr unsigned long long HLML_EVENT_ECC_DERR = 1ULL << 0;
inline constexpr unsigned long long HLML_EVENT_CRITICAL_ERR = 1ULL << 1;
inline constexpr unsigned long long HLML_EVENT_CLOCK_RATE = 1ULL << 2;
inline constexpr unsigned long long HLML_EVENT_DRAM_ERR = 1ULL << 3;
inline constexpr unsigned long long HLML_EVENT_ECC_SERR = 1ULL << 4;

// Clock throttle reason bits.
inline constexpr unsigned long long HLML_CLOCKS_THROTTLE_REASON_POWER = 1ULL << 0;
inline constexpr unsigned long long HLML_CLOCKS_THROTTLE_REASON_THERMAL = 1ULL << 1;

// The layouts of hlml.h on LP64 (x86-64, aarch64).
static_assert(sizeof(gohlml_v1_16::hlml_pci_info_t) == 52);
static_assert(offsetof(gohlml_v1_16::hlml_pci_info_t, bus_id) == 4);
static_assert(offsetof(gohlml_v1_16::hlml_pci_info_t, device) == 20);
static_assert(offsetof(gohlml_v1_16::hlml_pci_info_t, pci_device_id) == 28);
static_assert(offsetof(gohlml_v1_16::hlml_pci_info_t, caps) == 32);
static_assert(sizeof(current::hlml_pci_info_t) == 84);
static_assert(offsetof(current::hlml_pci_info_t, device) == 24);
static_assert(offsetof(current::hlml_pci_info_t, caps) == 36);
static_assert(offsetof(current::hlml_pci_info_t, pci_rev) == 76);
static_assert(sizeof(gohlml_v1_16::hlml_utilization_t) == 4);
static_assert(sizeof(current::hlml_utilization_t) == 8);
static_assert(sizeof(hlml_memory_t) == 24);
static_assert(sizeof(hlml_row_address_t) == 6);
static_assert(sizeof(hlml_event_data_t) == 16);
static_assert(sizeof(hlml_return_t) == sizeof(int));

// The function types, one per symbol we resolve.
using init_fn = hlml_return_t();
using shutdown_fn = hlml_return_t();
using get_driver_version_fn = hlml_return_t(char* version, unsigned int length);
using device_get_count_fn = hlml_return_t(unsigned int* count);
using device_get_handle_by_index_fn = hlml_return_t(unsigned int index, hlml_device_t* device);
using device_get_handle_by_pci_bus_id_fn = hlml_return_t(const char* pci_addr,
                                                         hlml_device_t* device);
using device_get_pci_info_fn = hlml_return_t(hlml_device_t device, hlml_pci_info_t* pci);
using device_get_string_fn = hlml_return_t(hlml_device_t device, char* out, unsigned int length);
using device_get_uint_fn = hlml_return_t(hlml_device_t device, unsigned int* value);
using device_get_ull_fn = hlml_return_t(hlml_device_t device, unsigned long long* value);
using device_get_memory_info_fn = hlml_return_t(hlml_device_t device, hlml_memory_t* memory);
using device_get_utilization_rates_fn = hlml_return_t(hlml_device_t device,
                                                      hlml_utilization_t* utilization);
using device_get_temperature_fn = hlml_return_t(hlml_device_t device,
                                                hlml_temperature_sensors_t sensor,
                                                unsigned int* temp);
using device_get_clock_info_fn = hlml_return_t(hlml_device_t device, hlml_clock_type_t type,
                                               unsigned int* clock);
using device_get_ecc_mode_fn = hlml_return_t(hlml_device_t device, hlml_enable_state_t* current,
                                             hlml_enable_state_t* pending);
using device_get_total_ecc_errors_fn = hlml_return_t(hlml_device_t device,
                                                     hlml_memory_error_type_t error_type,
                                                     hlml_ecc_counter_type_t counter_type,
                                                     unsigned long long* count);
using device_get_replaced_rows_fn = hlml_return_t(hlml_device_t device,
                                                  hlml_row_replacement_cause_t cause,
                                                  unsigned int* row_count,
                                                  hlml_row_address_t* addresses);
using device_get_replaced_rows_pending_status_fn = hlml_return_t(hlml_device_t device,
                                                                 hlml_enable_state_t* is_pending);
using event_set_create_fn = hlml_return_t(hlml_event_set_t* set);
using event_set_free_fn = hlml_return_t(hlml_event_set_t set);
using device_register_events_fn = hlml_return_t(hlml_device_t device,
                                                unsigned long long event_types,
                                                hlml_event_set_t set);
using event_set_wait_fn = hlml_return_t(hlml_event_set_t set, hlml_event_data_t* data,
                                        unsigned int timeout_ms);

// ---- further calls: SoC clock maximum, temperature limits, PCIe, NIC links ---------------------
// hlml.h of gohlml v1.16.0; ../shared/reference/vendor-abi/hlml.json lists these functions by
// name only.
enum hlml_temperature_thresholds_t : int {
  HLML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
  HLML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
  HLML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
  HLML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
};

enum hlml_pcie_util_counter_t : int {
  HLML_PCIE_UTIL_TX_BYTES = 0,
  HLML_PCIE_UTIL_RX_BYTES = 1,
};

using device_get_temperature_threshold_fn = hlml_return_t(hlml_device_t device,
                                                          hlml_temperature_thresholds_t threshold,
                                                          unsigned int* temp);
// KB/s over the last 20 ms.
using device_get_pcie_throughput_fn = hlml_return_t(hlml_device_t device,
                                                    hlml_pcie_util_counter_t counter,
                                                    unsigned int* value);
using nic_get_link_fn = hlml_return_t(hlml_device_t device, unsigned int port, bool* up);

}  // namespace polyaccel::hlml
