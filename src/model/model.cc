#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/finite.h"
#include "base/log.h"
#include "kernels/kernels.h"
#include "model/attention.h"
#include "model/hf_folder.h"

namespace hz {

namespace {
// Matrix products below this many multiply-adds run on the engine thread alone. Measured on 2
// cores: a 260K-parameter model decoded 1.7x faster so (its products are 4K-33K), a 2M one about
// 1.05x (65K-400K), and llama-1b's (1M and more) are the same either way.
constexpr int64_t kSerialMacs = int64_t{1} << 20;
}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path, const ModelOverrides& overrides, bool pack) {
  if (is_hf_folder(path)) {
    // TODO(#9): RoPE overrides for Hugging Face folders (config.json's rope_scaling is read).
    HZ_ASSIGN_OR_RETURN(HfFolder hf, HfFolder::open(path));
    if (const HfTensorSource::Dequantized& d = hf.tensors->dequantized(); d.num_tensors > 0) {
      HZ_LOG_INFO("{}: dequantized {} matrices ({}) at load, stored as {} ({} MiB)", path, d.num_tensors, d.from,
                  d.type_names(), d.bytes >> 20);
    }
    HZ_ASSIGN_OR_RETURN(ModelWeights w, ModelWeights::bind(*hf.tensors, hf.config));
    // The packed copies replace the rows they came from: the safetensors pages (re-read from the
    // file should anything touch them) and the Q8_0 rows of dequantized checkpoints are given back,
    // so a pre-quantized model does not sit in memory twice.
    if (pack) w.pack(/*release_source=*/true);
    return std::unique_ptr<Model>(new Model(std::move(hf.metadata), std::move(hf.config), std::move(w), std::move(hf.tensors)));
  }
  HZ_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
  HZ_ASSIGN_OR_RETURN(ModelConfig cfg, ModelConfig::from_gguf(f, overrides.rope));
  if (cfg.name.empty()) cfg.name = path.substr(path.find_last_of('/') + 1);
  HZ_ASSIGN_OR_RETURN(ModelWeights w, ModelWeights::bind(f, cfg));
  if (pack) w.pack(/*release_source=*/true);
  return std::unique_ptr<Model>(new Model(std::move(f), std::move(cfg), std::move(w)));
}

Model::Model(GgufFile file, ModelConfig cfg, ModelWeights w, std::unique_ptr<TensorSource> tensors)
    : file_(std::move(file)), tensors_(std::move(tensors)), cfg_(std::move(cfg)), w_(std::move(w)), rope_(cfg_.rope, cfg_.head_dim) {}

uint64_t Model::streamed_weight_bytes() const {
  uint64_t total = 0;
  auto add = [&](const Matrix& m) {
    if (m.present()) total += m.row_bytes * m.rows;
  };
  add(w_.output);
  for (const auto& L : w_.layers) {
    for (const Matrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router, &L.shared_gate,
                            &L.shared_up, &L.shared_down}) {
      add(*m);
    }
    // A decoded token reads only its top-k experts.
    for (const ExpertMatrix* e : {&L.gate_exps, &L.up_exps, &L.down_exps}) {
      if (e->num_experts > 0) total += e->expert_bytes * cfg_.num_experts_used;
    }
  }
  return total;
}

// y[t][r] = W[r] . x[t]: activations are converted once to the weight's activation type, then the
// rows are split among threads (a split over rows never changes any element's arithmetic).
void Model::matmul(const Matrix& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool, bool same_input) {
  const MatOut out[1] = {{&w, y}};
  matmul(out, x, num_tokens, pool, same_input);
}

