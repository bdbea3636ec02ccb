#include "model/device_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/log.h"
#include "kernels/cuda/kv_block_table.h"
#include "kernels/cuda/launch_checks.h"
#include "kernels/kernels.h"
#include "kv/kv_rotation.h"
#include "model/rope.h"

namespace hz {
namespace {

bool quantized(DType t) { return t == DType::kQ8_0 || t == DType::kQ4_0; }

// The type a tensor of `t` with `cols` columns takes on the device: itself when the kernels read
// it, else q8_0 (f32 when the rows are not whole q8_0 blocks).
DType device_type(DType t, int64_t cols) {
  if (cuda::weight_type_supported(t) && (!quantized(t) || cols % kQK8_0 == 0)) return t;
  return cols % kQK8_0 == 0 ? DType::kQ8_0 : DType::kF32;
}

uint64_t matrix_bytes(const Matrix& m) {
  if (!m.present()) return 0;
  return row_bytes(device_type(m.dtype, m.cols), m.cols) * static_cast<uint64_t>(m.rows);
}

int64_t round_up_pow2(int64_t v, int64_t lo) {
  int64_t p = lo;
  while (p < v) p *= 2;
  return p;
}

// The capacity a scratch buffer grows to for `n` units: a multiple of `align` and of the largest
// power of two at most n / 8, so one that grows step by step is reallocated a logarithmic number
// of times and holds at most 1/8 more than asked (a power of two could hold twice as much, past
// what the planner reserved). scratch_bytes_for() counts the same.
int64_t grown_capacity(int64_t n, int64_t align) {
  int64_t unit = align;
  while (unit * 16 <= n) unit *= 2;
  return (n + unit - 1) / unit * unit;
}

// Rows converted and uploaded per batch (bounded host staging for large tensors).
constexpr uint64_t kConvertChunkBytes = uint64_t{64} << 20;

}  // namespace

Status DeviceModel::check_supported(const ModelConfig& c) {
  if (c.num_experts > 0)
    return unimplemented("--device cuda: the model ({}) is a mixture-of-experts model ({} experts), which runs on the CPU only",
                         c.name, c.num_experts);
  if (c.head_dim_v != c.head_dim)
    return unimplemented("--device cuda: the model ({}) has value heads of {} and key heads of {}; the GPU path needs them equal",
                         c.name, c.head_dim_v, c.head_dim);
  HZ_RETURN_IF_ERROR(cuda::check_attention_shape(c.num_heads, c.num_kv_heads, c.head_dim, 16)
                         .with_context(fmt::format("--device cuda: the model ({})", c.name)));
  if (c.rope.dim < 2 || c.rope.dim > c.head_dim || c.rope.dim % 2 != 0)
    return unimplemented("--device cuda: the model ({}) rotates {} of {} head dims", c.name, c.rope.dim, c.head_dim);
  return Status();
}

uint64_t DeviceModel::weight_bytes_for(const Model& model) {
  const ModelWeights& w = model.weights();
  const ModelConfig& c = model.config();
  uint64_t total = matrix_bytes(w.token_embd) + 4 * w.output_norm.size();
  if (w.output.data != w.token_embd.data) total += matrix_bytes(w.output);
  for (const LayerWeights& L : w.layers) {
    for (const Matrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) total += matrix_bytes(*m);
    for (const auto* v : {&L.attn_norm, &L.ffn_norm, &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm}) total += 4 * v->size();
  }
  const uint64_t rotation_signs = 2 * static_cast<uint64_t>(c.num_layers) * c.num_kv_heads * c.head_dim;
  return total + 4 * static_cast<uint64_t>(c.rope.dim / 2) + 4 * rotation_signs;
}

uint64_t DeviceModel::scratch_bytes_for(const ModelConfig& c, int64_t max_tokens, int64_t max_context) {
  const int64_t t = grown_capacity(max_tokens, 16);  // as reserve() rounds
  const int64_t widest = std::max<int64_t>({c.hidden, c.q_dim(), c.ffn});
  const int64_t segments = std::max<int64_t>(1, (max_context + cuda::kAttnSegmentTokens - 1) / cuda::kAttnSegmentTokens + 1);
  int64_t floats = t * c.hidden                      // x
                   + t * std::max(c.hidden, c.q_dim())  // xn
                   + 2 * t * c.q_dim()               // q, attn
                   + 2 * t * c.kv_dim()              // k, v
                   + 2 * t * c.ffn                   // gate, up
                   + t * c.vocab                     // logits
                   + grown_capacity(cuda::attention_partial_floats(max_tokens, c.num_heads,
                                                                   static_cast<int32_t>(segments), c.head_dim),
                                    4096);
  const int64_t xq = t * (widest / kQK8_0 + 1) * static_cast<int64_t>(sizeof(BlockQ8_0));
  const int64_t tables = t * 64 + (max_context / 16 + 16) * static_cast<int64_t>(sizeof(device::DeviceKvBlock)) + 4096;
  return static_cast<uint64_t>(4 * floats + xq + tables + t * 4);
}

Result<std::unique_ptr<DeviceModel>> DeviceModel::create(const Model& model, cuda::Backend& backend) {
  HZ_RETURN_IF_ERROR(check_supported(model.config()));
  std::unique_ptr<DeviceModel> m(new DeviceModel(model.config(), backend));
  const char* graphs = std::getenv("HORIZON_CUDA_GRAPHS");
  m->decode_graphs_ = graphs == nullptr || std::string(graphs) != "0";
  HZ_RETURN_IF_ERROR(m->upload_weights(model));
  if (!m->conversions_.empty()) {
    std::string names;
    for (size_t i = 0; i < m->conversions_.size() && i < 3; ++i) names += (i > 0 ? ", " : "") + m->conversions_[i];
    if (m->conversions_.size() > 3) names += fmt::format(" and {} more", m->conversions_.size() - 3);
    HZ_LOG_WARN("--device cuda: {} tensor{} converted at load, as the GPU kernels read f32, f16, bf16, q8_0 and q4_0: {}",
                m->conversions_.size(), m->conversions_.size() == 1 ? "" : "s", names);
  }
  return m;
}

Result<DeviceMatrix> DeviceModel::upload_matrix(const Matrix& m) {
  DeviceMatrix d;
  d.rows = m.rows;
  d.cols = m.cols;
  d.dtype = device_type(m.dtype, m.cols);
  const uint64_t drb = row_bytes(d.dtype, m.cols);
  HZ_ASSIGN_OR_RETURN(cuda::DeviceMemory mem, backend_.allocate(drb * static_cast<uint64_t>(m.rows), m.name.c_str()));
  if (d.dtype == m.dtype) {
    HZ_RETURN_IF_ERROR(backend_.upload(mem.data(), m.data, drb * static_cast<uint64_t>(m.rows)));
  } else {
    conversions_.push_back(fmt::format("{}: {} -> {}", m.name, dtype_name(m.dtype), dtype_name(d.dtype)));
    const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(kConvertChunkBytes / drb));
    std::vector<uint8_t> out(static_cast<size_t>(drb * std::min(chunk, m.rows)));
    std::vector<float> row(static_cast<size_t>(m.cols));
    for (int64_t r0 = 0; r0 < m.rows; r0 += chunk) {
      const int64_t n = std::min(chunk, m.rows - r0);
      for (int64_t r = 0; r < n; ++r) {
        kernels::dequantize_row(m.dtype, m.data + static_cast<uint64_t>(r0 + r) * m.row_bytes, row.data(), m.cols);
        uint8_t* dst = out.data() + static_cast<uint64_t>(r) * drb;
        if (d.dtype == DType::kQ8_0) {
          kernels::quantize_row_q8_0(row.data(), reinterpret_cast<BlockQ8_0*>(dst), m.cols);
        } else {
          std::memcpy(dst, row.data(), drb);
        }
      }
      HZ_RETURN_IF_ERROR(backend_.upload(mem.as<uint8_t>() + static_cast<uint64_t>(r0) * drb, out.data(),
                                         drb * static_cast<uint64_t>(n)));
      HZ_RETURN_IF_ERROR(backend_.synchronize());  // `out` is reused
    }
  }
  d.data = mem.data();
  weight_bytes_ += mem.bytes();
  weights_.push_back(std::move(mem));
  return d;
}

