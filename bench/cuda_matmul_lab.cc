// The CUDA matmul kernels alone on the GPU (a kernel lab; scripts/device-check runs it): the
// streaming and the simple kernel on the llama-8b shape's matrices, for 1, 8 and 32 tokens and
// each weight type the device decodes fast (bf16, q8_0, q4_0). Prints, per case, microseconds a
// call and the weight bytes read per second (the limit is the bandwidth probe's figure), the two
// kernels' largest relative difference, and last one LAB line per weight type (1 token, the
// largest matrix) for the table. Without a GPU it says so and exits 0.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_lab.h"
#include "device/device.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "tensor/dtype.h"

namespace hz {
namespace {

struct Case {
  const char* name;
  int64_t m, n;
};

// Weights of `t` for m x n, from uniform(-1, 1) floats.
std::vector<uint8_t> make_weights(DType t, int64_t m, int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const uint64_t rb = row_bytes(t, n);
  std::vector<uint8_t> out(rb * m);
  std::vector<float> row(n);
  for (int64_t r = 0; r < m; ++r) {
    for (auto& v : row) v = u(rng);
    kernels::encode_row(t, row.data(), out.data() + r * rb, n);
  }
  return out;
}

Status check(const Status& s) {
  if (!s.ok()) std::fprintf(stderr, "cuda_matmul_lab: %s\n", s.message().c_str());
  return s;
}

int run(int reps) {
  if (Status s = device::require_gpu("cuda_matmul_lab"); !s.ok()) {
    std::printf("cuda_matmul_lab: no GPU (%s)\n", s.message().c_str());
    return 0;
  }
  auto stream = device::Stream::create();
  if (!check(stream.status()).ok()) return 1;
  const device::Stream& st = *stream;
  const Case cases[] = {{"q/o 4096x4096", 4096, 4096}, {"gate/up 14336x4096", 14336, 4096}, {"down 4096x14336", 4096, 14336}};
  const DType types[] = {DType::kBF16, DType::kQ8_0, DType::kQ4_0};
  const int64_t token_counts[] = {1, 8, 32};
  std::mt19937 rng(5);
  std::vector<std::string> lab;
  std::printf("%-6s %-20s %6s %12s %10s %12s %10s %9s %9s\n", "type", "matrix", "tokens", "stream us", "GB/s", "simple us",
              "GB/s", "speedup", "max rel");
  for (DType t : types) {
    for (const Case& c : cases) {
      const std::vector<uint8_t> w = make_weights(t, c.m, c.n, rng);
      auto dw = device::Buffer::allocate(w.size(), "weights");
      if (!check(dw.status()).ok()) return 1;
      if (!check(device::copy_to_device(dw->data(), w.data(), w.size(), st)).ok()) return 1;
      const int64_t max_tokens = 32;
      std::vector<float> x(max_tokens * c.n);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      for (auto& v : x) v = nd(rng);
      auto dx = device::Buffer::allocate(x.size() * 4, "activations");
      auto dq = device::Buffer::allocate(max_tokens * (c.n / kQK8_0) * sizeof(BlockQ8_0), "q8_0 activations");
      auto dy = device::Buffer::allocate(max_tokens * c.m * 4, "outputs");
      if (!check(dx.status()).ok() || !check(dq.status()).ok() || !check(dy.status()).ok()) return 1;
      if (!check(device::copy_to_device(dx->data(), x.data(), x.size() * 4, st)).ok()) return 1;
      const bool quant = t == DType::kQ8_0 || t == DType::kQ4_0;
      if (quant && !check(cuda::quantize_q8_0(dx->as<float>(), dq->as<BlockQ8_0>(), max_tokens, c.n, st)).ok()) return 1;
      const void* xin = quant ? dq->data() : dx->data();
      for (int64_t tokens : token_counts) {
        double us[2] = {0, 0};
        std::vector<float> out[2];
        for (int k = 0; k < 2; ++k) {
          const auto kernel = k == 0 ? cuda::MatmulKernel::kStreaming : cuda::MatmulKernel::kSimple;
          auto us_k = lab::time_calls(st, 3, reps, [&] {
            return cuda::matmul(t, dw->data(), c.m, c.n, xin, tokens, dy->as<float>(), kernel, st);
          });
          if (!check(us_k.status()).ok()) return 1;
          us[k] = *us_k;
          auto got = lab::read_floats(st, dy->data(), tokens * c.m);
          if (!check(got.status()).ok()) return 1;
          out[k] = std::move(*got);
        }
        double max_rel = 0;
        for (size_t i = 0; i < out[0].size(); ++i) {
          const double d = std::fabs(out[0][i] - out[1][i]) / (std::fabs(out[1][i]) + 1e-3);
          max_rel = std::isnan(d) ? INFINITY : std::max(max_rel, d);
        }
        const double gb = static_cast<double>(w.size()) / 1e9;
        std::printf("%-6s %-20s %6lld %12.1f %10.0f %12.1f %10.0f %8.2fx %9.1e\n", dtype_name(t), c.name,
                    static_cast<long long>(tokens), us[0], gb / (us[0] * 1e-6), us[1], gb / (us[1] * 1e-6), us[1] / us[0],
                    max_rel);
        if (tokens == 1 && c.n == 14336) {
          char line[160];
          std::snprintf(line, sizeof line, "LAB matmul-%s down t1: streaming %.0f GB/s, simple %.0f GB/s", dtype_name(t),
                        gb / (us[0] * 1e-6), gb / (us[1] * 1e-6));
          lab.push_back(line);
        }
      }
    }
  }
  for (const std::string& l : lab) std::printf("%s\n", l.c_str());
  return 0;
}

}  // namespace
}  // namespace hz

int main(int argc, char** argv) {
  int reps = 20;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  }
  return hz::run(reps);
}