void Model::matmul(std::span<const MatOut> outs, const float* x, int64_t num_tokens, ThreadPool& pool, bool same_input) {
  HZ_CHECK(!outs.empty());
  const Matrix& w0 = *outs[0].w;
  const DType at = kernels::activation_type(w0.dtype);
  for (const MatOut& o : outs.subspan(1)) {
    if (o.w->cols != w0.cols || kernels::activation_type(o.w->dtype) != at) {
      // Different inputs: one region each (the later ones reuse nothing they cannot).
      for (const MatOut& p : outs) matmul(*p.w, x, num_tokens, p.y, pool, same_input || &p != &outs[0]);
      return;
    }
  }
  const uint64_t arb = kernels::activation_row_bytes(w0.dtype, w0.cols);
  // The previous call's quantized activations serve again when the caller says x is unchanged
  // since then and they were made for the same type and width.
  const bool reuse = same_input && act_.x == x && act_.num_tokens == num_tokens && act_.type == at && act_.cols == w0.cols;
  if (!reuse) {
    if (act_.rows.size() < arb * num_tokens) act_.rows.resize(arb * num_tokens);
    uint8_t* dst = act_.rows.data();
    for_each_row_range(&pool, num_tokens, w0.cols, [&](int64_t begin, int64_t end) {  // prefill, batches: across the pool
      for (int64_t t = begin; t < end; ++t) kernels::quantize_activation_row(w0.dtype, x + t * w0.cols, dst + t * arb, w0.cols);
    });
    act_.x = x;
    act_.num_tokens = num_tokens;
    act_.type = at;
    act_.cols = w0.cols;
    act_.packed_valid = false;
  }
  bool any_packed = false;
  int64_t total_rows = 0;
  for (const MatOut& o : outs) {
    any_packed = any_packed || o.w->packed != nullptr;
    total_rows += o.w->rows;
  }
  if (any_packed && !act_.packed_valid) {
    const uint64_t bytes = kernels::packed_activation_bytes(w0.cols, num_tokens);
    if (act_.packed.size() < bytes) act_.packed.resize(bytes);
    kernels::pack_activations(w0.cols, reinterpret_cast<const BlockQ8_0*>(act_.rows.data()), arb, num_tokens,
                              act_.packed.data());
    act_.packed_valid = true;
  }
  // Row chunks that shrink as the work runs out: large ones first (few dispatches), 16-row ones
  // last, so that the threads finish together. Multiples of 16 rows from each matrix's start
  // (packed matrices need chunks that start on a group of 8 rows); a chunk never spans two matrices.
  const int64_t threads = pool.num_threads();
  chunks_.clear();
  int64_t left = total_rows;
  for (size_t m = 0; m < outs.size(); ++m) {
    const int64_t rows = outs[m].w->rows;
    for (int64_t r0 = 0; r0 < rows;) {
      int64_t chunk = std::max<int64_t>(16, (left / (3 * threads) + 15) / 16 * 16);
      chunk = std::min(chunk, rows - r0);
      chunks_.push_back({static_cast<int32_t>(m), r0, r0 + chunk});
      r0 += chunk;
      left -= chunk;
    }
  }
  const uint8_t* a = act_.rows.data();
  const uint8_t* ap = act_.packed.data();
  // A product this small runs on the engine thread alone: handing it to the workers costs more.
  const bool small = total_rows * w0.cols * num_tokens < kSerialMacs;
  pool.parallel_for(static_cast<int64_t>(chunks_.size()), [&](int64_t task, int) {
    const RowChunk& c = chunks_[static_cast<size_t>(task)];
    const Matrix& w = *outs[static_cast<size_t>(c.mat)].w;
    float* y = outs[static_cast<size_t>(c.mat)].y;
    if (w.packed != nullptr) {
      kernels::matmul_packed(w.dtype, w.cols, w.packed, c.r0, c.r1, ap, num_tokens, y, w.rows);
    } else {
      kernels::matmul(w.dtype, w.cols, w.data, w.row_bytes, c.r0, c.r1, a, arb, num_tokens, y, w.rows);
    }
  }, small);
}

