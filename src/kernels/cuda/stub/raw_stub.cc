// The raw launchers of a build without CUDA. Never reached: the Status API (host/cuda_kernels.cc)
// returns the device layer's "no CUDA in this build" error first. In stub/ so the kernels
// module's *.cc glob leaves it out.
#include "kernels/cuda/launch.h"

namespace hz::cuda::raw {

namespace {
constexpr int kNoCuda = 35;  // cudaErrorInsufficientDriver's value
}  // namespace

int quantize_q8_0(const float*, BlockQ8_0*, int64_t, int64_t, void*) { return kNoCuda; }
int matmul(DType, const void*, int64_t, int64_t, const void*, int64_t, float*, MatmulKernel, void*) { return kNoCuda; }
int quant_block_sums(DType, const void*, int64_t, int64_t, const BlockQ8_0*, int64_t, int32_t*, void*) { return kNoCuda; }
int rms_norm(const float*, const float*, float*, int64_t, int64_t, float, void*) { return kNoCuda; }
int rope(float*, int64_t, int32_t, int32_t, const int64_t*, const float*, int32_t, float, bool, void*) { return kNoCuda; }
int hadamard_heads(float*, int64_t, int32_t, int32_t, const float*, int32_t, int32_t, void*) { return kNoCuda; }
int swiglu(float*, const float*, int64_t, void*) { return kNoCuda; }
int add(float*, const float*, int64_t, void*) { return kNoCuda; }
int add_rows(float*, const float*, int64_t, int64_t, void*) { return kNoCuda; }
int embedding(DType, const void*, int64_t, int64_t, const int32_t*, int64_t, float*, void*) { return kNoCuda; }
int encode_kv_rows(kernels::KvCodec, const float*, int64_t, int64_t, uint8_t*, uint8_t*, void*) { return kNoCuda; }
int decode_kv_rows(kernels::KvCodec, const uint8_t*, const uint8_t*, int64_t, int64_t, float*, void*) { return kNoCuda; }
int kv_write(const KvWriteArgs&, void*) { return kNoCuda; }
int paged_attention(const PagedAttnArgs&, int64_t, AttentionKernel, void*) { return kNoCuda; }
int paged_attention_chunked_ctas(const PagedAttnArgs&, int64_t, void*) { return kNoCuda; }

}  // namespace hz::cuda::raw
