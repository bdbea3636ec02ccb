#include "planner/capacity_plan.h"

#include <algorithm>

#include "base/byte_size.h"
#include "base/checked_math.h"

namespace hz {

namespace {

uint64_t sat_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }
// Saturating: a request for 2^20 sequences of 2^32 tokens must compare as "does not fit", not wrap.
uint64_t sat_add(uint64_t a, uint64_t b) { return checked_add(a, b).value_or(UINT64_MAX); }
uint64_t sat_mul(uint64_t a, uint64_t b) { return checked_mul(a, b).value_or(UINT64_MAX); }

uint64_t ffn_width_per_token(const ModelShape& s) {
  uint64_t moe = s.num_experts_used * s.moe_ffn + s.num_shared_experts * s.shared_expert_ffn;
  return std::max(s.ffn, moe);
}

}  // namespace

RuntimeOverhead runtime_overhead(const ModelShape& s, const PlanOptions& o, uint64_t num_seqs) {
  RuntimeOverhead r;
  const uint64_t ffn = ffn_width_per_token(s);
  uint64_t q_dim, kv_dim;
  if (s.is_mla()) {
    q_dim = s.num_heads * (s.qk_nope_head_dim + s.qk_rope_head_dim);
    kv_dim = s.num_heads * (s.qk_nope_head_dim + s.v_head_dim);  // K/V expanded from the latent
  } else {
    q_dim = s.num_heads * s.head_dim;
    kv_dim = 2 * s.num_kv_heads * s.head_dim;
  }
  // Per token of the chunk: residual, normed input and output (3 x hidden), Q and the attention
  // output, K/V, gate/up/product of the FFN, router logits.
  const uint64_t per_token = 4 * (3 * s.hidden + 2 * q_dim + kv_dim + 3 * ffn + s.num_experts);
  r.activations = std::max<uint64_t>(o.prefill_chunk_tokens, num_seqs) * per_token;
  r.logits = std::max<uint64_t>(num_seqs, 1) * s.vocab * 4;
  const uint64_t widest = std::max({s.hidden, ffn, q_dim});
  r.thread_buffers = o.num_threads * ((uint64_t{256} << 10) + 8 * widest);
  r.base = uint64_t{64} << 20;
  r.kv_staging = kv_staging_bytes(s.kv_geometry(), o.kv, o.block_tokens, o.prefill_chunk_tokens, num_seqs);
  return r;
}

uint64_t kv_far_window_bytes(const KvGeometry& g, const KvPrecision& p, uint64_t block_tokens, uint64_t context_tokens,
                             uint64_t ram_tokens) {
  if (block_tokens == 0 || g.num_layers == 0 || context_tokens <= ram_tokens) return 0;
  const uint64_t far_blocks = (context_tokens - ram_tokens + block_tokens - 1) / block_tokens;
  return sat_mul(far_blocks, kv_block_bytes(g, p.arena_types(), block_tokens) / g.num_layers);
}

uint64_t kv_staging_bytes(const KvGeometry& g, const KvPrecision& p, uint64_t block_tokens, uint64_t prefill_chunk_tokens,
                          uint64_t num_seqs) {
  const bool window = p.mixed();
  const KvType exact = kv_staging_type(p);
  const bool staged = window || !(p.hot_types().same() && p.hot == exact);
  if (!staged || block_tokens == 0) return 0;
  const uint64_t w = window ? p.hot_window : 0;
  // A query reads exactly the block it is in and hot every block overlapping its window; a chunk
  // writes (and reads exactly) every block it spans; a block not aligned to either adds one.
  const uint64_t per_seq_blocks = (w + block_tokens - 1) / block_tokens + 1;
  const uint64_t chunk_blocks = (prefill_chunk_tokens + block_tokens - 1) / block_tokens + 1;
  uint64_t bytes = (std::max<uint64_t>(num_seqs, 1) * per_seq_blocks + chunk_blocks) * kv_block_bytes(g, exact, block_tokens);
  if (window) {
    const uint64_t cold = kv_bytes_for_tokens(g, p.cold_types(), block_tokens, w);
    const uint64_t hot = kv_bytes_for_tokens(g, p.hot_types(), block_tokens, w);
    bytes = cold >= hot ? bytes + std::max<uint64_t>(num_seqs, 1) * (cold - hot)
                        : bytes - std::min(bytes, std::max<uint64_t>(num_seqs, 1) * (hot - cold));
  }
  return bytes;
}

