// `horizon synth -o OUT.gguf`: a random-weight model of any real shape (llama or qwen2
// architecture, dense or MoE), seeded and reproducible, with a tokenizer copied from another GGUF
// or a byte-level SentencePiece-style vocabulary. Streamed: one tensor in memory at a time.
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/thread_pool.h"
#include "format/gguf.h"
#include "kernels/kernels.h"
#include "tools/cli.h"
#include "tools/progress.h"

namespace hz::cli {
namespace {

struct SynthShape {
  std::string arch = "llama";
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
  int64_t experts = 0, experts_used = 0;
  int64_t ctx = 4096;
  double rope_base = 10000.0;
  double rms_eps = 1e-5;
  bool tied = false;      // no output.weight: the head reuses token_embd
  bool qkv_bias = false;  // qwen2
  std::string tokenizer;  // GGUF to copy tokenizer.* from ("" = byte-level vocab)
};

std::string shared_dir() {
  const char* env = std::getenv("HORIZON_SHARED_DIR");
  return (env != nullptr && *env != '\0') ? env : HORIZON_SHARED_DIR_DEFAULT;
}

bool preset(const std::string& name, SynthShape* s) {
  const std::string vocab_dir = shared_dir() + "/testdata/vocab/";
  if (name == "llama-1b") {
    *s = SynthShape{"llama", 16, 2048, 32, 8, 8192, 32000, 0, 0, 131072, 500000.0, 1e-5, false, false,
                    vocab_dir + "ggml-vocab-llama-spm.gguf"};
  } else if (name == "llama-8b") {
    *s = SynthShape{"llama", 32, 4096, 32, 8, 14336, 128256, 0, 0, 131072, 500000.0, 1e-5, false, false,
                    vocab_dir + "ggml-vocab-llama-bpe.gguf"};
  } else if (name == "qwen2-0.5b") {
    *s = SynthShape{"qwen2", 24, 896, 14, 2, 4864, 151936, 0, 0, 32768, 1000000.0, 1e-6, true, true, ""};
  } else if (name == "mixtral-tiny") {
    *s = SynthShape{"llama", 4, 512, 8, 2, 1024, 32000, 8, 2, 32768, 1000000.0, 1e-5, false, false,
                    vocab_dir + "ggml-vocab-llama-spm.gguf"};
  } else {
    return false;
  }
  return true;
}

struct SynthOptions {
  std::string out;
  std::string preset_name;
  // kUnset: the preset's (any other value is checked, negative ones included).
  static constexpr int64_t kUnset = INT64_MIN;
  int64_t layers = kUnset, hidden = kUnset, heads = kUnset, kv_heads = kUnset, ffn = kUnset, vocab = kUnset;
  int64_t experts = kUnset, experts_used = kUnset, ctx = kUnset;
  std::string type = "f16";
  bool quiet = false;
  uint64_t seed = 42;
  std::string tokenizer_from;
  int threads = 0;
  // Outliers like trained models have: these many channels of every KV head's K scaled by
  // outlier_scale (RoPE pairs, the same channels in all heads of a layer, chosen per layer from
  // the seed), and the output head scaled by output_scale (confident predictions).
  int64_t outlier_channels = 0;
  float outlier_scale = 20.0f;
  float output_scale = 1.0f;
};

// ---- deterministic random numbers: a value depends only on (seed, tensor, row, column) ----

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Approximately normal(0, stddev): the sum of four 16-bit uniforms (Irwin-Hall), cheap enough for
// billions of weights.
void random_row(uint64_t seed, uint64_t tensor_idx, uint64_t row, float stddev, float* out, int64_t n) {
  uint64_t state = seed ^ (tensor_idx * 0xD1B54A32D192ED03ull) ^ (row * 0x8CB92BA72F3D8DD7ull);
  splitmix64(state);
  const float scale = stddev / (65535.0f * 0.57735027f);  // sd of the sum of 4 U(0,1) is sqrt(1/3)
  for (int64_t i = 0; i < n; ++i) {
    uint64_t r = splitmix64(state);
    float sum = static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
    out[i] = (sum - 2.0f * 65535.0f) * scale;
  }
}

enum class Fill { kRandom, kOnes, kZeros };

// A factor for each row of a tensor: `all`, times `factor` for rows r with r % period in `rows`.
struct RowScale {
  float all = 1.0f;
  uint64_t period = 0;
  std::vector<uint64_t> rows;  // sorted
  float factor = 1.0f;
  float at(uint64_t r) const {
    if (period == 0 || !std::binary_search(rows.begin(), rows.end(), r % period)) return all;
    return all * factor;
  }
};

struct TensorPlan {
  std::string name;
  DType dtype;
  std::vector<uint64_t> dims;
  Fill fill;
  RowScale scale = {};
};

// The outlier channels of one layer's K heads: `count` channels (count / 2 RoPE pairs 2i, 2i + 1)
// of a head of `head_dim`, chosen from (seed, layer).
std::vector<uint64_t> outlier_channels(uint64_t seed, int64_t layer, int64_t count, uint64_t head_dim) {
  uint64_t state = seed ^ (static_cast<uint64_t>(layer + 1) * 0xA24BAED4963EE407ull);
  std::vector<uint64_t> pairs;
  while (static_cast<int64_t>(pairs.size()) < count / 2) {
    const uint64_t p = splitmix64(state) % (head_dim / 2);
    if (std::find(pairs.begin(), pairs.end(), p) == pairs.end()) pairs.push_back(p);
  }
  std::vector<uint64_t> out;
  for (uint64_t p : pairs) {
    out.push_back(2 * p);
    out.push_back(2 * p + 1);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status validate(const SynthShape& s) {
  auto range = [](const char* flag, int64_t v, int64_t lo, int64_t hi) -> Status {
    if (v < lo || v > hi) return invalid_argument("{} {} is out of range ({}..{})", flag, v, lo, hi);
    return Status();
  };
  HZ_RETURN_IF_ERROR(range("--layers", s.layers, 1, 512));
  HZ_RETURN_IF_ERROR(range("--hidden", s.hidden, 2, 65536));
  HZ_RETURN_IF_ERROR(range("--heads", s.heads, 1, 1024));
  HZ_RETURN_IF_ERROR(range("--kv-heads", s.kv_heads, 1, s.heads));
  HZ_RETURN_IF_ERROR(range("--ffn", s.ffn, 1, 1 << 20));
  HZ_RETURN_IF_ERROR(range("--vocab", s.vocab, 1, 1 << 22));
  HZ_RETURN_IF_ERROR(range("--ctx", s.ctx, 1, int64_t{1} << 24));
  if (s.hidden % s.heads != 0) return invalid_argument("--hidden {} is not a multiple of --heads {}", s.hidden, s.heads);
  if ((s.hidden / s.heads) % 2 != 0) return invalid_argument("head size {} (hidden / heads) must be even for RoPE", s.hidden / s.heads);
  if (s.heads % s.kv_heads != 0) return invalid_argument("--heads {} is not a multiple of --kv-heads {}", s.heads, s.kv_heads);
  if (s.experts < 0 || s.experts > 1024) return invalid_argument("--experts {} is out of range (0..1024)", s.experts);
  if (s.experts > 0 && (s.experts_used < 1 || s.experts_used > s.experts))
    return invalid_argument("--experts-used {} must be between 1 and --experts {}", s.experts_used, s.experts);
  if (s.experts == 0 && s.experts_used > 0) return invalid_argument("--experts-used needs --experts");
  return Status();
}

// A SentencePiece-style vocabulary with byte fallback: <unk> <s> </s>, the 256 byte tokens, then
// unused filler tokens up to the vocabulary size. Any text tokenizes (as bytes).
void add_byte_vocab(GgufWriter& w, int64_t vocab) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0.f, 0.f, 0.f};
  std::vector<int32_t> types = {2, 3, 3};  // UNKNOWN, CONTROL, CONTROL
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    scores.push_back(0.f);
    types.push_back(6);  // BYTE
  }
  for (int64_t i = static_cast<int64_t>(tokens.size()); i < vocab; ++i) {
    tokens.push_back(fmt::format("<unused_{}>", i));
    scores.push_back(-1e9f);
    types.push_back(5);  // UNUSED
  }
  w.set_str("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", GgufValue::make_str_array(std::move(tokens)));
  w.set("tokenizer.ggml.scores", GgufValue::make_f32_array(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::make_i32_array(types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
}

uint32_t file_type(DType t) {  // llama.cpp's llama_ftype
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ8_0: return 7;
    case DType::kBF16: return 32;
    default: return 0;
  }
}

int run_synth(const SynthOptions& o) {
  SynthShape s;
  if (!o.preset_name.empty()) {
    if (!preset(o.preset_name, &s)) return fail(fmt::format("--preset: unknown preset '{}' (llama-1b, llama-8b, qwen2-0.5b, mixtral-tiny)", o.preset_name));
  } else {
    s = SynthShape{"llama", 2, 64, 4, 2, 128, 512, 0, 0, 4096, 10000.0, 1e-5, false, false, ""};
  }
  auto over = [](int64_t flag, int64_t& field) {
    if (flag != SynthOptions::kUnset) field = flag;
  };
  over(o.layers, s.layers);
  over(o.hidden, s.hidden);
  over(o.heads, s.heads);
  over(o.kv_heads, s.kv_heads);
  over(o.ffn, s.ffn);
  over(o.experts, s.experts);
  over(o.experts_used, s.experts_used);
  over(o.ctx, s.ctx);
  if (o.experts == 0) s.experts_used = 0;
  // Experts without a count of used ones: two, as Mixtral's.
  if (s.experts > 0 && s.experts_used == 0 && o.experts_used == SynthOptions::kUnset) s.experts_used = std::min<int64_t>(2, s.experts);
  if (o.vocab != SynthOptions::kUnset) {
    s.vocab = o.vocab;
    s.tokenizer.clear();  // an explicit size replaces the preset's tokenizer with a byte-level one
  }
  if (!o.tokenizer_from.empty()) s.tokenizer = o.tokenizer_from;

  auto dtype = dtype_from_name(o.type);
  if (!dtype || !(*dtype == DType::kF32 || *dtype == DType::kF16 || *dtype == DType::kBF16 || *dtype == DType::kQ8_0 ||
                  *dtype == DType::kQ4_0))
    return fail(fmt::format("--type: '{}' is not one of f32, f16, bf16, q8_0, q4_0", o.type));

  GgufWriter w;
  w.set_str("general.architecture", s.arch);
  w.set_str("general.name", o.preset_name.empty() ? "horizon-synth" : "horizon-synth " + o.preset_name);
  w.set_u32("general.file_type", file_type(*dtype));
  if (*dtype == DType::kQ8_0 || *dtype == DType::kQ4_0) w.set_u32("general.quantization_version", 2);

  std::unique_ptr<GgufFile> tok_src;
  if (!s.tokenizer.empty()) {
    auto f = GgufFile::open(s.tokenizer);
    if (!f.ok()) return fail(fmt::format("--tokenizer-from: {}", f.status().message()));
    auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    if (!tokens.ok()) return fail(tokens.status().message());
    if ((*tokens)->empty()) return fail(fmt::format("--tokenizer-from {}: no tokenizer.ggml.tokens", s.tokenizer));
    int64_t n = static_cast<int64_t>((*tokens)->size());
    if (o.vocab != SynthOptions::kUnset && o.vocab != n && !o.tokenizer_from.empty())
      return fail(fmt::format("--vocab {} disagrees with the {} tokens of {} (llama.cpp refuses such a model)", o.vocab, n, s.tokenizer));
    s.vocab = n;
    for (const auto& [key, value] : f->metadata()) {
      if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
    }
  } else {
    if (s.vocab < 259) return fail(fmt::format("--vocab {} is too small for the byte-level vocabulary (at least 259)", s.vocab));
  }
  if (Status st = validate(s); !st.ok()) return fail(st.message());
  if (o.outlier_channels < 0 || o.outlier_channels % 2 != 0 || o.outlier_channels > s.hidden / s.heads / 2) {
    return fail(fmt::format("--outlier-channels {}: an even count of at most half the head size ({})", o.outlier_channels,
                            s.hidden / s.heads / 2));
  }
  if (!(o.outlier_scale > 0.0f && o.outlier_scale <= 1000.0f)) {
    return fail(fmt::format("--outlier-scale {} is out of range (0..1000]", o.outlier_scale));
  }
  if (!(o.output_scale > 0.0f && o.output_scale <= 1000.0f)) {
    return fail(fmt::format("--output-scale {} is out of range (0..1000]", o.output_scale));
  }
  if (o.output_scale != 1.0f && s.tied) return fail("--output-scale: this shape's output head is the token embedding (tied)");
  if (s.tokenizer.empty()) add_byte_vocab(w, s.vocab);
  if (o.outlier_channels > 0 || o.output_scale != 1.0f) {
    w.set_str("general.description", fmt::format("horizon synth: {} outlier K channels per head x{}, output head x{}",
                                                 o.outlier_channels, o.outlier_scale, o.output_scale));
  }

  const uint64_t H = s.hidden, hd = s.hidden / s.heads, q_dim = s.heads * hd, kv_dim = s.kv_heads * hd, F = s.ffn,
                 V = s.vocab, E = s.experts;
  const std::string a = s.arch + ".";
  w.set_u32(a + "context_length", static_cast<uint32_t>(s.ctx));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(H));
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.layers));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(F));
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(hd));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.heads));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(s.rms_eps));
  w.set_f32(a + "rope.freq_base", static_cast<float>(s.rope_base));
  w.set_u32(a + "vocab_size", static_cast<uint32_t>(V));
  if (E > 0) {
    w.set_u32(a + "expert_count", static_cast<uint32_t>(E));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(s.experts_used));
  }

  // Matrices take --type unless their rows are not whole blocks (then f16); norms, biases and the
  // router stay f32, as llama.cpp's quantizer leaves them.
  auto mtype = [&](uint64_t row_len) { return row_len % traits(*dtype).block_elems == 0 ? *dtype : DType::kF16; };
  std::vector<TensorPlan> plan;
  plan.push_back({"token_embd.weight", mtype(H), {H, V}, Fill::kRandom});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    plan.push_back({b + "attn_norm.weight", DType::kF32, {H}, Fill::kOnes});
    // The query channels that meet K's outliers are scaled down as much: large keys, ordinary
    // scores (as in trained models, where such channels act like a bias), so what quantizing K
    // loses in the other channels is what the scores lose.
    RowScale q_scale, k_scale;
    if (o.outlier_channels > 0) {
      k_scale.period = q_scale.period = hd;
      k_scale.rows = q_scale.rows = outlier_channels(o.seed, l, o.outlier_channels, hd);
      k_scale.factor = o.outlier_scale;
      q_scale.factor = 1.0f / o.outlier_scale;
    }
    plan.push_back({b + "attn_q.weight", mtype(H), {H, q_dim}, Fill::kRandom, q_scale});
    plan.push_back({b + "attn_k.weight", mtype(H), {H, kv_dim}, Fill::kRandom, k_scale});
    plan.push_back({b + "attn_v.weight", mtype(H), {H, kv_dim}, Fill::kRandom});
    if (s.qkv_bias) {
      plan.push_back({b + "attn_q.bias", DType::kF32, {q_dim}, Fill::kZeros});
      plan.push_back({b + "attn_k.bias", DType::kF32, {kv_dim}, Fill::kZeros});
      plan.push_back({b + "attn_v.bias", DType::kF32, {kv_dim}, Fill::kZeros});
    }
    plan.push_back({b + "attn_output.weight", mtype(q_dim), {q_dim, H}, Fill::kRandom});
    plan.push_back({b + "ffn_norm.weight", DType::kF32, {H}, Fill::kOnes});
    if (E > 0) {
      plan.push_back({b + "ffn_gate_inp.weight", DType::kF32, {H, E}, Fill::kRandom});
      plan.push_back({b + "ffn_gate_exps.weight", mtype(H), {H, F, E}, Fill::kRandom});
      plan.push_back({b + "ffn_down_exps.weight", mtype(F), {F, H, E}, Fill::kRandom});
      plan.push_back({b + "ffn_up_exps.weight", mtype(H), {H, F, E}, Fill::kRandom});
    } else {
      plan.push_back({b + "ffn_gate.weight", mtype(H), {H, F}, Fill::kRandom});
      plan.push_back({b + "ffn_down.weight", mtype(F), {F, H}, Fill::kRandom});
      plan.push_back({b + "ffn_up.weight", mtype(H), {H, F}, Fill::kRandom});
    }
  }
  plan.push_back({"output_norm.weight", DType::kF32, {H}, Fill::kOnes});
  if (!s.tied) plan.push_back({"output.weight", mtype(H), {H, V}, Fill::kRandom, RowScale{o.output_scale}});

  ThreadPool pool(o.threads);
  std::vector<std::vector<float>> scratch(pool.num_threads());
  for (size_t ti = 0; ti < plan.size(); ++ti) {
    const TensorPlan& t = plan[ti];
    const uint64_t seed = o.seed;
    w.add_tensor(t.name, t.dtype, t.dims, [&pool, &scratch, t, ti, seed](uint8_t* dst, uint64_t num_bytes) {
      const int64_t n = static_cast<int64_t>(t.dims[0]);
      uint64_t rows = 1;
      for (size_t d = 1; d < t.dims.size(); ++d) rows *= t.dims[d];
      const uint64_t rb = row_bytes(t.dtype, n);
      HZ_CHECK(rb * rows == num_bytes);
      const int64_t rows_per_task = 16;
      pool.parallel_for((rows + rows_per_task - 1) / rows_per_task, [&](int64_t task, int thread) {
        std::vector<float>& buf = scratch[thread];
        buf.resize(n);
        uint64_t end = std::min<uint64_t>(rows, (task + 1) * rows_per_task);
        for (uint64_t r = task * rows_per_task; r < end; ++r) {
          if (t.fill == Fill::kRandom) {
            random_row(seed, ti, r, 0.02f * t.scale.at(r), buf.data(), n);
          } else {
            std::fill(buf.begin(), buf.end(), t.fill == Fill::kOnes ? 1.0f : 0.0f);
          }
          uint8_t* out = dst + r * rb;
          switch (t.dtype) {
            case DType::kF32: std::memcpy(out, buf.data(), n * 4); break;
            case DType::kF16: kernels::f32_to_f16_row(buf.data(), reinterpret_cast<uint16_t*>(out), n); break;
            case DType::kBF16: kernels::f32_to_bf16_row(buf.data(), reinterpret_cast<uint16_t*>(out), n); break;
            case DType::kQ8_0: kernels::quantize_row_q8_0(buf.data(), reinterpret_cast<BlockQ8_0*>(out), n); break;
            case DType::kQ4_0: kernels::quantize_row_q4_0(buf.data(), reinterpret_cast<BlockQ4_0*>(out), n); break;
            default: HZ_CHECK_MSG(false, "synth: unsupported tensor type"); break;
          }
        }
      });
    });
  }

  auto start = std::chrono::steady_clock::now();
  ProgressBar bar("writing tensors", plan.size(), ProgressBar::Unit::kCount, o.quiet);
  Status st = w.write(o.out, [&](size_t done, size_t total) { bar.update(done); });
  bar.finish();
  if (!st.ok()) return fail(st.message());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t params = 0;
  for (const auto& t : plan) {
    uint64_t e = 1;
    for (uint64_t d : t.dims) e *= d;
    params += e;
  }
  if (!o.quiet) fmt::print(stderr, "wrote {}: {} {}, {} layers, hidden {}, {} heads / {} KV heads, FFN {}, vocab {}{}, {} parameters, {:.1f} s\n",
             o.out, s.arch, dtype_name(*dtype), s.layers, s.hidden, s.heads, s.kv_heads, s.ffn, s.vocab,
             E > 0 ? fmt::format(", {} experts ({} used)", E, s.experts_used) : "", params, secs);
  return 0;
}