void Model::attention_layer(const std::vector<SeqSlice>& batch, KvCache& kv, int32_t layer, ThreadPool& pool) {
  const ModelConfig& c = cfg_;
  const LayerWeights& L = w_.layers[layer];
  int64_t total = 0;
  for (const auto& s : batch) total += s.num_tokens;

  for (int64_t t = 0; t < total; ++t) kernels::rms_norm(&x_[t * c.hidden], L.attn_norm.data(), &xn_[t * c.hidden], c.hidden, c.rms_eps);
  const MatOut qkv[3] = {{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}};
  matmul(qkv, xn_.data(), total, pool);  // one dispatch for the three

  // Biases, per-head q/k norms, RoPE, and the K/V write into the cache, token by token.
  const KvCacheConfig& kc = kv.config();
  const bool exact_f16 = kv.exact_codec() == kernels::KvCodec::kF16;
  // A rotated cache (kv/kv_rotation.h) holds R K and R V: queries get the keys' R (scores are
  // unchanged, R is orthogonal) and attention outputs, sums of rotated values, get R^T below.
  // Keys and values are rotated independently (a per-channel K type with a per-row V type rotates V only).
  const bool rotated_k = kv.precision().rotated_stream(0), rotated_v = kv.precision().rotated_stream(1);
  const int32_t group = c.num_heads / c.num_kv_heads;
  if ((rotated_k || rotated_v) && kv_rotation_.empty()) kv_rotation_ = KvRotation(c.num_layers, c.num_kv_heads, c.head_dim);
  int64_t t = 0;
  for (const auto& s : batch) {
    for (int32_t i = 0; i < s.num_tokens; ++i, ++t) {
      float* q = &q_[t * c.q_dim()];
      float* k = &k_[t * c.kv_dim()];
      float* v = &v_[t * c.v_dim()];
      if (!L.bq.empty()) kernels::add(q, L.bq.data(), c.q_dim());
      if (!L.bk.empty()) kernels::add(k, L.bk.data(), c.kv_dim());
      if (!L.bv.empty()) kernels::add(v, L.bv.data(), c.v_dim());
      if (!L.q_norm.empty()) {
        for (int32_t h = 0; h < c.num_heads; ++h) kernels::rms_norm(q + h * c.head_dim, L.q_norm.data(), q + h * c.head_dim, c.head_dim, c.rms_eps);
      }
      if (!L.k_norm.empty()) {
        for (int32_t h = 0; h < c.num_kv_heads; ++h) kernels::rms_norm(k + h * c.head_dim, L.k_norm.data(), k + h * c.head_dim, c.head_dim, c.rms_eps);
      }
      const int64_t pos = s.start_pos + i;
      rope_.apply(q, c.num_heads, pos);
      rope_.apply(k, c.num_kv_heads, pos);
      if (rotated_k) {
        for (int32_t h = 0; h < c.num_heads; ++h)
          kernels::hadamard_rows(q + h * c.head_dim, 1, c.head_dim, kv_rotation_.signs(layer, 0, h / group), 0);
        for (int32_t h = 0; h < c.num_kv_heads; ++h)
          kernels::hadamard_rows(k + h * c.head_dim, 1, c.head_dim, kv_rotation_.signs(layer, 0, h), 0);
      }
      if (rotated_v) {
        for (int32_t h = 0; h < c.num_kv_heads; ++h)
          kernels::hadamard_rows(v + h * c.head_dim, 1, c.head_dim, kv_rotation_.signs(layer, 1, h), 0);
      }
      const BlockRef block = s.block_table[pos / kc.block_tokens];
      const int32_t slot = static_cast<int32_t>(pos % kc.block_tokens);
      for (int32_t h = 0; h < c.num_kv_heads; ++h) {
        // Rows go to the exact (f16 / f32) copy; compact types are encoded when the block is
        // finalized (KvCache::commit), so what a query reads depends on positions only.
        uint8_t* kd = kv.write_row(block, layer, 0, h, slot);
        uint8_t* vd = kv.write_row(block, layer, 1, h, slot);
        if (exact_f16) {
          kernels::f32_to_f16_row(k + h * c.head_dim, reinterpret_cast<uint16_t*>(kd), c.head_dim);
          kernels::f32_to_f16_row(v + h * c.head_dim, reinterpret_cast<uint16_t*>(vd), c.head_dim);
        } else {
          std::memcpy(kd, k + h * c.head_dim, sizeof(float) * c.head_dim);
          std::memcpy(vd, v + h * c.head_dim, sizeof(float) * c.head_dim);
        }
      }
    }
  }

  // Blocks these writes completed get their compact form now, once, for later cold reads.
  for (const auto& s : batch) kv.seal_layer(layer, s.block_table, s.start_pos, s.start_pos + s.num_tokens);

  // What each sequence reads of this layer (kv/kv_read_table.h), then attention: one task per
  // (token, KV head) for the whole GQA group, split along the keys when such tasks are few for
  // the threads (model/attention_runner.h).
  kv_reader_.bind_layer(layer, &pool);
  attn_rows_.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeqSlice& s = batch[i];
    for (int32_t j = 0; j < s.num_tokens; ++j) attn_rows_.push_back({&kv_reader_.table(i), s.start_pos + j});
  }
  AttnJob job;
  job.head_dim = c.head_dim;
  job.num_heads = c.num_heads;
  job.num_kv_heads = c.num_kv_heads;
  job.q_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  job.window = c.sliding_window;
  job.q = q_.data();
  job.out = attn_.data();
  job.rows = attn_rows_.data();
  job.num_tokens = total;
  attn_runner_.run(job, pool);
  kv_reader_.end_layer(layer);
  if (rotated_v) {
    for (int64_t i = 0; i < total; ++i) {
      for (int32_t h = 0; h < c.num_heads; ++h) {
        kernels::hadamard_rows(&attn_[(i * c.num_heads + h) * c.head_dim], 1, c.head_dim,
                               kv_rotation_.signs(layer, 1, h / group), 1);
      }
    }
  }

  matmul(L.wo, attn_.data(), total, xn_.data(), pool);
  for (int64_t i = 0; i < total; ++i) kernels::add(&x_[i * c.hidden], &xn_[i * c.hidden], c.hidden);
}

