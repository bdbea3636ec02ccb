// Model weights bound to a tensor source's memory mapping, GGUF or safetensors (never copied, except
// small norm vectors and biases, which are converted to f32). Shapes are checked against the ModelConfig.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/tensor_source.h"
#include "model/model_config.h"
#include "tensor/dtype.h"

namespace hz {

// A weight matrix of `rows` output features x `cols` input features, row-major, rows of
// `row_bytes` bytes in `dtype` (GGUF shape [cols, rows]). Non-owning view into the mapping.
struct Matrix {
  std::string name;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
  const uint8_t* data = nullptr;
  // The same rows in the kernels' packed layout (kernels::pack_weights), when ModelWeights::pack
  // made one; the forward pass then reads only this.
  const uint8_t* packed = nullptr;
  bool present() const { return data != nullptr; }
};

// Stacked expert matrices (GGUF shape [cols, rows, num_experts]): expert e's matrix starts at
// data + e * expert_bytes.
struct ExpertMatrix {
  Matrix m;               // shape of one expert
  int32_t num_experts = 0;
  uint64_t expert_bytes = 0;
  uint64_t packed_expert_bytes = 0;  // stride of the experts in m.packed, when packed
  Matrix expert(int32_t e) const {
    Matrix x = m;
    x.data = m.data + e * expert_bytes;
    if (m.packed != nullptr) x.packed = m.packed + e * packed_expert_bytes;
    return x;
  }
};

struct LayerWeights {
  std::vector<float> attn_norm;  // [hidden]
  Matrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;  // optional biases (qwen2); empty when absent
  std::vector<float> q_norm, k_norm;  // optional per-head RMSNorm weights (qwen3), [head_dim]
  std::vector<float> ffn_norm;   // [hidden]
  // Dense FFN.
  Matrix w_gate, w_up, w_down;
  // Mixture of experts (empty when dense).
  Matrix router;                 // [num_experts x hidden]
  ExpertMatrix gate_exps, up_exps, down_exps;  // [expert_ffn x hidden] / [hidden x expert_ffn] each
  // Shared expert (Qwen-MoE style), present when config.shared_expert_ffn > 0.
  Matrix shared_gate, shared_up, shared_down;
  std::vector<float> shared_gate_inp;  // [hidden]: sigmoid(shared_gate_inp . x) scales the shared expert
};

struct ModelWeights {
  Matrix token_embd;             // [vocab x hidden]
  std::vector<float> output_norm;
  Matrix output;                 // [vocab x hidden]; the embedding when tied
  std::vector<LayerWeights> layers;

  // Binds every tensor the config needs; errors name the tensor and the shape expected.
  static Result<ModelWeights> bind(const TensorSource& f, const ModelConfig& cfg);

  // Repacks every Q4_0/Q8_0 matrix (experts included) into the kernels' packed layout, once, in
  // anonymous memory, on several threads. `release_source`: the rows live in a read-only file
  // mapping whose pages may be dropped after packing (they fault back in if read again). With
  // `release_source` and huge pages on (HORIZON_HUGEPAGES), matrices of other types of 2 MiB or
  // more are copied, unchanged, into huge-page memory (Matrix::data then points there). Off with
  // HORIZON_PACK=0. Returns the bytes packed or copied.
  uint64_t pack(bool release_source);

 private:
  struct PackedBuffer;
  std::vector<std::shared_ptr<PackedBuffer>> packed_;  // owns every Matrix::packed and copied data
};

}  // namespace hz