Result<const float*> DeviceModel::upload_floats(const std::vector<float>& v, const char* what) {
  if (v.empty()) return static_cast<const float*>(nullptr);
  HZ_ASSIGN_OR_RETURN(cuda::DeviceMemory mem, backend_.allocate(4 * v.size(), what));
  HZ_RETURN_IF_ERROR(backend_.upload(mem.data(), v.data(), 4 * v.size()));
  const float* p = mem.as<float>();
  weight_bytes_ += mem.bytes();
  weights_.push_back(std::move(mem));
  return p;
}

Status DeviceModel::upload_weights(const Model& model) {
  const ModelWeights& w = model.weights();
  HZ_ASSIGN_OR_RETURN(token_embd_, upload_matrix(w.token_embd));
  if (w.output.data == w.token_embd.data) {
    output_ = token_embd_;
  } else {
    HZ_ASSIGN_OR_RETURN(output_, upload_matrix(w.output));
  }
  HZ_ASSIGN_OR_RETURN(output_norm_, upload_floats(w.output_norm, "output_norm.weight"));
  layers_.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    Layer& D = layers_[l];
    HZ_ASSIGN_OR_RETURN(D.wq, upload_matrix(L.wq));
    HZ_ASSIGN_OR_RETURN(D.wk, upload_matrix(L.wk));
    HZ_ASSIGN_OR_RETURN(D.wv, upload_matrix(L.wv));
    HZ_ASSIGN_OR_RETURN(D.wo, upload_matrix(L.wo));
    HZ_ASSIGN_OR_RETURN(D.w_gate, upload_matrix(L.w_gate));
    HZ_ASSIGN_OR_RETURN(D.w_up, upload_matrix(L.w_up));
    HZ_ASSIGN_OR_RETURN(D.w_down, upload_matrix(L.w_down));
    HZ_ASSIGN_OR_RETURN(D.attn_norm, upload_floats(L.attn_norm, "attn_norm.weight"));
    HZ_ASSIGN_OR_RETURN(D.ffn_norm, upload_floats(L.ffn_norm, "ffn_norm.weight"));
    HZ_ASSIGN_OR_RETURN(D.bq, upload_floats(L.bq, "attn_q.bias"));
    HZ_ASSIGN_OR_RETURN(D.bk, upload_floats(L.bk, "attn_k.bias"));
    HZ_ASSIGN_OR_RETURN(D.bv, upload_floats(L.bv, "attn_v.bias"));
    HZ_ASSIGN_OR_RETURN(D.q_norm, upload_floats(L.q_norm, "attn_q_norm.weight"));
    HZ_ASSIGN_OR_RETURN(D.k_norm, upload_floats(L.k_norm, "attn_k_norm.weight"));
  }
  const Rope rope(cfg_.rope, cfg_.head_dim);
  std::vector<float> theta(static_cast<size_t>(cfg_.rope.dim / 2));
  for (int32_t i = 0; i < cfg_.rope.dim / 2; ++i) theta[i] = rope.angle(1, i);
  HZ_ASSIGN_OR_RETURN(rope_theta_, upload_floats(theta, "RoPE frequencies"));
  // KvRotation keeps its signs as [layers][K, V][kv heads][head dim], contiguous (kept until the
  // synchronize below: uploads read their source until then).
  const KvRotation rot(cfg_.num_layers, cfg_.num_kv_heads, cfg_.head_dim);
  const size_t num_signs = static_cast<size_t>(cfg_.num_layers) * 2 * cfg_.num_kv_heads * cfg_.head_dim;
  const std::vector<float> signs(rot.signs(0, 0, 0), rot.signs(0, 0, 0) + num_signs);
  HZ_ASSIGN_OR_RETURN(rotation_, upload_floats(signs, "KV rotation signs"));
  rope_mscale_ = rope.mscale();
  return backend_.synchronize();
}