// x += FFN(rms_norm(x)): the dense SwiGLU block, or the mixture of experts (model/moe.h).
void Model::ffn_layer(const LayerWeights& L, int64_t total, ThreadPool& pool) {
  const ModelConfig& c = cfg_;
  for (int64_t t = 0; t < total; ++t) kernels::rms_norm(&x_[t * c.hidden], L.ffn_norm.data(), &xn_[t * c.hidden], c.hidden, c.rms_eps);
  const MatmulFn mm = [this, &pool](const Matrix& w, const float* x, int64_t n, float* y) { matmul(w, x, n, y, pool); };
  const MatmulPairFn mm_pair = [this, &pool](const Matrix& a, float* ya, const Matrix& b, float* yb, const float* x,
                                              int64_t n) {
    const MatOut outs[2] = {{&a, ya}, {&b, yb}};
    matmul(outs, x, n, pool);
  };
  if (ffn_out_.size() < static_cast<size_t>(total * c.hidden)) ffn_out_.resize(total * c.hidden);
  if (c.num_experts > 0) {
    moe_.forward(c, L, xn_.data(), total, ffn_out_.data(), mm);
  } else {
    swiglu_ffn(L.w_gate, L.w_up, L.w_down, xn_.data(), total, ffn_out_.data(), ffn_scratch_, mm, &mm_pair, &pool);
  }
  for (int64_t t = 0; t < total; ++t) kernels::add(&x_[t * c.hidden], &ffn_out_[t * c.hidden], c.hidden);
}

std::string Model::non_finite_cause(bool checked, const std::optional<NonFinite>& site) {
  if (!checked) return "run with --check-finite to find the layer that produced them";
  if (!site) return "every layer's activations were finite, so the output head produced them";
  const NonFinite& f = *site;
  return f.layer >= 0 ? fmt::format("the first non-finite activations came out of layer {}'s {} at position {}",
                                    f.layer, f.stage, f.position)
                      : fmt::format("the first non-finite activations came out of the {} at position {}", f.stage,
                                    f.position);
}

