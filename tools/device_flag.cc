#include "tools/device_flag.h"

#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "device/device.h"

namespace hz::cli {

void add_device_flag(CLI::App& app, std::string& device) {
  app.add_option("--device", device, "Where the model runs: cpu or cuda (an NVIDIA Hopper GPU)")->capture_default_str();
}

Result<EngineDevice> resolve_device_flag(const std::string& device) {
  if (device == "cpu") return EngineDevice::kCpu;
  if (device != "cuda") return invalid_argument("--device '{}' is not one of cpu, cuda", device);
  const char* emulate = std::getenv("HORIZON_CUDA_EMULATE");
  if (emulate != nullptr && std::strcmp(emulate, "1") == 0) {
    HZ_LOG_WARN("--device cuda: HORIZON_CUDA_EMULATE=1, the GPU path runs on the host emulation of the CUDA backend");
    return EngineDevice::kHostEmulation;
  }
  HZ_RETURN_IF_ERROR(device::require_gpu("--device cuda"));
  return EngineDevice::kCuda;
}

}  // namespace hz::cli