uint64_t DeviceModel::scratch_bytes() const {
  uint64_t total = 0;
  for (const cuda::DeviceMemory* m : {&s_.x, &s_.xn, &s_.q, &s_.k, &s_.v, &s_.attn, &s_.gate, &s_.up, &s_.xq, &s_.logits,
                                      &s_.tokens, &s_.pos, &s_.upload, &s_.partials})
    total += m->bytes();
  return total;
}

Status DeviceModel::reserve(int64_t tokens, int64_t logit_rows, int64_t upload_bytes, int64_t partial_floats) {
  const ModelConfig& c = cfg_;
  auto grow = [this](cuda::DeviceMemory& m, uint64_t bytes, const char* what) -> Status {
    if (m.bytes() >= bytes) return Status();
    ++s_.generation;
    m = cuda::DeviceMemory();  // free first: the old buffer's memory may be needed for the new one
    HZ_ASSIGN_OR_RETURN(m, backend_.allocate(bytes, what));
    return Status();
  };
  if (tokens > s_.tokens_cap) {
    const int64_t t = grown_capacity(tokens, 16);
    const int64_t widest = std::max<int64_t>({c.hidden, c.q_dim(), c.ffn});
    HZ_RETURN_IF_ERROR(grow(s_.x, 4 * t * c.hidden, "activations"));
    HZ_RETURN_IF_ERROR(grow(s_.xn, 4 * t * std::max(c.hidden, c.q_dim()), "activations"));
    HZ_RETURN_IF_ERROR(grow(s_.q, 4 * t * c.q_dim(), "queries"));
    HZ_RETURN_IF_ERROR(grow(s_.k, 4 * t * c.kv_dim(), "keys"));
    HZ_RETURN_IF_ERROR(grow(s_.v, 4 * t * c.kv_dim(), "values"));
    HZ_RETURN_IF_ERROR(grow(s_.attn, 4 * t * c.q_dim(), "attention output"));
    HZ_RETURN_IF_ERROR(grow(s_.gate, 4 * t * c.ffn, "FFN activations"));
    HZ_RETURN_IF_ERROR(grow(s_.up, 4 * t * c.ffn, "FFN activations"));
    HZ_RETURN_IF_ERROR(grow(s_.xq, t * (widest / kQK8_0) * sizeof(BlockQ8_0), "quantized activations"));
    HZ_RETURN_IF_ERROR(grow(s_.tokens, 4 * t, "token ids"));
    s_.tokens_cap = t;
    xq_source_ = nullptr;
  }
  if (logit_rows > s_.logit_rows_cap) {
    const int64_t r = grown_capacity(logit_rows, 16);
    HZ_RETURN_IF_ERROR(grow(s_.logits, 4 * r * c.vocab, "logits"));
    s_.logit_rows_cap = r;
  }
  if (upload_bytes > s_.upload_cap) {
    const int64_t b = grown_capacity(upload_bytes, 4096);
    HZ_RETURN_IF_ERROR(grow(s_.upload, b, "attention tables"));
    s_.upload_cap = b;
  }
  if (partial_floats > s_.partials_cap) {
    const int64_t f = grown_capacity(partial_floats, 4096);
    HZ_RETURN_IF_ERROR(grow(s_.partials, 4 * f, "attention partials"));
    s_.partials_cap = f;
  }
  return Status();
}

