// What the CUDA kernel labs (cuda_matmul_lab.cc, cuda_attention_lab.cc) share: timing a kernel call
// between two events, and reading a result back.
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "device/device.h"

namespace hz::lab {

// Microseconds per call: `warmup` calls, then `reps` calls timed between two events on `s`.
inline Result<double> time_calls(const device::Stream& s, int warmup, int reps, const std::function<Status()>& call) {
  for (int i = 0; i < warmup; ++i) HZ_RETURN_IF_ERROR(call());
  HZ_ASSIGN_OR_RETURN(device::Event e0, device::Event::create());
  HZ_ASSIGN_OR_RETURN(device::Event e1, device::Event::create());
  HZ_RETURN_IF_ERROR(e0.record(s));
  for (int i = 0; i < reps; ++i) HZ_RETURN_IF_ERROR(call());
  HZ_RETURN_IF_ERROR(e1.record(s));
  HZ_RETURN_IF_ERROR(e1.synchronize());
  HZ_ASSIGN_OR_RETURN(const float ms, e1.elapsed_ms_since(e0));
  return ms * 1000.0 / reps;
}

// `n` floats of device memory at `src`, on the host.
inline Result<std::vector<float>> read_floats(const device::Stream& s, const void* src, size_t n) {
  std::vector<float> out(n);
  HZ_RETURN_IF_ERROR(device::copy_to_host(out.data(), src, n * sizeof(float), s));
  HZ_RETURN_IF_ERROR(s.synchronize());
  return out;
}

}  // namespace hz::lab
