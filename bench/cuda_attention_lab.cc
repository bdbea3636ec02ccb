// The CUDA paged-attention kernels alone on the GPU (a kernel lab; scripts/device-check runs it):
// the chunked and the simple kernel on the llama-8b shape's attention (32 query heads, 8 KV heads,
// head size 128, 16-token blocks, one layer), one decode query of 1 or 8 sequences at depths 4K,
// 32K and 128K, f16 and int8 KV. Prints microseconds a call, the KV bytes read per second, and
// whether the two kernels' outputs are the same bits (they compute the same operations in the same
// order, so on the GPU they should be); last, LAB lines for the table. Without a GPU it says so.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_lab.h"
#include "device/device.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kv_block_table.h"
#include "kernels/cuda/launch_checks.h"

namespace hz {
namespace {

using kernels::KvCodec;
constexpr int32_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlockTokens = 16;

Status check(const Status& s) {
  if (!s.ok()) std::fprintf(stderr, "cuda_attention_lab: %s\n", s.message().c_str());
  return s;
}

// Arena bytes of valid codes: f16 values of magnitude < 1, int8 anything, int8 group scales 1/64.
std::vector<uint8_t> make_arena(const device::ArenaGeometry& g, int64_t num_blocks, std::mt19937& rng) {
  std::vector<uint8_t> a(static_cast<size_t>(num_blocks * g.block_bytes()));
  std::uniform_int_distribution<uint32_t> u;
  for (size_t i = 0; i + 4 <= a.size(); i += 4) {
    uint32_t v = u(rng);
    if (g.codec == KvCodec::kF16) v &= 0xbbffbbffu;  // exponent below 15: |x| < 1
    std::memcpy(&a[i], &v, 4);
  }
  if (g.codec == KvCodec::kInt8) {
    const int64_t rsb = device::arena_row_scale_bytes(g.codec, g.head_dim);
    const int64_t rows = g.num_kv_heads * g.block_tokens;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const device::DeviceKvBlock d = device::arena_block_descriptor(g, b);
      for (uint64_t base : {d.k_scales, d.v_scales}) {
        for (int64_t i = 0; i < rows * rsb / 2; ++i) {
          const uint16_t s = 0x2400;  // f16 1/64
          std::memcpy(&a[base + i * 2], &s, 2);
        }
      }
    }
  }
  return a;
}

int run(int reps) {
  if (Status s = device::require_gpu("cuda_attention_lab"); !s.ok()) {
    std::printf("cuda_attention_lab: no GPU (%s)\n", s.message().c_str());
    return 0;
  }
  auto stream = device::Stream::create();
  if (!check(stream.status()).ok()) return 1;
  const device::Stream& st = *stream;
  std::mt19937 rng(9);
  std::vector<std::string> lab;
  std::printf("%-5s %8s %5s %12s %9s %12s %9s %8s %10s\n", "kv", "depth", "seqs", "chunked us", "GB/s", "simple us", "GB/s",
              "speedup", "same bits");
  for (KvCodec codec : {KvCodec::kF16, KvCodec::kInt8}) {
    device::ArenaGeometry g;
    g.num_layers = 1;
    g.num_kv_heads = kKvHeads;
    g.head_dim = kHeadDim;
    g.block_tokens = kBlockTokens;
    g.codec = codec;
    const int64_t max_depth = 131072, num_blocks = max_depth / kBlockTokens;
    const std::vector<uint8_t> arena = make_arena(g, num_blocks, rng);
    auto darena = device::Buffer::allocate(arena.size(), "arena");
    if (!check(darena.status()).ok()) return 1;
    if (!check(device::copy_to_device(darena->data(), arena.data(), arena.size(), st)).ok()) return 1;
    for (int64_t depth : {int64_t{4096}, int64_t{32768}, int64_t{131072}}) {
      for (int32_t seqs : {1, 8}) {
        // Every sequence reads the same blocks (the bytes a call reads still count once per sequence).
        std::vector<device::DeviceKvBlock> table;
        for (int64_t b = 0; b < depth / kBlockTokens; ++b) table.push_back(device::arena_block_descriptor(g, b));
        std::vector<std::vector<device::DeviceKvBlock>> tables(seqs, table);
        std::vector<int32_t> qseq;
        std::vector<int64_t> qpos;
        for (int32_t s = 0; s < seqs; ++s) qseq.push_back(s), qpos.push_back(depth - 1);
        auto up = device::build_attention_upload(tables, qseq, qpos, kBlockTokens, 0, 1);
        if (!check(up.status()).ok()) return 1;
        const int64_t partials = cuda::attention_partial_floats(seqs, kHeads, up->max_segments, kHeadDim);
        std::vector<float> q(static_cast<size_t>(seqs) * kHeads * kHeadDim);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (auto& x : q) x = nd(rng);
        auto dup = device::Buffer::allocate(up->bytes.size(), "upload");
        auto dq = device::Buffer::allocate(q.size() * 4, "queries");
        auto dpart = device::Buffer::allocate(static_cast<uint64_t>(partials) * 4, "partials");
        auto dout = device::Buffer::allocate(q.size() * 4, "outputs");
        if (!check(dup.status()).ok() || !check(dq.status()).ok() || !check(dpart.status()).ok() || !check(dout.status()).ok())
          return 1;
        if (!check(device::copy_to_device(dup->data(), up->bytes.data(), up->bytes.size(), st)).ok()) return 1;
        if (!check(device::copy_to_device(dq->data(), q.data(), q.size() * 4, st)).ok()) return 1;
        cuda::PagedAttnArgs a;
        a.arena = darena->as<uint8_t>();
        a.layer_offset = 0;
        device::bind_attention_upload(*up, dup->as<uint8_t>(), &a);
        a.qblock_size = 1;
        a.num_heads = kHeads;
        a.num_kv_heads = kKvHeads;
        a.head_dim = kHeadDim;
        a.block_tokens = kBlockTokens;
        a.window = 0;
        a.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
        a.q = dq->as<float>();
        a.partials = dpart->as<float>();
        a.out = dout->as<float>();
        double us[2] = {0, 0};
        std::vector<float> out[2];
        for (int k = 0; k < 2; ++k) {
          const auto kernel = k == 0 ? cuda::AttentionKernel::kChunked : cuda::AttentionKernel::kSimple;
          auto us_k = lab::time_calls(st, 2, reps, [&] { return cuda::paged_attention(a, kernel, st); });
          if (!check(us_k.status()).ok()) return 1;
          us[k] = *us_k;
          auto got = lab::read_floats(st, dout->data(), q.size());
          if (!check(got.status()).ok()) return 1;
          out[k] = std::move(*got);
        }
        const bool same = std::memcmp(out[0].data(), out[1].data(), q.size() * 4) == 0;
        // K and V rows with their scales, once per sequence.
        const double row_bytes = static_cast<double>(g.plane_bytes()) / (kKvHeads * kBlockTokens);
        const double gb = 2.0 * row_bytes * kKvHeads * static_cast<double>(depth) * seqs / 1e9;
        std::printf("%-5s %8lld %5d %12.1f %9.0f %12.1f %9.0f %7.2fx %10s\n", codec == KvCodec::kF16 ? "f16" : "int8",
                    static_cast<long long>(depth), seqs, us[0], gb / (us[0] * 1e-6), us[1], gb / (us[1] * 1e-6),
                    us[1] / us[0], same ? "yes" : "NO");
        if (seqs == 1 && (depth == 4096 || depth == 131072)) {
          char line[200];
          std::snprintf(line, sizeof line, "LAB attn-%s-%lldK chunked %.0f us (%.0f GB/s), simple %.0f us, same bits %s",
                        codec == KvCodec::kF16 ? "f16" : "int8", static_cast<long long>(depth / 1024), us[0],
                        gb / (us[0] * 1e-6), us[1], same ? "yes" : "NO");
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
  int reps = 10;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  }
  return hz::run(reps);
}
