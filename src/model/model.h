// Model: a loaded decoder-only transformer (config + weights bound to the GGUF mapping) and its
// forward pass over a batch of sequence slices, reading and writing the paged KV cache.
//
// Layer list (Llama family; qwen2 adds q/k/v biases, qwen3 per-head q/k RMSNorm):
//   x = embed(tokens)
//   per layer: h = rms_norm(x) * attn_norm; q,k,v = h Wq, h Wk, h Wv (+ biases); rope(q, k);
//              KV[pos] = k, v; x += attention(q, KV[0..pos]) Wo
//              h = rms_norm(x) * ffn_norm; x += (silu(h Wgate) * (h Wup)) Wdown   (model/ffn.h)
//                  or, for MoE, x += sum over the top-k experts of w_e FFN_e(h) [+ shared] (model/moe.h)
//   logits = rms_norm(x) * output_norm Wout
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "format/gguf.h"
#include "kv/kv_cache.h"
#include "kv/kv_read_table.h"
#include "kv/kv_rotation.h"
#include "model/attention_runner.h"
#include "model/ffn.h"
#include "model/model_config.h"
#include "model/model_overrides.h"
#include "model/moe.h"
#include "model/rope.h"
#include "model/weights.h"

namespace hz {

// One sequence's share of a forward step: `num_tokens` new tokens at positions
// [start_pos, start_pos + num_tokens), whose K/V go into the blocks of `block_table`.
struct SeqSlice {
  const int32_t* tokens = nullptr;
  int32_t num_tokens = 0;
  int64_t start_pos = 0;
  const BlockRef* block_table = nullptr;  // covers positions up to start_pos + num_tokens
  bool all_logits = false;                // logits for every token, else for the last one only
  // The last num_draft tokens are speculative and may be rolled back after the step: the blocks
  // only they would finalize keep their exact rows (KvCache::commit runs up to the others).
  int32_t num_draft = 0;
};

class Model {
 public:
  // A GGUF file, or a Hugging Face folder (config.json + safetensors, see model/hf_folder.h).
  // `overrides` replace the file's metadata where set (RoPE scaling flags).
  // `pack`: repack Q4_0/Q8_0 matrices for the CPU kernels (ModelWeights::pack); off when the
  // weights only feed a device (model/device_model.h).
  static Result<std::unique_ptr<Model>> load(const std::string& path, const ModelOverrides& overrides = {},
                                             bool pack = true);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }
  // The GGUF file; for a Hugging Face folder a metadata-only image of the same keys.
  const GgufFile& file() const { return file_; }
  const ModelWeights& weights() const { return w_; }
  // Bytes of weight data the forward pass streams per decoded token (all matrices but the embedding).
  uint64_t streamed_weight_bytes() const;

  // Runs one step. `logits` receives, slice by slice, num_tokens rows (all_logits) or one row of
  // vocab floats. Token ids must be in [0, vocab) (checked by the caller). `hidden` (optional)
  // receives the same rows' final hidden states after the output norm ([rows][hidden], what
  // embeddings are pooled from); `logits` may then be null to skip the output head.
  void forward(const std::vector<SeqSlice>& batch, KvCache& kv, ThreadPool& pool, std::vector<float>* logits,
               std::vector<float>* hidden = nullptr);
  // Whether attention splits key ranges across threads (default kAuto; tests force either path).
  void set_attention_split(AttnSplit s) { attn_runner_.set_split(s); }

  // Where a step's activations first stopped being finite (NaN or infinity) for one slice:
  // the stage that produced them ("embedding", "attention", "feed-forward" or "output norm"),
  // its layer (-1 for the embedding and the output norm) and the token's position.
  struct NonFinite {
    const char* stage = "";
    int32_t layer = -1;
    int64_t position = 0;
  };
  // Off by default: with it, every forward checks the hidden state after each stage (a pass over
  // the activations per layer) and non_finite() reports, per slice of the last step, the first
  // stage whose output was not finite. For a model whose logits come out NaN: which layer broke.
  void set_check_finite(bool on) { check_finite_ = on; }
  bool check_finite() const { return check_finite_; }
  const std::vector<std::optional<NonFinite>>& non_finite() const { return non_finite_; }
  // Why logits came out non-finite, for an error message: "the first non-finite activations came
  // out of layer 2's feed-forward at position 7" (checked, a site), "... so the output head
  // produced them" (checked, none), else a pointer to --check-finite.
  static std::string non_finite_cause(bool checked, const std::optional<NonFinite>& site);

 private:
  Model(GgufFile file, ModelConfig cfg, ModelWeights w, std::unique_ptr<TensorSource> tensors = nullptr);
  // y = w x for num_tokens rows of x. same_input: x has not changed since the previous call (its
  // quantized activations may be reused).
  void matmul(const Matrix& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool, bool same_input = false);
  // The same for several matrices of one input (q/k/v, gate/up): one dispatch when they take the
  // same activations (width and type), else one per matrix.
  struct MatOut {
    const Matrix* w;
    float* y;
  };
  void matmul(std::span<const MatOut> outs, const float* x, int64_t num_tokens, ThreadPool& pool, bool same_input = false);
  void attention_layer(const std::vector<SeqSlice>& batch, KvCache& kv, int32_t layer, ThreadPool& pool);
  void ffn_layer(const LayerWeights& L, int64_t num_tokens, ThreadPool& pool);
  // With check_finite_: records, per slice without a record yet, the first row of `rows` (hidden
  // floats each, in the step's token order) that is not finite.
  void note_non_finite(const std::vector<SeqSlice>& batch, const float* rows, const char* stage, int32_t layer,
                       bool logit_rows_only = false);

  GgufFile file_;
  std::unique_ptr<TensorSource> tensors_;  // Hugging Face folders: the mappings the weights point into
  ModelConfig cfg_;
  ModelWeights w_;
  Rope rope_;

  // Scratch, grown on demand and reused across steps. [num_tokens][width] row-major.
  std::vector<float> x_, xn_, q_, k_, v_, attn_;
  std::vector<float> ffn_out_;          // [num_tokens][hidden]
  FfnScratch ffn_scratch_;
  MoeBlock moe_;
  // The activations quantized for the last matmul, and what they were made from.
  struct Activations {
    std::vector<uint8_t> rows;    // [num_tokens] rows of kernels::activation_type
    std::vector<uint8_t> packed;  // the same regrouped for packed weights (kernels::pack_activations)
    const float* x = nullptr;
    int64_t num_tokens = 0;
    DType type = DType::kF32;
    int64_t cols = 0;
    bool packed_valid = false;
  };
  Activations act_;
  struct RowChunk {
    int32_t mat;
    int64_t r0, r1;
  };
  std::vector<RowChunk> chunks_;  // matmul's tasks
  AttentionRunner attn_runner_;
  std::vector<AttnQueryRow> attn_rows_;     // per token of the step
  KvRotation kv_rotation_;                 // signs of a rotated KV cache (built on first use)
  KvReader kv_reader_;                      // per sequence of the step: what attention reads
  bool check_finite_ = false;
  std::vector<std::optional<NonFinite>> non_finite_;  // per slice of the last step
};

}  // namespace hz
