#include "core/accel_sample.h"

namespace polyaccel {

const char* to_string(AcceleratorEventKind kind) {
  switch (kind) {
    case AcceleratorEventKind::xid:
      return "xid";
    case AcceleratorEventKind::ecc_uncorrectable:
      return "ecc_uncorrectable";
    case AcceleratorEventKind::critical:
      return "critical";
    case AcceleratorEventKind::other:
      return "other";
  }
  return "other";
}

}  // namespace polyaccel