void Model::note_non_finite(const std::vector<SeqSlice>& batch, const float* rows, const char* stage, int32_t layer,
                            bool logit_rows_only) {
  const int64_t width = cfg_.hidden;
  int64_t row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeqSlice& s = batch[i];
    for (int32_t j = 0; j < s.num_tokens; ++j) {
      if (logit_rows_only && !s.all_logits && j != s.num_tokens - 1) continue;
      const float* r = rows + row++ * width;
      if (!non_finite_[i] && !all_finite(r, width)) non_finite_[i] = NonFinite{stage, layer, s.start_pos + j};
    }
  }
}

void Model::forward(const std::vector<SeqSlice>& batch, KvCache& kv, ThreadPool& pool, std::vector<float>* logits,
                    std::vector<float>* hidden) {
  const ModelConfig& c = cfg_;
  int64_t total = 0, num_logit_rows = 0;
  for (const auto& s : batch) {
    total += s.num_tokens;
    num_logit_rows += s.all_logits ? s.num_tokens : (s.num_tokens > 0 ? 1 : 0);
  }
  if (total == 0) {
    if (logits != nullptr) logits->clear();
    if (hidden != nullptr) hidden->clear();
    return;
  }
  auto grow = [](std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  grow(x_, total * c.hidden);
  grow(xn_, total * std::max(c.hidden, c.q_dim()));
  grow(q_, total * c.q_dim());
  grow(k_, total * c.kv_dim());
  grow(v_, total * c.v_dim());
  grow(attn_, total * c.q_dim());

  // Embedding rows, dequantized.
  int64_t t = 0;
  const Matrix& emb = w_.token_embd;
  for (const auto& s : batch) {
    for (int32_t i = 0; i < s.num_tokens; ++i, ++t) {
      kernels::dequantize_row(emb.dtype, emb.data + static_cast<uint64_t>(s.tokens[i]) * emb.row_bytes, &x_[t * c.hidden], c.hidden);
    }
  }
  non_finite_.assign(batch.size(), std::nullopt);
  if (check_finite_) note_non_finite(batch, x_.data(), "embedding", -1);
  kv_reader_.begin_step(kv, batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeqSlice& s = batch[i];
    kv_reader_.table(i).reset(kv, s.block_table, s.start_pos, s.start_pos + s.num_tokens, c.sliding_window);
  }
  for (int32_t l = 0; l < c.num_layers; ++l) {
    attention_layer(batch, kv, l, pool);
    if (check_finite_) note_non_finite(batch, x_.data(), "attention", l);
    ffn_layer(w_.layers[l], total, pool);
    if (check_finite_) note_non_finite(batch, x_.data(), "feed-forward", l);
  }
  // Every layer has attended: blocks no later query reads exactly or hot get their compact form.
  for (const auto& s : batch) kv.commit(s.block_table, s.start_pos + s.num_tokens - s.num_draft);

  // Final norm for the rows that need logits, gathered contiguously, then the output head.
  int64_t row = 0;
  t = 0;
  for (const auto& s : batch) {
    for (int32_t i = 0; i < s.num_tokens; ++i, ++t) {
      if (s.all_logits || i == s.num_tokens - 1) {
        kernels::rms_norm(&x_[t * c.hidden], w_.output_norm.data(), &xn_[row * c.hidden], c.hidden, c.rms_eps);
        ++row;
      }
    }
  }
  if (check_finite_) note_non_finite(batch, xn_.data(), "output norm", -1, true);
  if (hidden != nullptr) hidden->assign(xn_.begin(), xn_.begin() + num_logit_rows * c.hidden);
  if (logits == nullptr) return;
  logits->resize(static_cast<size_t>(num_logit_rows) * c.vocab);
  matmul(w_.output, xn_.data(), num_logit_rows, logits->data(), pool);
}

}  // namespace hz
