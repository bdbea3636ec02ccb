#include "bench/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "base/thread_pool.h"
#include "bench/conditions.h"
#include "model/model.h"
#include "runtime/single_sequence.h"

namespace hz::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Deterministic token ids in [0, vocab): the benchmark measures arithmetic, not text.
std::vector<int32_t> random_tokens(int64_t n, int32_t vocab, uint64_t& state) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& id : t) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab));
  }
  return t;
}

nlohmann::json result_json(const EngineBenchResult& r, FillMode fill) {
  nlohmann::json j = {{"test", r.test},
                      {"prompt_tokens", r.prompt_tokens},
                      {"gen_tokens", r.gen_tokens},
                      {"depth", r.depth},
                      {"batch", r.batch},
                      {"samples_tokens_per_s", r.tokens_per_s}};
  j[r.prefill ? "prefill_tokens_per_s" : "decode_tokens_per_s"] = r.summary.to_json();
  if (!r.prefill && r.depth > 0) {
    j["fill"] = fill_mode_name(fill);
    j["fill_seconds"] = r.fill_seconds;
    if (!r.attention_check.empty()) j["attention_check"] = r.attention_check;
  }
  return j;
}

// The tg test at depth `d` for o.batch sequences in one KV cache: each is prefilled to d with its
// own random tokens, then every timed step decodes one token of each in a single forward call
// (one pass over the weights for the whole batch).
Result<EngineBenchResult> batched_decode(Model& model, ThreadPool& pool, const EngineBenchOptions& o, int64_t d,
                                         uint64_t& rng, const std::function<void(const std::string&)>& say) {
  const ModelConfig& c = model.config();
  EngineBenchResult r;
  r.test = "tg" + std::to_string(o.gen_tokens) + "x" + std::to_string(o.batch) + (d > 0 ? "@d" + std::to_string(d) : "");
  r.gen_tokens = o.gen_tokens;
  r.depth = d;
  r.batch = o.batch;
  KvCacheConfig kc;
  kc.num_layers = c.num_layers;
  kc.num_kv_heads = c.num_kv_heads;
  kc.head_dim = c.head_dim;
  kc.block_tokens = o.block_size;
  kc.precision = o.kv;
  const int64_t per_seq = (d + o.gen_tokens + 1 + o.block_size - 1) / o.block_size;
  if (per_seq * o.batch > INT32_MAX / 2) return invalid_argument("--seqs {} at depth {} needs too many KV blocks", o.batch, d);
  kc.num_blocks = static_cast<int32_t>(per_seq * o.batch);
  KvCache kv(kc);
  std::vector<std::vector<BlockRef>> tables(static_cast<size_t>(o.batch));
  std::vector<int64_t> lengths(static_cast<size_t>(o.batch), 0);
  std::vector<float> logits;
  auto slice = [&](int32_t b, const int32_t* tokens, int32_t n) {
    auto& t = tables[static_cast<size_t>(b)];
    while (static_cast<int32_t>(t.size()) < kv.blocks_for(lengths[b] + n)) t.push_back(BlockRef::pool(*kv.pool().allocate()));
    SeqSlice s;
    s.tokens = tokens;
    s.num_tokens = n;
    s.start_pos = lengths[b];
    s.block_table = t.data();
    lengths[b] += n;
    return s;
  };
  auto fill = [&]() {
    for (int32_t b = 0; b < o.batch; ++b) {
      for (BlockRef ref : tables[b]) kv.release_block(ref);
      tables[b].clear();
      lengths[b] = 0;
      const std::vector<int32_t> prompt = random_tokens(d, c.vocab, rng);
      for (int64_t i = 0; i < d; i += o.prefill_chunk) {
        const int32_t n = static_cast<int32_t>(std::min<int64_t>(o.prefill_chunk, d - i));
        model.forward({slice(b, prompt.data() + i, n)}, kv, pool, &logits);
      }
    }
  };
  auto step = [&](const std::vector<int32_t>& tokens) {
    std::vector<SeqSlice> batch;
    for (int32_t b = 0; b < o.batch; ++b) batch.push_back(slice(b, &tokens[b], 1));
    model.forward(batch, kv, pool, &logits);
  };
  for (int32_t i = 0; i < o.reps; ++i) {
    say(r.test + " rep " + std::to_string(i + 1) + "/" + std::to_string(o.reps) +
        (d > 0 ? ": prefilling " + std::to_string(o.batch) + " x " + std::to_string(d) + " positions" : ""));
    auto t0 = Clock::now();
    fill();
    if (i == 0) r.fill_seconds = seconds_since(t0);
    if (o.warmup) step(random_tokens(o.batch, c.vocab, rng));
    std::vector<std::vector<int32_t>> tokens;
    for (int32_t g = 0; g < o.gen_tokens; ++g) tokens.push_back(random_tokens(o.batch, c.vocab, rng));
    auto t1 = Clock::now();
    for (const auto& t : tokens) step(t);
    r.tokens_per_s.push_back(static_cast<double>(o.gen_tokens) * o.batch / seconds_since(t1));
  }
  r.summary = summarize(r.tokens_per_s);
  return r;
}

}  // namespace

