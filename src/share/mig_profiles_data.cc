// The MIG profile tables, compiled in. Facts from ../shared/data/mig-profiles.json (schema 1):
// NVIDIA's MIG user guide, real `nvidia-smi mig -lgip/-lgipp` captures and mig-parted's default
// config. A100-80GB, H200 and B200 placements are inferred from GPUs with the same slice geometry
// (no capture was found); tests/share/mig_profiles_test.cc checks this table against the JSON.
#include "share/mig_profiles.h"

namespace polyaccel {

namespace {

// Per GPU: key, aliases, PCI ids, compute slices, memory slices, instances; then per profile:
// name, profile id (nvidia-smi's ID), NVML profile enum, compute slices, memory slices (placement
// size), max instances, memory MiB (0: the library's), nominal GB, valid starts.
std::vector<MigGeometry> make_tables() {
  std::vector<MigGeometry> t;
  // clang-format off
  t.push_back(MigGeometry{
      "A100-SXM4-40GB",
      {"A100-40GB", "A100", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB", "A800-40GB"},
      {0x20B010DE, 0x20B110DE, 0x20F110DE, 0x20F610DE},
      7, 8, 7,
      {
          {"1g.5gb", 19, 0, 1, 1, 7, 0, 5, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.5gb+me", 20, 7, 1, 1, 1, 0, 5, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.10gb", 15, 9, 1, 2, 4, 0, 10, {0, 2, 4, 6}},
          {"2g.10gb", 14, 1, 2, 2, 3, 0, 10, {0, 2, 4}},
          {"3g.20gb", 9, 2, 3, 4, 2, 0, 20, {0, 4}},
          {"4g.20gb", 5, 3, 4, 4, 1, 0, 20, {0}},
          {"7g.40gb", 0, 4, 7, 8, 1, 0, 40, {0}},
      }});
  t.push_back(MigGeometry{
      "A100-SXM4-80GB",
      {"A100-80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "A800-80GB"},
      {0x20B210DE, 0x20B510DE, 0x20F310DE, 0x20F510DE},
      7, 8, 7,
      {
          {"1g.10gb", 19, 0, 1, 1, 7, 0, 10, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.10gb+me", 20, 7, 1, 1, 1, 0, 10, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.20gb", 15, 9, 1, 2, 4, 0, 20, {0, 2, 4, 6}},
          {"2g.20gb", 14, 1, 2, 2, 3, 0, 20, {0, 2, 4}},
          {"3g.40gb", 9, 2, 3, 4, 2, 0, 40, {0, 4}},
          {"4g.40gb", 5, 3, 4, 4, 1, 0, 40, {0}},
          {"7g.80gb", 0, 4, 7, 8, 1, 0, 80, {0}},
      }});
  t.push_back(MigGeometry{
      "H100-SXM5-80GB",
      {"H100-80GB", "H100", "NVIDIA H100 80GB HBM3", "H100-PCIE-80GB", "H800-80GB"},
      {0x233010DE, 0x233110DE, 0x232210DE, 0x232410DE},
      7, 8, 7,
      {
          {"1g.10gb", 19, 0, 1, 1, 7, 0, 10, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.10gb+me", 20, 7, 1, 1, 1, 0, 10, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.20gb", 15, 9, 1, 2, 4, 0, 20, {0, 2, 4, 6}},
          {"2g.20gb", 14, 1, 2, 2, 3, 0, 20, {0, 2, 4}},
          {"3g.40gb", 9, 2, 3, 4, 2, 0, 40, {0, 4}},
          {"4g.40gb", 5, 3, 4, 4, 1, 0, 40, {0}},
          {"7g.80gb", 0, 4, 7, 8, 1, 0, 80, {0}},
      }});
  t.push_back(MigGeometry{
      "H100-NVL-94GB",
      {"H100-NVL", "H100-94GB", "NVIDIA H100 NVL", "H800 NVL", "H100 94GB (PCIe/SXM5 94GB listed in MIG guide)"},
      {0x232110DE, 0x233A10DE},
      7, 8, 7,
      {
          {"1g.12gb", 19, 0, 1, 1, 7, 0, 12, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.12gb+me", 20, 7, 1, 1, 1, 0, 12, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.24gb", 15, 9, 1, 2, 4, 0, 24, {0, 2, 4, 6}},
          {"2g.24gb", 14, 1, 2, 2, 3, 0, 24, {0, 2, 4}},
          {"3g.47gb", 9, 2, 3, 4, 2, 0, 47, {0, 4}},
          {"4g.47gb", 5, 3, 4, 4, 1, 0, 47, {0}},
          {"7g.94gb", 0, 4, 7, 8, 1, 0, 94, {0}},
      }});
  t.push_back(MigGeometry{
      "H200-SXM5-141GB",
      {"H200", "H200-141GB", "NVIDIA H200", "NVIDIA H200 141GB HBM3e", "H200 NVL"},
      {0x233510DE, 0x233B10DE},
      7, 8, 7,
      {
          {"1g.18gb", 19, 0, 1, 1, 7, 0, 18, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.18gb+me", 20, 7, 1, 1, 1, 0, 18, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.35gb", 15, 9, 1, 2, 4, 0, 35, {0, 2, 4, 6}},
          {"2g.35gb", 14, 1, 2, 2, 3, 0, 35, {0, 2, 4}},
          {"3g.71gb", 9, 2, 3, 4, 2, 0, 71, {0, 4}},
          {"4g.71gb", 5, 3, 4, 4, 1, 0, 71, {0}},
          {"7g.141gb", 0, 4, 7, 8, 1, 0, 141, {0}},
      }});
  t.push_back(MigGeometry{
      "B200-180GB",
      {"B200", "NVIDIA B200", "NVIDIA B200 180GB HBM3e"},
      {0x290110DE},
      7, 8, 7,
      {
          {"1g.23gb", 19, 0, 1, 1, 7, 0, 23, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.23gb+me", 20, 7, 1, 1, 1, 0, 23, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.45gb", 15, 9, 1, 2, 4, 0, 45, {0, 2, 4, 6}},
          {"2g.45gb", 14, 1, 2, 2, 3, 0, 45, {0, 2, 4}},
          {"3g.90gb", 9, 2, 3, 4, 2, 0, 90, {0, 4}},
          {"4g.90gb", 5, 3, 4, 4, 1, 0, 90, {0}},
          {"7g.180gb", 0, 4, 7, 8, 1, 0, 180, {0}},
      }});
  // clang-format on
  return t;
}

}  // namespace

const std::vector<MigGeometry>& builtin_mig_geometries() {
  static const std::vector<MigGeometry> tables = make_tables();
  return tables;
}

}  // namespace polyaccel