Status DeviceModel::matmul(const DeviceMatrix& w, const float* x, int64_t tokens, float* y, bool same_input) {
  // Only the calls right after this one on the same input may reuse its quantized blocks: a
  // kernel may have rewritten `x` since an older quantization (an f16 matrix between them).
  if (!same_input) xq_source_ = nullptr;
  if (!quantized(w.dtype)) return backend_.matmul(w.dtype, w.data, w.rows, w.cols, x, tokens, y);
  if (!(same_input && xq_source_ == x && xq_rows_ == tokens && xq_cols_ == w.cols)) {
    HZ_RETURN_IF_ERROR(backend_.quantize_q8_0(x, s_.xq.as<BlockQ8_0>(), tokens, w.cols));
    xq_source_ = x;
    xq_rows_ = tokens;
    xq_cols_ = w.cols;
  }
  return backend_.matmul(w.dtype, w.data, w.rows, w.cols, s_.xq.data(), tokens, y);
}

namespace {

// A decode step that a frame holds: every slice one token, logits of that token only, and depths
// whose segment count, rounded up to a power of two, stays within a launch's grid of 65535
// (32768 segments of 512: positions below 16.7M).
bool decode_step(const std::vector<SeqSlice>& batch) {
  for (const auto& s : batch) {
    if (s.num_tokens != 1 || s.all_logits || s.start_pos / cuda::kAttnSegmentTokens >= 32768) return false;
  }
  return !batch.empty();
}

}  // namespace