Subcommand kSynth("synth", "Write a random-weight GGUF model of a given shape", [](CLI::App& app) {
  auto o = std::make_shared<SynthOptions>();
  app.add_option("-o,--output", o->out, "Output .gguf file")->required();
  app.add_option("--preset", o->preset_name, "llama-1b, llama-8b, qwen2-0.5b, mixtral-tiny");
  app.add_option("--layers", o->layers, "Transformer blocks");
  app.add_option("--hidden", o->hidden, "Embedding width");
  app.add_option("--heads", o->heads, "Attention heads");
  app.add_option("--kv-heads", o->kv_heads, "KV heads (grouped-query attention)");
  app.add_option("--ffn", o->ffn, "Feed-forward width (per expert)");
  app.add_option("--vocab", o->vocab, "Vocabulary size (a byte-level vocabulary)");
  app.add_option("--experts", o->experts, "Experts per MoE layer (0: dense)");
  app.add_option("--experts-used", o->experts_used, "Experts routed per token");
  app.add_option("--type", o->type, "Weight type: f32, f16, bf16, q8_0, q4_0")->capture_default_str();
  app.add_option("--seed", o->seed, "Random seed")->capture_default_str();
  app.add_option("--tokenizer-from", o->tokenizer_from, "Copy the tokenizer (all tokenizer.* keys) from this GGUF");
  app.add_option("--ctx,--max-model-len", o->ctx, "Context length written to the metadata");
  app.add_option("-t,--threads", o->threads, "Threads (default: all)");
  app.add_flag("-q,--quiet", o->quiet, "No progress or summary");
  app.add_option("--outlier-channels", o->outlier_channels,
                 "K outlier channels per KV head, as trained models have (even: RoPE pairs; the same channels in "
                 "every head of a layer, chosen per layer from --seed): K's rows scaled by --outlier-scale, the "
                 "matching query rows by its inverse. For KV quantization studies: e.g. --outlier-channels 4 "
                 "--output-scale 20")
      ->capture_default_str();
  app.add_option("--outlier-scale", o->outlier_scale, "Factor of the --outlier-channels rows of K")->capture_default_str();
  app.add_option("--output-scale", o->output_scale,
                 "Factor of the output head: larger gives confident predictions (a random model's are near uniform)")
      ->capture_default_str();
  return [o] { return run_synth(*o); };
});

}  // namespace
}  // namespace hz::cli
