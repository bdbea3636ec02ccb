// DeviceModel: a loaded Model's weights in a backend's memory (kernels/cuda/backend.h: a GPU, or the
// host emulation) and the forward pass there, over a DeviceKvArena. The same layer list and batch
// contract as Model::forward (model/model.h); the scheduler, block tables and sampling stay on the
// host. Weight types the device kernels read (f32, f16, bf16, q8_0, q4_0) are uploaded as they are;
// any other tensor (a k-quant, e.g. the q6_k output head of a q4_0 file) is converted to q8_0 at
// load, with a warning naming it. Dense Llama-family models (llama, mistral, qwen2 biases, qwen3
// q/k norms); mixture-of-experts models are refused. Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/kv_block_table.h"
#include "kv/device_kv_arena.h"
#include "model/model.h"

namespace hz {

// A weight matrix in backend memory: rows x cols of `dtype`, row-major.
struct DeviceMatrix {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;  // backend memory
};

class DeviceModel {
 public:
  // Uploads `model`'s weights to `backend` (both must outlive the DeviceModel). Errors: an
  // architecture or shape the device path does not run (naming it), out of device memory.
  static Result<std::unique_ptr<DeviceModel>> create(const Model& model, cuda::Backend& backend);
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  // Whether `c` is a model the device path runs; the error names what it lacks.
  static Status check_supported(const ModelConfig& c);
  // Bytes the weights take in backend memory for `model` (conversions counted), before uploading.
  static uint64_t weight_bytes_for(const Model& model);
  // Scratch bytes of a step of up to `max_tokens` tokens (activations, attention partials for
  // contexts up to `max_context` positions, the logits of every token): what a planner reserves.
  static uint64_t scratch_bytes_for(const ModelConfig& c, int64_t max_tokens, int64_t max_context);

  const ModelConfig& config() const { return cfg_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Scratch bytes held now (they grow with the largest step seen; scratch_bytes_for bounds them).
  uint64_t scratch_bytes() const;
  // "output.weight: q6_k -> q8_0", one per tensor converted at load.
  const std::vector<std::string>& conversions() const { return conversions_; }

  // One step, as Model::forward: `logits` receives, slice by slice, num_tokens rows (all_logits) or
  // one row of vocab floats. Slices' block tables hold pool blocks of `kv`. A device error leaves
  // the step's KV writes undefined (the caller fails those sequences).
  Status forward(const std::vector<SeqSlice>& batch, DeviceKvArena& kv, std::vector<float>* logits);

  // Decode steps (every slice one token) of up to 256 sequences run in a fixed frame per batch
  // bucket (cuda::graph_bucket) and depth bucket, which the backend captures as a graph the second
  // time it sees it and replays after (a CUDA graph; the host emulation records its calls). Same
  // logits, bit for bit, as without. On unless HORIZON_CUDA_GRAPHS=0; off: every step as it comes.
  void set_decode_graphs(bool on) { decode_graphs_ = on; }
  struct GraphStats {
    int64_t frames = 0;    // decode steps run in a frame
    int64_t captures = 0;  // graphs captured
    int64_t replays = 0;   // steps that replayed a captured graph
  };
  const GraphStats& graph_stats() const { return graph_stats_; }

 private:
  struct Layer {
    DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
    const float* bq = nullptr;  // null when absent
    const float* bk = nullptr;
    const float* bv = nullptr;
    const float* q_norm = nullptr;
    const float* k_norm = nullptr;
  };
  DeviceModel(const ModelConfig& cfg, cuda::Backend& backend) : cfg_(cfg), backend_(backend) {}
  Status upload_weights(const Model& model);
  Result<DeviceMatrix> upload_matrix(const Matrix& m);
  Result<const float*> upload_floats(const std::vector<float>& v, const char* what);
  // Grows the scratch buffers for a step of `tokens` tokens, `logit_rows` rows of logits,
  // `upload_bytes` of attention tables and `partial_floats` of attention partials.
  Status reserve(int64_t tokens, int64_t logit_rows, int64_t upload_bytes, int64_t partial_floats);
  // y = x W^T for `tokens` rows; quantized weights take x as Q8_0 blocks, made once per input
  // (`same_input`: x is the previous call's input, its blocks serve again).
  Status matmul(const DeviceMatrix& w, const float* x, int64_t tokens, float* y, bool same_input = false);
  Status forward_decode(const std::vector<SeqSlice>& batch, DeviceKvArena& kv, std::vector<float>* logits);
  // The launches of a step whose inputs are uploaded (s_.tokens, s_.upload as upload_).
  Status launch_step(DeviceKvArena& kv, int64_t total, int64_t rows, int32_t qblock);
  // Descriptors of the first `num_blocks` blocks of `s`'s table.
  Status block_descriptors(const SeqSlice& s, const DeviceKvArena& kv, int32_t num_blocks,
                           std::vector<device::DeviceKvBlock>* out) const;

  ModelConfig cfg_;
  cuda::Backend& backend_;
  std::vector<cuda::DeviceMemory> weights_;  // every uploaded tensor
  uint64_t weight_bytes_ = 0;
  std::vector<std::string> conversions_;
  DeviceMatrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  std::vector<Layer> layers_;
  const float* rope_theta_ = nullptr;  // [rope dim / 2]: hz::Rope's per-pair frequencies
  const float* rotation_ = nullptr;    // KvRotation's signs, [layers][K, V][kv heads][head dim]
  float rope_mscale_ = 1.0f;

  // Scratch (backend memory), grown on demand. [tokens][width] row-major.
  struct Scratch {
    cuda::DeviceMemory x, xn, q, k, v, attn, gate, up, xq, logits, tokens, pos, upload, partials;
    int64_t tokens_cap = 0, logit_rows_cap = 0, upload_cap = 0, partials_cap = 0;
    int64_t generation = 0;  // counts reallocations (captured graphs point into these buffers)
  };
  Scratch s_;
  const float* xq_source_ = nullptr;  // what s_.xq was quantized from (rows, cols)
  int64_t xq_rows_ = 0, xq_cols_ = 0;
  // Host staging of a step's inputs (kept until the step's copies are done).
  std::vector<int32_t> h_tokens_, h_seq_;
  std::vector<int64_t> h_pos_;
  device::AttentionUpload upload_;
  std::vector<std::pair<int64_t, int64_t>> norm_rows_;  // (first row, rows) that get logits, in order

  bool decode_graphs_ = true;
  bool capture_ok_ = true;  // false after a capture failed: frames run without graphs
  GraphStats graph_stats_;
  // Captured decode graphs by (batch bucket << 32 | segments); null: seen once, not yet captured.
  // Valid for the arena graphs_arena_ (DeviceKvArena::id) and scratch generation graphs_generation_.
  std::unordered_map<uint64_t, std::unique_ptr<cuda::CapturedGraph>> graphs_;
  uint64_t graphs_arena_ = 0;
  int64_t graphs_generation_ = -1;
};

}  // namespace hz