Status DeviceModel::forward(const std::vector<SeqSlice>& batch, DeviceKvArena& kv, std::vector<float>* logits) {
  HZ_RETURN_IF_ERROR(kv.error());
  if (decode_graphs_ && decode_step(batch) && cuda::graph_bucket(static_cast<int32_t>(batch.size())).has_value())
    return forward_decode(batch, kv, logits);
  const ModelConfig& c = cfg_;
  const int32_t bt = kv.config().block_tokens;
  int64_t total = 0, rows = 0;
  bool prefill = false;
  for (const auto& s : batch) {
    total += s.num_tokens;
    rows += s.all_logits ? s.num_tokens : (s.num_tokens > 0 ? 1 : 0);
    prefill = prefill || s.num_tokens > 1;
  }
  if (total == 0) {
    logits->clear();
    return Status();
  }
  // The step's inputs and attention tables, on the host.
  h_tokens_.clear();
  h_pos_.clear();
  h_seq_.clear();
  std::vector<std::vector<device::DeviceKvBlock>> tables(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeqSlice& s = batch[i];
    HZ_RETURN_IF_ERROR(block_descriptors(s, kv, kv.blocks_for(s.start_pos + s.num_tokens), &tables[i]));
    for (int32_t j = 0; j < s.num_tokens; ++j) {
      h_tokens_.push_back(s.tokens[j]);
      h_pos_.push_back(s.start_pos + j);
      h_seq_.push_back(static_cast<int32_t>(i));
    }
  }
  const int32_t qblock = cuda::attention_query_block(c.num_heads / c.num_kv_heads, prefill);
  HZ_ASSIGN_OR_RETURN(upload_, device::build_attention_upload(tables, h_seq_, h_pos_, bt, c.sliding_window, qblock));
  const int64_t partial_floats = cuda::attention_partial_floats(total, c.num_heads, upload_.max_segments, c.head_dim);
  HZ_RETURN_IF_ERROR(reserve(total, rows, static_cast<int64_t>(upload_.bytes.size()), partial_floats));
  HZ_RETURN_IF_ERROR(backend_.upload(s_.tokens.data(), h_tokens_.data(), 4 * h_tokens_.size()));
  HZ_RETURN_IF_ERROR(backend_.upload(s_.upload.data(), upload_.bytes.data(), upload_.bytes.size()));
  // Final norm of the rows that need logits, gathered contiguously, then the output head.
  norm_rows_.clear();
  int64_t t = 0;
  for (const auto& s : batch) {
    if (s.num_tokens > 0) norm_rows_.push_back({s.all_logits ? t : t + s.num_tokens - 1, s.all_logits ? s.num_tokens : 1});
    t += s.num_tokens;
  }
  HZ_RETURN_IF_ERROR(launch_step(kv, total, rows, qblock));
  logits->resize(static_cast<size_t>(rows) * c.vocab);
  return backend_.download(logits->data(), s_.logits.data(), 4 * logits->size());
}

