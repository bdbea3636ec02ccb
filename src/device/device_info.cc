// Formatting of device facts, shared by the CUDA and stub builds.
#include <fmt/format.h>

#include "base/byte_size.h"
#include "device/device.h"

namespace hz::device {

std::string cuda_version_string(int32_t v) {
  if (v <= 0) return "none";
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string describe(const DeviceInfo& d) {
  return fmt::format("{} (sm_{}{}, {} SMs), {} free of {}, driver {}, runtime {}", d.name, d.cc_major, d.cc_minor, d.num_sms,
                     format_bytes(d.free_bytes), format_bytes(d.total_bytes), cuda_version_string(d.driver_version),
                     cuda_version_string(d.runtime_version));
}

}  // namespace hz::device
