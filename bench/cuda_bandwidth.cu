// Device-memory bandwidth probe for scripts/device-check: read (16-byte loads, several in flight,
// a grid-stride loop over a buffer much larger than L2) and copy (read + write), each timed with
// events over repeated runs after a warm-up; prints the median GB/s. Usage: cuda_bandwidth [GiB].
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

#define CHECK(call)                                                                             \
  do {                                                                                          \
    cudaError_t e_ = (call);                                                                    \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "cuda_bandwidth: %s failed: %s\n", #call, cudaGetErrorString(e_));  \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

// Four independent 16-byte loads per thread per iteration; the XOR keeps them live.
__global__ void read_kernel(const uint4* __restrict__ p, int64_t n, uint4* sink) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  uint4 acc = make_uint4(0, 0, 0, 0);
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
    acc.x ^= a.x ^ b.x ^ c.x ^ d.x;
    acc.y ^= a.y ^ b.y ^ c.y ^ d.y;
    acc.z ^= a.z ^ b.z ^ c.z ^ d.z;
    acc.w ^= a.w ^ b.w ^ c.w ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc.x ^= a.x;
    acc.y ^= a.y;
    acc.z ^= a.z;
    acc.w ^= a.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) sink[0] = acc;  // practically never; defeats elimination
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = __ldcs(src + i);
}

__global__ void fill_kernel(uint4* p, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint32_t v = static_cast<uint32_t>(i * 2654435761u);
    p[i] = make_uint4(v, v ^ 1u, v ^ 2u, v ^ 3u);  // not zeros: zeros can run faster than real data
  }
}

template <typename Launch>
double median_ms(Launch launch, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 8.0;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int64_t bytes = static_cast<int64_t>(gib * (1ull << 30)) / 16 * 16;
  const int64_t n = bytes / 16;
  uint4 *src = nullptr, *dst = nullptr, *sink = nullptr;
  CHECK(cudaMalloc(&src, bytes));
  CHECK(cudaMalloc(&dst, bytes / 2));
  CHECK(cudaMalloc(&sink, sizeof(uint4)));
  const int threads = 512, blocks = prop.multiProcessorCount * 4;
  fill_kernel<<<blocks, threads>>>(src, n);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  const double read_ms = median_ms([&] { read_kernel<<<blocks, threads>>>(src, n, sink); }, 20);
  const double copy_ms = median_ms([&] { copy_kernel<<<blocks, threads>>>(src, dst, n / 2); }, 20);
  std::printf("device: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount, prop.totalGlobalMem / double(1ull << 30));
  std::printf("read  %.2f GiB: %8.1f GB/s (median of 20, %.3f ms)\n", gib, bytes / read_ms / 1e6, read_ms);
  std::printf("copy  %.2f GiB: %8.1f GB/s read+write (median of 20, %.3f ms)\n", gib / 2, bytes / copy_ms / 1e6, copy_ms);
  std::printf("BANDWIDTH read_gbs=%.1f copy_gbs=%.1f\n", bytes / read_ms / 1e6, bytes / copy_ms / 1e6);
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));
  CHECK(cudaFree(sink));
  return 0;
}