Status DeviceModel::block_descriptors(const SeqSlice& s, const DeviceKvArena& kv, int32_t num_blocks,
                                      std::vector<device::DeviceKvBlock>* out) const {
  out->clear();
  out->reserve(num_blocks);
  for (int32_t b = 0; b < num_blocks; ++b) {
    const BlockRef r = s.block_table[b];
    if (!r.is_pool())
      return Status(StatusCode::kInternal, fmt::format("--device cuda: block {} of a sequence is not in device memory", b));
    out->push_back(kv.descriptor(r.idx));
  }
  return Status();
}

// A decode step of B sequences in the fixed frame of its graph: B padded to the batch bucket P
// (rows past B: token 0 at position 0 of the arena's pad block), every sequence's block table
// padded to the blocks of S segments (S the power of two that covers the deepest query), so the
// attention tables keep one layout and the launches one shape for every step of the same (P, S):
// a CUDA graph captured once replays with new contents. Per row the operations are the unpadded
// step's (one reduction order for every batch size; segments past a query's are not read), so
// the logits are the same bits.
Status DeviceModel::forward_decode(const std::vector<SeqSlice>& batch, DeviceKvArena& kv, std::vector<float>* logits) {
  const ModelConfig& c = cfg_;
  const int32_t bt = kv.config().block_tokens;
  const int64_t b = static_cast<int64_t>(batch.size());
  const int32_t p = *cuda::graph_bucket(static_cast<int32_t>(b));
  int64_t deepest = 0;
  for (const auto& s : batch) deepest = std::max(deepest, s.start_pos);
  const int32_t segments =
      static_cast<int32_t>(round_up_pow2(deepest / cuda::kAttnSegmentTokens + 1, 1));
  const int32_t frame_blocks = static_cast<int32_t>((int64_t{segments} * cuda::kAttnSegmentTokens + bt - 1) / bt);
  const device::DeviceKvBlock pad = kv.descriptor(kv.pad_block());
  h_tokens_.assign(p, 0);
  h_pos_.assign(p, 0);
  h_seq_.resize(p);
  std::vector<std::vector<device::DeviceKvBlock>> tables(p);
  for (int64_t i = 0; i < p; ++i) {
    h_seq_[i] = static_cast<int32_t>(i);
    if (i < b) {
      const SeqSlice& s = batch[i];
      HZ_RETURN_IF_ERROR(block_descriptors(s, kv, kv.blocks_for(s.start_pos + 1), &tables[i]));
      h_tokens_[i] = s.tokens[0];
      h_pos_[i] = s.start_pos;
    }
    tables[i].resize(frame_blocks, pad);
  }
  HZ_ASSIGN_OR_RETURN(upload_, device::build_attention_upload(tables, h_seq_, h_pos_, bt, c.sliding_window, 1));
  HZ_CHECK(upload_.max_segments <= segments);
  upload_.max_segments = segments;
  const int64_t partial_floats = cuda::attention_partial_floats(p, c.num_heads, segments, c.head_dim);
  HZ_RETURN_IF_ERROR(reserve(p, p, static_cast<int64_t>(upload_.bytes.size()), partial_floats));
  HZ_RETURN_IF_ERROR(backend_.upload(s_.tokens.data(), h_tokens_.data(), 4 * h_tokens_.size()));
  HZ_RETURN_IF_ERROR(backend_.upload(s_.upload.data(), upload_.bytes.data(), upload_.bytes.size()));
  norm_rows_.assign(1, {0, p});
  ++graph_stats_.frames;
  if (!backend_.graphs_supported() || !capture_ok_) {
    HZ_RETURN_IF_ERROR(launch_step(kv, p, p, 1));
  } else {
    // Graphs hold pointers: a new arena or a grown scratch buffer makes them stale.
    if (graphs_arena_ != kv.id() || graphs_generation_ != s_.generation) {
      graphs_.clear();
      graphs_arena_ = kv.id();
      graphs_generation_ = s_.generation;
    }
    const uint64_t key = (static_cast<uint64_t>(p) << 32) | static_cast<uint32_t>(segments);
    auto it = graphs_.find(key);
    if (it != graphs_.end() && it->second != nullptr) {
      HZ_RETURN_IF_ERROR(backend_.launch_graph(*it->second));
      ++graph_stats_.replays;
    } else if (it == graphs_.end()) {
      // First step of this shape: run as it comes (any lazy setup happens outside a capture).
      HZ_RETURN_IF_ERROR(launch_step(kv, p, p, 1));
      graphs_.emplace(key, nullptr);
    } else {
      // Nothing runs while capturing: a capture that fails leaves the step to run as it comes, and
      // decode steps run without graphs from then on (said once).
      std::unique_ptr<cuda::CapturedGraph> graph;
      Status captured = backend_.begin_capture();
      if (captured.ok()) {
        captured = launch_step(kv, p, p, 1);
        Result<std::unique_ptr<cuda::CapturedGraph>> g = backend_.end_capture();  // ends the capture whatever happened inside it
        if (captured.ok()) captured = g.status();
        if (captured.ok()) graph = std::move(g).value();
      }
      if (!captured.ok()) {
        capture_ok_ = false;
        graphs_.clear();
        HZ_LOG_WARN("--device cuda: decode steps run without CUDA graphs: capturing one failed: {}", captured.message());
        HZ_RETURN_IF_ERROR(launch_step(kv, p, p, 1));
      } else {
        it->second = std::move(graph);
        HZ_RETURN_IF_ERROR(backend_.launch_graph(*it->second));
        ++graph_stats_.captures;
      }
    }
  }
  logits->resize(static_cast<size_t>(b) * c.vocab);
  return backend_.download(logits->data(), s_.logits.data(), 4 * logits->size());
}