uint64_t max_tokens_per_seq(const KvGeometry& g, const KvPrecision& p, uint64_t block_tokens, uint64_t kv_budget,
                            uint64_t num_seqs) {
  if (num_seqs == 0) return 0;
  const uint64_t per_seq = kv_budget / num_seqs;
  const uint64_t hot_block = kv_block_bytes(g, p.hot_types(), block_tokens);
  if (hot_block == 0) return 0;
  if (!p.mixed()) return per_seq / hot_block * block_tokens;
  const uint64_t hot_full = kv_bytes_for_tokens(g, p.hot_types(), block_tokens, p.hot_window);
  if (per_seq < hot_full) return std::min(p.hot_window, per_seq / hot_block * block_tokens);
  const uint64_t cold_block = kv_block_bytes(g, p.cold_types(), block_tokens);
  return p.hot_window + (per_seq - hot_full) / cold_block * block_tokens;
}

namespace {

struct Ctx {
  const ModelShape& s;
  const PlanOptions& o;
  KvGeometry g;
  uint64_t weights;

  uint64_t kv_budget(uint64_t seqs, uint64_t weights_bytes) const {
    return sat_sub(o.memory_bytes, weights_bytes + runtime_overhead(s, o, seqs).total());
  }
  uint64_t need(const KvPrecision& p, uint64_t seqs, uint64_t ctx, uint64_t weights_bytes) const {
    return sat_add(weights_bytes + runtime_overhead(s, o, seqs).total(), sat_mul(seqs, kv_bytes_for_tokens(g, p, o.block_tokens, ctx)));
  }
  bool fits(const KvPrecision& p, uint64_t seqs, uint64_t ctx, uint64_t weights_bytes) const {
    return need(p, seqs, ctx, weights_bytes) <= o.memory_bytes;
  }
  uint64_t max_ctx(const KvPrecision& p, uint64_t seqs, uint64_t weights_bytes) const {
    return max_tokens_per_seq(g, p, o.block_tokens, kv_budget(seqs, weights_bytes), seqs);
  }
};

std::vector<Remedy> find_remedies(const Ctx& c, uint64_t ctx, const std::string& current_weight_type, double current_bpw) {
  std::vector<Remedy> out;
  const PlanOptions& o = c.o;
  const uint64_t seqs = o.max_num_seqs;
  const KvType hot = o.kv.hot;

  {  // 1. shorter context
    Remedy r{"shorter_context"};
    r.value = c.max_ctx(o.kv, seqs, c.weights);
    r.fits = r.value > 0;
    r.flags = fmt::format("--max-model-len {}", r.value);
    r.text = r.fits ? fmt::format("shorter context: {} tokens per sequence instead of {}", r.value, ctx)
                    : fmt::format("shorter context: no context fits; weights and runtime alone need {} of {}",
                                  format_bytes(c.weights + runtime_overhead(c.s, o, seqs).total()),
                                  format_bytes(o.memory_bytes));
    out.push_back(r);
  }
  if (kv_type_element_bits(hot) > 4) {  // 2. a more compact KV type
    Remedy r{"quantized_kv"};
    KvType last = KvType::kInt4;
    for (KvType t : {KvType::kFp8, KvType::kInt8, KvType::kInt4}) {
      if (kv_type_element_bits(t) >= kv_type_element_bits(hot)) continue;
      last = t;
      KvPrecision p{t, 0, t};
      if (c.fits(p, seqs, ctx, c.weights)) {
        r.fits = true;
        r.flags = fmt::format("--kv-cache-dtype {}", kv_type_name(t));
        r.value = c.max_ctx(p, seqs, c.weights);
        r.text = fmt::format("quantized KV: {} KV fits {} tokens per sequence (KV {})", kv_type_name(t),
                             std::min(r.value, ctx), format_bytes(seqs * kv_bytes_for_tokens(c.g, t, o.block_tokens, ctx)));
        break;
      }
    }
    if (!r.fits) {
      KvPrecision p{last, 0, last};
      r.flags = fmt::format("--kv-cache-dtype {}", kv_type_name(last));
      r.value = c.max_ctx(p, seqs, c.weights);
      r.text = fmt::format("quantized KV: even {} KV fits only {} tokens per sequence", kv_type_name(last), r.value);
    }
    out.push_back(r);
  }
  if (kv_type_element_bits(hot) > 4) {  // 3. mixed precision: recent tokens sharp, older ones compact
    Remedy r{"mixed_precision_window"};
    KvType cold = (o.kv.hot_window > 0 && kv_type_element_bits(o.kv.cold) < kv_type_element_bits(hot)) ? o.kv.cold : KvType::kInt4;
    uint64_t w = o.kv.hot_window > 0 ? o.kv.hot_window : std::min<uint64_t>(4096, ctx);
    uint64_t best_w = 0;
    for (uint64_t win = w; win >= o.block_tokens; win /= 2) {
      if (c.fits(KvPrecision{hot, win, cold}, seqs, ctx, c.weights)) {
        best_w = win;
        break;
      }
    }
    if (best_w > 0) {
      r.fits = true;
      r.value = best_w;
      r.flags = fmt::format("--kv-hot-window {} --kv-cold-dtype {}", best_w, kv_type_name(cold));
      r.text = fmt::format("mixed-precision window: the newest {} tokens at {}, older ones at {}: {} tokens fit", best_w,
                           kv_type_name(hot), kv_type_name(cold), ctx);
    } else {
      uint64_t win = std::max<uint64_t>(o.block_tokens, std::min<uint64_t>(w, 4096));
      r.value = c.max_ctx(KvPrecision{hot, win, cold}, seqs, c.weights);
      r.flags = fmt::format("--kv-hot-window {} --kv-cold-dtype {}", win, kv_type_name(cold));
      r.text = fmt::format("mixed-precision window: {} tokens at {} + {} fits only {} tokens per sequence", win,
                           kv_type_name(hot), kv_type_name(cold), r.value);
    }
    out.push_back(r);
  }
  {  // 4. disk tier: the far blocks of running sequences live on disk (kv/far_tier.h)
    Remedy r{"cold_tier"};
    uint64_t ram_kv = c.kv_budget(seqs, c.weights);
    uint64_t want = sat_mul(seqs, kv_bytes_for_tokens(c.g, o.kv, o.block_tokens, ctx));
    // RAM must hold what a step writes and reads exactly: one prefill chunk per sequence, plus the
    // hot window and the block being written.
    const uint64_t min_tokens = o.prefill_chunk_tokens + o.kv.hot_window + 2 * o.block_tokens;
    r.fits = ram_kv >= sat_mul(seqs, kv_bytes_for_tokens(c.g, o.kv, o.block_tokens, min_tokens));
    r.value = sat_sub(want, ram_kv);
    r.flags = fmt::format("--kv-disk-dir DIR --kv-budget {}", format_bytes(ram_kv));
    r.text = r.fits ? fmt::format("disk tier: keep {} of KV in RAM and {} on disk (slower at depth)", format_bytes(ram_kv),
                                  format_bytes(r.value))
                    : "disk tier: not enough RAM left for one prefill chunk of KV per sequence";
    out.push_back(r);
  }
  if (seqs > 1) {  // 5. fewer sequences
    Remedy r{"fewer_sequences"};
    for (uint64_t k = seqs - 1; k >= 1; --k) {
      if (c.fits(o.kv, k, ctx, c.weights)) {
        r.fits = true;
        r.value = k;
        break;
      }
    }
    r.flags = fmt::format("--max-num-seqs {}", r.value);
    r.text = r.fits ? fmt::format("fewer sequences: {} concurrent sequences of {} tokens fit", r.value, ctx)
                    : fmt::format("fewer sequences: not even one sequence of {} tokens fits", ctx);
    out.push_back(r);
  }
  {  // 6. a smaller weight type
    Remedy r{"smaller_weights"};
    std::vector<DType> smaller;
    for (DType t : plannable_weight_types()) {
      if (bits_per_weight(t) < current_bpw - 1e-9) smaller.push_back(t);
    }
    std::stable_sort(smaller.begin(), smaller.end(), [](DType a, DType b) { return bits_per_weight(a) > bits_per_weight(b); });
    for (DType t : smaller) {
      uint64_t wb = weights_bytes(c.s, t);
      if (c.fits(o.kv, seqs, ctx, wb)) {
        r.fits = true;
        r.value = wb;
        r.flags = fmt::format("--weight-type {}", dtype_name(t));
        r.text = fmt::format("smaller weights: {} weights take {} instead of {} ({})", dtype_name(t), format_bytes(wb),
                             format_bytes(c.weights), current_weight_type);
        break;
      }
    }
    if (!r.fits && !smaller.empty()) {
      DType t = smaller.back();
      r.value = weights_bytes(c.s, t);
      r.flags = fmt::format("--weight-type {}", dtype_name(t));
      r.text = fmt::format("smaller weights: even {} weights ({}) leave room for only {} tokens per sequence", dtype_name(t),
                           format_bytes(r.value), c.max_ctx(o.kv, seqs, r.value));
    }
    if (!smaller.empty()) out.push_back(r);
  }
  return out;
}

}  // namespace