const char* fill_mode_name(FillMode m) { return m == FillMode::kSynthetic ? "synthetic" : "prefill"; }

nlohmann::json EngineBenchReport::to_json() const {
  nlohmann::json res = nlohmann::json::array();
  FillMode fill = conditions.value("fill", std::string("synthetic")) == "prefill" ? FillMode::kPrefill
                                                                                   : FillMode::kSynthetic;
  for (const auto& r : results) res.push_back(result_json(r, fill));
  return {{"mode", "engine"}, {"conditions", conditions}, {"results", res}};
}

Result<EngineBenchReport> run_engine_bench(const EngineBenchOptions& o, const ProgressFn& progress) {
  if (o.prompt_lengths.empty() && o.gen_tokens == 0) return invalid_argument("nothing to measure: -p and -n are both empty");
  for (int64_t p : o.prompt_lengths) {
    if (p < 1) return invalid_argument("-p: prompt length {} must be at least 1", p);
  }
  if (o.gen_tokens < 0) return invalid_argument("-n: {} must be >= 0", o.gen_tokens);
  for (int64_t d : o.depths) {
    if (d < 0) return invalid_argument("--depth: {} must be >= 0", d);
  }
  if (o.reps < 1) return invalid_argument("--reps: {} must be at least 1", o.reps);
  if (o.batch < 1 || o.batch > 1024) return invalid_argument("--seqs: {} is not in 1..1024", o.batch);
  if (o.batch > 1 && (o.kv_budget_bytes > 0 || !o.kv_disk_dir.empty())) {
    return invalid_argument("--seqs: decode of several sequences runs with all their KV in RAM (no --kv-budget or --kv-disk-dir)");
  }
  if (o.prefill_chunk < 1) return invalid_argument("--prefill-chunk: {} must be at least 1", o.prefill_chunk);
  if (o.block_size < 16 || o.block_size > 256 || o.block_size % 16 != 0) {
    return invalid_argument("--block-size: {} is not a multiple of 16 in 16..256", o.block_size);
  }
  if (o.far_cold && o.kv_disk_dir.empty()) return invalid_argument("--far-cold needs --kv-disk-dir (and a --kv-budget below the context)");
  if (o.device != EngineDevice::kCpu) return run_device_engine_bench(o, progress);
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::load(o.model_path));
  const ModelConfig& c = model->config();

  int64_t capacity = 1;
  for (int64_t p : o.prompt_lengths) capacity = std::max(capacity, p);
  if (o.gen_tokens > 0) {
    for (int64_t d : o.depths) capacity = std::max(capacity, d + o.gen_tokens);
  }
  if (capacity > (int64_t{1} << 30)) return invalid_argument("lengths up to {} tokens are too large", capacity);

  ThreadPool pool(o.threads);
  SingleSequenceOptions so;
  so.max_tokens = static_cast<int32_t>(capacity);
  so.block_tokens = o.block_size;
  so.kv_precision = o.kv;
  if (o.kv_budget_bytes > 0) {
    const KvTypePair arena = o.kv.arena_types();
    KvGeometry g;
    g.num_layers = static_cast<uint64_t>(c.num_layers);
    g.num_streams = 2;
    g.num_heads = static_cast<uint64_t>(c.num_kv_heads);
    g.head_dim = static_cast<uint64_t>(c.head_dim);
    const uint64_t blocks = o.kv_budget_bytes / kv_block_bytes(g, arena, static_cast<uint64_t>(o.block_size));
    if (blocks == 0) return invalid_argument("--kv-budget {} bytes holds no KV block", o.kv_budget_bytes);
    so.ram_tokens = static_cast<int32_t>(std::min<uint64_t>(blocks * o.block_size, INT32_MAX));
    if (so.ram_tokens < capacity && o.kv_disk_dir.empty()) {
      return invalid_argument("--kv-budget holds {} tokens but the tests need {}: raise it or add --kv-disk-dir",
                              so.ram_tokens, capacity);
    }
  }
  SingleSequence seq(*model, pool, so);
  if (!o.kv_disk_dir.empty()) HZ_RETURN_IF_ERROR(seq.enable_far(o.kv_disk_dir, o.kv_disk_budget_bytes));

  EngineBenchReport rep;
  nlohmann::json& cond = rep.conditions;
  cond = host_conditions();
  cond["model_path"] = o.model_path;
  cond["model_name"] = c.name;
  cond["arch"] = c.arch;
  cond["train_ctx"] = c.train_ctx;
  cond["weight_type"] = c.num_layers > 0 ? dtype_name(model->weights().layers[0].wq.dtype) : "?";
  cond["weights_file_bytes"] = model->file().file_size();
  cond["decode_weight_bytes_per_token"] = model->streamed_weight_bytes();
  cond["layers"] = c.num_layers;
  cond["hidden"] = c.hidden;
  cond["kv_cache_dtype"] = kv_precision_name(o.kv);
  cond["kv_bytes_per_token"] = seq.kv().block_bytes() / static_cast<uint64_t>(o.block_size);
  cond["kv_ram_tokens"] = static_cast<int64_t>(seq.kv().config().num_blocks) * o.block_size;
  cond["kv_disk_dir"] = o.kv_disk_dir;
  cond["far_cold"] = o.far_cold;
  cond["threads"] = pool.num_threads();
  cond["block_size"] = o.block_size;
  cond["prefill_chunk"] = o.prefill_chunk;
  cond["fill"] = fill_mode_name(o.fill);
  cond["reps"] = o.reps;
  cond["prompt_lengths"] = o.prompt_lengths;
  cond["gen_tokens"] = o.gen_tokens;
  cond["depths"] = o.depths;
  cond["batch"] = o.batch;

  uint64_t rng = o.seed;
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };

  for (int64_t p : o.prompt_lengths) {
    EngineBenchResult r;
    r.test = "pp" + std::to_string(p);
    r.prefill = true;
    r.prompt_tokens = p;
    if (o.warmup) {
      say(r.test + " warm-up");
      seq.reset();
      seq.append(random_tokens(std::min<int64_t>(p, 32), c.vocab, rng));
    }
    for (int32_t i = 0; i < o.reps; ++i) {
      say(r.test + " rep " + std::to_string(i + 1) + "/" + std::to_string(o.reps));
      seq.reset();
      auto tokens = random_tokens(p, c.vocab, rng);
      auto t0 = Clock::now();
      seq.append_chunked(tokens, o.prefill_chunk);
      r.tokens_per_s.push_back(static_cast<double>(p) / seconds_since(t0));
    }
    r.summary = summarize(r.tokens_per_s);
    rep.results.push_back(std::move(r));
  }

  if (o.gen_tokens > 0 && o.batch > 1) {
    for (int64_t d : o.depths) {
      HZ_ASSIGN_OR_RETURN(EngineBenchResult r, batched_decode(*model, pool, o, d, rng, say));
      rep.results.push_back(std::move(r));
    }
  } else if (o.gen_tokens > 0) {
    for (int64_t d : o.depths) {
      EngineBenchResult r;
      r.test = "tg" + std::to_string(o.gen_tokens) + (d > 0 ? "@d" + std::to_string(d) : "");
      r.gen_tokens = o.gen_tokens;
      r.depth = d;
      // Fills the context to depth d (its time goes in the report only the first time).
      auto fill_depth = [&]() -> Status {
        seq.reset();
        if (d == 0) return Status::ok_status();
        if (o.fill == FillMode::kSynthetic) return seq.fill_synthetic(d, o.seed);
        seq.append_chunked(random_tokens(d, c.vocab, rng), o.prefill_chunk);
        return Status::ok_status();
      };
      // Back to depth d for the next repetition: truncation where the cache can (a compact or
      // mixed cache cannot once it finalized blocks the next queries read exactly), else a refill.
      auto back_to_depth = [&]() -> Status {
        if (seq.truncate(d).ok()) return Status::ok_status();
        say(r.test + " refilling " + std::to_string(d) + " positions");
        return fill_depth();
      };
      if (d > 0) say(r.test + " filling " + std::to_string(d) + " positions (" + fill_mode_name(o.fill) + ")");
      auto t0 = Clock::now();
      HZ_RETURN_IF_ERROR(fill_depth());
      if (d > 0) r.fill_seconds = seconds_since(t0);
      if (o.warmup) {
        say(r.test + " warm-up");
        seq.append(random_tokens(1, c.vocab, rng));
        HZ_RETURN_IF_ERROR(back_to_depth());
      }
      for (int32_t i = 0; i < o.reps; ++i) {
        say(r.test + " rep " + std::to_string(i + 1) + "/" + std::to_string(o.reps));
        HZ_RETURN_IF_ERROR(back_to_depth());
        if (o.far_cold && seq.far() != nullptr) seq.far()->evict_page_cache();
        auto tokens = random_tokens(o.gen_tokens, c.vocab, rng);
        auto t1 = Clock::now();
        for (int32_t t : tokens) seq.append({t});
        r.tokens_per_s.push_back(static_cast<double>(o.gen_tokens) / seconds_since(t1));
      }
      r.summary = summarize(r.tokens_per_s);
      rep.results.push_back(std::move(r));
    }
  }
  return rep;
}

}  // namespace hz::bench