// The launches of one step over the uploaded inputs (s_.tokens, s_.upload laid out as upload_):
// `total` tokens, logits of `rows` rows gathered by norm_rows_ into s_.logits.
Status DeviceModel::launch_step(DeviceKvArena& kv, int64_t total, int64_t rows, int32_t qblock) {
  const ModelConfig& c = cfg_;
  const int32_t bt = kv.config().block_tokens;
  xq_source_ = nullptr;
  float* x = s_.x.as<float>();
  float* xn = s_.xn.as<float>();
  float* q = s_.q.as<float>();
  float* k = s_.k.as<float>();
  float* v = s_.v.as<float>();
  float* attn = s_.attn.as<float>();
  float* gate = s_.gate.as<float>();
  float* up = s_.up.as<float>();

  cuda::PagedAttnArgs pa;
  device::bind_attention_upload(upload_, s_.upload.as<uint8_t>(), &pa);  // its queries are the step's `total` tokens
  pa.arena = kv.data();
  pa.qblock_size = qblock;
  pa.num_heads = c.num_heads;
  pa.num_kv_heads = c.num_kv_heads;
  pa.head_dim = c.head_dim;
  pa.block_tokens = bt;
  pa.window = c.sliding_window;
  pa.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  pa.q = q;
  pa.partials = s_.partials.as<float>();
  pa.out = attn;
  cuda::KvWriteArgs kw;
  kw.codec = kv.config().codec;
  kw.arena = kv.data();
  kw.blocks = pa.blocks;
  kw.seq_block_begin = pa.seq_block_begin;
  kw.query_seq = pa.query_seq;
  kw.query_pos = pa.query_pos;
  kw.num_tokens = total;
  kw.num_kv_heads = c.num_kv_heads;
  kw.head_dim = c.head_dim;
  kw.block_tokens = bt;
  kw.k = k;
  kw.v = v;
  const bool neox = c.rope.layout == RopeLayout::kNeox;
  const int32_t group = c.num_heads / c.num_kv_heads;

  HZ_RETURN_IF_ERROR(backend_.embedding(token_embd_.dtype, token_embd_.data, token_embd_.rows, c.hidden,
                                        s_.tokens.as<int32_t>(), total, x));
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const Layer& L = layers_[l];
    HZ_RETURN_IF_ERROR(backend_.rms_norm(x, L.attn_norm, xn, total, c.hidden, c.rms_eps));
    HZ_RETURN_IF_ERROR(matmul(L.wq, xn, total, q));
    HZ_RETURN_IF_ERROR(matmul(L.wk, xn, total, k, /*same_input=*/true));
    HZ_RETURN_IF_ERROR(matmul(L.wv, xn, total, v, /*same_input=*/true));
    if (L.bq != nullptr) HZ_RETURN_IF_ERROR(backend_.add_rows(q, L.bq, total, c.q_dim()));
    if (L.bk != nullptr) HZ_RETURN_IF_ERROR(backend_.add_rows(k, L.bk, total, c.kv_dim()));
    if (L.bv != nullptr) HZ_RETURN_IF_ERROR(backend_.add_rows(v, L.bv, total, c.kv_dim()));
    if (L.q_norm != nullptr) HZ_RETURN_IF_ERROR(backend_.rms_norm(q, L.q_norm, q, total * c.num_heads, c.head_dim, c.rms_eps));
    if (L.k_norm != nullptr) HZ_RETURN_IF_ERROR(backend_.rms_norm(k, L.k_norm, k, total * c.num_kv_heads, c.head_dim, c.rms_eps));
    HZ_RETURN_IF_ERROR(backend_.rope(q, total, c.num_heads, c.head_dim, pa.query_pos, rope_theta_, c.rope.dim, rope_mscale_, neox));
    HZ_RETURN_IF_ERROR(backend_.rope(k, total, c.num_kv_heads, c.head_dim, pa.query_pos, rope_theta_, c.rope.dim, rope_mscale_, neox));
    // A rotated cache holds R K and R V (as the CPU's): queries get the keys' R, outputs R^T.
    const int64_t per_stream = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
    const float* k_signs = rotation_ + (2 * static_cast<int64_t>(l)) * per_stream;
    const float* v_signs = k_signs + per_stream;
    if (kv.config().rotated_k) {
      HZ_RETURN_IF_ERROR(backend_.hadamard_heads(q, total, c.num_heads, c.head_dim, k_signs, group, 0));
      HZ_RETURN_IF_ERROR(backend_.hadamard_heads(k, total, c.num_kv_heads, c.head_dim, k_signs, 1, 0));
    }
    if (kv.config().rotated_v) HZ_RETURN_IF_ERROR(backend_.hadamard_heads(v, total, c.num_kv_heads, c.head_dim, v_signs, 1, 0));
    kw.layer_offset = pa.layer_offset = static_cast<uint64_t>(kv.geometry().layer_offset(l));
    HZ_RETURN_IF_ERROR(backend_.kv_write(kw));
    HZ_RETURN_IF_ERROR(backend_.paged_attention(pa));
    if (kv.config().rotated_v) HZ_RETURN_IF_ERROR(backend_.hadamard_heads(attn, total, c.num_heads, c.head_dim, v_signs, group, 1));
    HZ_RETURN_IF_ERROR(matmul(L.wo, attn, total, xn));
    HZ_RETURN_IF_ERROR(backend_.add(x, xn, total * c.hidden));
    HZ_RETURN_IF_ERROR(backend_.rms_norm(x, L.ffn_norm, xn, total, c.hidden, c.rms_eps));
    HZ_RETURN_IF_ERROR(matmul(L.w_gate, xn, total, gate));
    HZ_RETURN_IF_ERROR(matmul(L.w_up, xn, total, up, /*same_input=*/true));
    HZ_RETURN_IF_ERROR(backend_.swiglu(gate, up, total * c.ffn));
    HZ_RETURN_IF_ERROR(matmul(L.w_down, gate, total, xn));
    HZ_RETURN_IF_ERROR(backend_.add(x, xn, total * c.hidden));
  }
  int64_t row = 0;
  for (const auto& [first, n] : norm_rows_) {
    HZ_RETURN_IF_ERROR(backend_.rms_norm(x + first * c.hidden, output_norm_, xn + row * c.hidden, n, c.hidden, c.rms_eps));
    row += n;
  }
  HZ_CHECK(row == rows);
  return matmul(output_, xn, rows, s_.logits.as<float>());
}

}  // namespace hz