Result<PlanReport> make_plan(const ModelShape& s, const PlanOptions& o) {
  HZ_RETURN_IF_ERROR(s.validate());
  if (o.memory_bytes == 0) return invalid_argument("--memory: the memory budget is 0");
  if (o.max_num_seqs == 0) return invalid_argument("--max-num-seqs must be at least 1");
  if (o.max_num_seqs > (1u << 20)) return invalid_argument("--max-num-seqs {} is implausibly large", o.max_num_seqs);
  if (o.block_tokens == 0 || o.block_tokens > 4096) return invalid_argument("block size {} is out of range", o.block_tokens);
  if (o.max_model_len > (uint64_t{1} << 32)) return invalid_argument("--max-model-len {} is implausibly large", o.max_model_len);
  if (o.kv.hot_window > (uint64_t{1} << 32)) return invalid_argument("--kv-hot-window {} is implausibly large", o.kv.hot_window);

  PlanReport r;
  r.shape = s;
  r.options = o;
  r.params = count_params(s);
  double current_bpw;
  if (o.weight_type) {
    r.weight_type = dtype_name(*o.weight_type);
    r.weights_bytes = weights_bytes(s, *o.weight_type);
    current_bpw = bits_per_weight(*o.weight_type);
  } else if (s.file_weight_bytes) {
    r.weight_type = s.file_weight_type.empty() ? "file" : s.file_weight_type;
    r.weights_bytes = *s.file_weight_bytes;
    current_bpw = r.params.total > 0 ? 8.0 * r.weights_bytes / r.params.total : 32;
  } else {
    // A Hugging Face checkpoint as shipped: its torch_dtype, bf16 when unstated.
    DType t = s.checkpoint_dtype == "float32" ? DType::kF32 : s.checkpoint_dtype == "float16" ? DType::kF16 : DType::kBF16;
    if (!s.prequantized.empty()) {
      // Pre-quantized matrices load as q8_0; the embedding and head keep the checkpoint's type.
      r.weight_type = fmt::format("q8_0 (from {})", s.prequantized);
      r.weights_bytes = weights_bytes(s, DType::kQ8_0, t);
      current_bpw = bits_per_weight(DType::kQ8_0);
    } else {
      r.weight_type = dtype_name(t);
      r.weights_bytes = weights_bytes(s, t);
      current_bpw = bits_per_weight(t);
    }
  }
  for (DType t : plannable_weight_types()) r.weights_bytes_by_type.emplace_back(dtype_name(t), weights_bytes(s, t));

  const KvGeometry g = s.kv_geometry();
  for (KvType t : all_kv_types()) r.kv_bytes_per_token.emplace_back(kv_type_name(t), kv_bytes_per_token(g, t, o.block_tokens));
  r.context_limit = s.max_positions;
  r.requested_context = o.max_model_len > 0 ? o.max_model_len : (s.max_positions > 0 ? s.max_positions : 4096);
  r.overhead = runtime_overhead(s, o, o.max_num_seqs);

  Ctx c{s, o, g, r.weights_bytes};
  std::vector<KvPrecision> rows;
  for (KvType t : all_kv_types()) {
    if (!kv_type_cold_only(t)) rows.push_back(KvPrecision{t, 0, t});  // int3 / int2: not usable alone
  }
  if (o.kv.mixed() || !o.kv.hot_types().same()) rows.push_back(o.kv);
  for (const KvPrecision& p : rows) {
    MaxContextRow row{kv_precision_name(p), {}};
    for (uint64_t conc : o.concurrencies) {
      MaxContextCell cell{conc, c.max_ctx(p, conc, r.weights_bytes), false};
      if (r.context_limit > 0 && cell.max_tokens > r.context_limit) {
        cell.max_tokens = r.context_limit;
        cell.limited_by_model = true;
      }
      row.cells.push_back(cell);
    }
    r.max_context.push_back(std::move(row));
  }

  r.requested_kv_bytes = sat_mul(o.max_num_seqs, kv_bytes_for_tokens(g, o.kv, o.block_tokens, r.requested_context));
  r.requested_kv_bytes_per_token =
      static_cast<double>(kv_bytes_for_tokens(g, o.kv, o.block_tokens, r.requested_context)) / r.requested_context;
  r.required_bytes = sat_add(r.weights_bytes + r.overhead.total(), r.requested_kv_bytes);
  r.fits = r.required_bytes <= o.memory_bytes;
  if (!r.fits) r.remedies = find_remedies(c, r.requested_context, r.weight_type, current_bpw);
  return r;
}

Status check_startup_fits(const PlanReport& r) {
  const KvGeometry g = r.shape.kv_geometry();
  const PlanOptions& o = r.options;
  uint64_t one_seq = kv_bytes_for_tokens(g, o.kv, o.block_tokens, r.requested_context);
  uint64_t need = r.weights_bytes + r.overhead.total() + one_seq;
  if (need <= o.memory_bytes) return Status();
  std::string hint;
  for (const auto& rem : r.remedies) {
    if (rem.fits) {
      hint = fmt::format("; try {} ({})", rem.flags, rem.text);
      break;
    }
  }
  return out_of_range(
      "the model does not fit: weights {} + runtime {} + KV for one sequence of {} tokens at {} ({}) = {}, but the "
      "memory budget is {}{}",
      format_bytes(r.weights_bytes), format_bytes(r.overhead.total()), r.requested_context, kv_precision_name(o.kv),
      format_bytes(one_seq), format_bytes(need), format_bytes(o.memory_bytes), hint);
}

}  // namespace hz
