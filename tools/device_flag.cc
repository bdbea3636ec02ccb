#include "tools/device_flag.h"

#include "device/device.h"

namespace hz::cli {

void add_device_flag(CLI::App& app, std::string& device) {
  app.add_option("--device", device, "Where the model runs: cpu or cuda (an NVIDIA Hopper GPU)")->capture_default_str();
}

Status check_device_flag(const std::string& device) {
  if (device == "cpu") return Status();
  if (device != "cuda") return invalid_argument("--device '{}' is not one of cpu, cuda", device);
  HZ_RETURN_IF_ERROR(device::require_gpu("--device cuda"));
  // TODO(#24): the engine on the GPU (weights, the device KV arena, the step loop).
  return unimplemented("--device cuda: the GPU kernels are built, but the engine does not run on the GPU yet; use --device cpu");
}

}  // namespace hz::cli
