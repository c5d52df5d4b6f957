// Our HLML declarations (src/discover/accel/hlml_abi.h) as the ABI comparison sees them, the
// differences from hlml.json that our code handles on purpose, and the names the data lacks.
#include "discover/accel/hlml_abi.h"

#include "vendor_abi.h"

namespace polyaccel::vendor_abi {
namespace {

using namespace polyaccel::hlml;  // NOLINT(google-build-using-namespace): the vendor's names

const std::vector<std::string> kGohlml = {"gohlml-v1.16.0"};
const std::vector<std::string> kCurrent = {"pyhlml-types-generated"};

#define C(NAME)               \
  DeclaredConstant {          \
#NAME, value_of(NAME), {} \
  }
#define F(NAME, TYPE)             \
  DeclaredFunction {              \
#NAME, signature_of < TYPE>() \
  }

template <class Cap>
DeclaredStruct pci_cap(std::vector<std::string> versions, bool with_max) {
  DeclaredStruct s{"hlml_pci_cap_t",
                   "hlml_pci_cap_t",
                   sizeof(Cap),
                   alignof(Cap),
                   {POLYACCEL_ABI_FIELD(Cap, link_speed, "link_speed"),
                    POLYACCEL_ABI_FIELD(Cap, link_width, "link_width")},
                   std::move(versions)};
  if constexpr (requires(Cap c) { c.link_max_speed; }) {
    if (with_max) {
      s.fields.push_back(POLYACCEL_ABI_FIELD(Cap, link_max_speed, "link_max_speed"));
      s.fields.push_back(POLYACCEL_ABI_FIELD(Cap, link_max_width, "link_max_width"));
    }
  }
  return s;
}

template <class Info>
DeclaredStruct pci_info(std::vector<std::string> versions) {
  DeclaredStruct s{
      "hlml_pci_info_t",
      "hlml_pci_info_t",
      sizeof(Info),
      alignof(Info),
      {POLYACCEL_ABI_FIELD(Info, bus, "bus"), POLYACCEL_ABI_FIELD(Info, bus_id, "bus_id"),
       POLYACCEL_ABI_FIELD(Info, device, "device"), POLYACCEL_ABI_FIELD(Info, domain, "domain"),
       POLYACCEL_ABI_FIELD(Info, pci_device_id, "pci_device_id"),
       POLYACCEL_ABI_FIELD(Info, caps, "caps"),
       POLYACCEL_ABI_FIELD(Info, caps.link_speed, "caps.link_speed"),
       POLYACCEL_ABI_FIELD(Info, caps.link_width, "caps.link_width")},
      std::move(versions)};
  if constexpr (requires(Info i) { i.pci_rev; }) {
    s.fields.push_back(POLYACCEL_ABI_FIELD(Info, caps.link_max_speed, "caps.link_max_speed"));
    s.fields.push_back(POLYACCEL_ABI_FIELD(Info, caps.link_max_width, "caps.link_max_width"));
    s.fields.push_back(POLYACCEL_ABI_FIELD(Info, pci_rev, "pci_rev"));
    s.fields.push_back(POLYACCEL_ABI_FIELD(Info, pci_subsys_id, "pci_subsys_id"));
  }
  return s;
}

}  // namespace

ApiTables hlml_tables() {
  DeclaredApi d;
  d.api = "hlml";
  d.constants = {
      C(HLML_SUCCESS),
      C(HLML_ERROR_UNINITIALIZED),
      C(HLML_ERROR_INVALID_ARGUMENT),
      C(HLML_ERROR_NOT_SUPPORTED),
      C(HLML_ERROR_ALREADY_INITIALIZED),
      C(HLML_ERROR_NOT_FOUND),
      C(HLML_ERROR_INSUFFICIENT_SIZE),
      C(HLML_ERROR_DRIVER_NOT_LOADED),
      C(HLML_ERROR_TIMEOUT),
      C(HLML_ERROR_AIP_IS_LOST),
      C(HLML_ERROR_MEMORY),
      C(HLML_ERROR_NO_DATA),
      C(HLML_ERROR_UNKNOWN),
      C(HLML_CLOCK_SOC),
      C(HLML_CLOCK_IC),
      C(HLML_CLOCK_MME),
      C(HLML_CLOCK_TPC),
      C(HLML_TEMPERATURE_ON_AIP),
      C(HLML_TEMPERATURE_ON_BOARD),
      C(HLML_TEMPERATURE_OTHER),
      C(HLML_TEMPERATURE_HBM),
      C(HLML_FEATURE_DISABLED),
      C(HLML_FEATURE_ENABLED),
      C(HLML_MEMORY_ERROR_TYPE_CORRECTED),
      C(HLML_MEMORY_ERROR_TYPE_UNCORRECTED),
      C(HLML_VOLATILE_ECC),
      C(HLML_AGGREGATE_ECC),
      C(HLML_ROW_REPLACEMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
      C(HLML_ROW_REPLACEMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
      C(HLML_EVENT_ECC_ERR),
      C(HLML_EVENT_ECC_DERR),
      C(HLML_EVENT_CRITICAL_ERR),
      C(HLML_EVENT_CLOCK_RATE),
      C(HLML_EVENT_DRAM_ERR),
      C(HLML_EVENT_ECC_SERR),
      C(HLML_CLOCKS_THROTTLE_REASON_POWER),
      C(HLML_CLOCKS_THROTTLE_REASON_THERMAL),
      // One copy per layout.
      {"PCI_DOMAIN_LEN", value_of(gohlml_v1_16::kPciDomainLen), kGohlml},
      {"PCI_ADDR_LEN", value_of(gohlml_v1_16::kPciAddrLen), kGohlml},
      {"PCI_DOMAIN_LEN", value_of(current::kPciDomainLen), kCurrent},
      {"PCI_ADDR_LEN", value_of(current::kPciAddrLen), kCurrent},
      {"PCI_LINK_INFO_LEN", value_of(kPciLinkInfoLen), {}},
  };
  d.structs = {
      pci_cap<gohlml_v1_16::hlml_pci_cap_t>(kGohlml, false),
      pci_cap<current::hlml_pci_cap_t>(kCurrent, true),
      pci_info<gohlml_v1_16::hlml_pci_info_t>(kGohlml),
      pci_info<current::hlml_pci_info_t>(kCurrent),
      {"hlml_utilization_t",
       "gohlml_v1_16::hlml_utilization_t",
       sizeof(gohlml_v1_16::hlml_utilization_t),
       alignof(gohlml_v1_16::hlml_utilization_t),
       {POLYACCEL_ABI_FIELD(gohlml_v1_16::hlml_utilization_t, aip, "aip")},
       kGohlml},
      {"hlml_utilization_t",
       "current::hlml_utilization_t",
       sizeof(current::hlml_utilization_t),
       alignof(current::hlml_utilization_t),
       {POLYACCEL_ABI_FIELD(current::hlml_utilization_t, aip, "aip"),
        POLYACCEL_ABI_FIELD(current::hlml_utilization_t, memory, "memory")},
       kCurrent},
      {"hlml_memory_t",
       "hlml_memory_t",
       sizeof(hlml_memory_t),
       alignof(hlml_memory_t),
       {POLYACCEL_ABI_FIELD(hlml_memory_t, free, "free"),
        POLYACCEL_ABI_FIELD(hlml_memory_t, total, "total"),
        POLYACCEL_ABI_FIELD(hlml_memory_t, used, "used")},
       {}},
      {"hlml_row_address_t",
       "hlml_row_address_t",
       sizeof(hlml_row_address_t),
       alignof(hlml_row_address_t),
       {POLYACCEL_ABI_FIELD(hlml_row_address_t, hbm_idx, "hbm_idx"),
        POLYACCEL_ABI_FIELD(hlml_row_address_t, pc, "pc"),
        POLYACCEL_ABI_FIELD(hlml_row_address_t, sid, "sid"),
        POLYACCEL_ABI_FIELD(hlml_row_address_t, bank_idx, "bank_idx"),
        POLYACCEL_ABI_FIELD(hlml_row_address_t, row_addr, "row_addr")},
       {}},
      {"hlml_event_data_t",
       "hlml_event_data_t",
       sizeof(hlml_event_data_t),
       alignof(hlml_event_data_t),
       {POLYACCEL_ABI_FIELD(hlml_event_data_t, device, "device"),
        POLYACCEL_ABI_FIELD(hlml_event_data_t, event_type, "event_type")},
       {}},
  };
  d.types = {
      {"hlml_return_t", sizeof(hlml_return_t)},
      {"hlml_clock_type_t", sizeof(hlml_clock_type_t)},
      {"hlml_temperature_sensors_t", sizeof(hlml_temperature_sensors_t)},
      {"hlml_enable_state_t", sizeof(hlml_enable_state_t)},
      {"hlml_memory_error_type_t", sizeof(hlml_memory_error_type_t)},
      {"hlml_ecc_counter_type_t", sizeof(hlml_ecc_counter_type_t)},
      {"hlml_row_replacement_cause_t", sizeof(hlml_row_replacement_cause_t)},
      {"hlml_device_t", sizeof(hlml_device_t)},
      {"hlml_event_set_t", sizeof(hlml_event_set_t)},
  };
  // The symbols hlml.cc resolves (HlmlBackend's Api::resolve) with the type it calls each by.
  d.functions = {
      F(hlml_init, init_fn),
      F(hlml_shutdown, shutdown_fn),
      F(hlml_get_driver_version, get_driver_version_fn),
      F(hlml_device_get_count, device_get_count_fn),
      F(hlml_device_get_handle_by_index, device_get_handle_by_index_fn),
      F(hlml_device_get_handle_by_pci_bus_id, device_get_handle_by_pci_bus_id_fn),
      F(hlml_device_get_pci_info, device_get_pci_info_fn),
      F(hlml_device_get_name, device_get_string_fn),
      F(hlml_device_get_uuid, device_get_string_fn),
      F(hlml_device_get_serial, device_get_string_fn),
      F(hlml_device_get_memory_info, device_get_memory_info_fn),
      F(hlml_device_get_power_management_default_limit, device_get_uint_fn),
      F(hlml_device_get_ecc_mode, device_get_ecc_mode_fn),
      F(hlml_device_get_utilization_rates, device_get_utilization_rates_fn),
      F(hlml_device_get_temperature, device_get_temperature_fn),
      F(hlml_device_get_power_usage, device_get_uint_fn),
      F(hlml_device_get_total_energy_consumption, device_get_ull_fn),
      F(hlml_device_get_clock_info, device_get_clock_info_fn),
      F(hlml_device_get_pcie_replay_counter, device_get_uint_fn),
      F(hlml_device_get_total_ecc_errors, device_get_total_ecc_errors_fn),
      F(hlml_device_get_replaced_rows, device_get_replaced_rows_fn),
      F(hlml_device_get_replaced_rows_pending_status, device_get_replaced_rows_pending_status_fn),
      F(hlml_device_get_current_clocks_throttle_reasons, device_get_ull_fn),
      F(hlml_event_set_create, event_set_create_fn),
      F(hlml_event_set_free, event_set_free_fn),
      F(hlml_device_register_events, device_register_events_fn),
      F(hlml_event_set_wait, event_set_wait_fn),
  };

  std::vector<Handled> handled = {
      {"hlml/gohlml-v1.16.0/constant/HLML_TEMPERATURE_HBM",
       "gohlml's hlml.h has no HBM sensor; hlml.cc asks for it and takes the older library's "
       "HLML_ERROR_INVALID_ARGUMENT as not supported (HbmSensorOfANewerLibrary)"},
  };
  return ApiTables{std::move(d), std::move(handled), {}, {}};
}

#undef C
#undef F

}  // namespace polyaccel::vendor_abi
