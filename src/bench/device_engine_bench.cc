// `horizon bench engine --device cuda`: the pp / tg / tg-at-depth / batched-decode tests of
// engine_bench.cc on the device model (model/device_model.h). Every timed step ends with its
// logits on the host, as a served step does.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "bench/conditions.h"
#include "bench/engine_bench.h"
#include "kernels/cuda/backend.h"
#include "model/device_model.h"
#include "model/model.h"
#include "runtime/device_sequence.h"

namespace hz::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<int32_t> random_tokens(int64_t n, int32_t vocab, uint64_t& state) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& id : t) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab));
  }
  return t;
}

// o.batch sequences in one arena, each prefilled (or synthetically filled) to depth d, then every
// timed step decodes one token of each in one forward call.
Result<EngineBenchResult> device_batched_decode(DeviceModel& dm, cuda::Backend& be, const DeviceKvArenaConfig& kvc,
                                                const EngineBenchOptions& o, int64_t d, uint64_t& rng,
                                                const ProgressFn& say) {
  const ModelConfig& c = dm.config();
  EngineBenchResult r;
  r.test = "tg" + std::to_string(o.gen_tokens) + "x" + std::to_string(o.batch) + (d > 0 ? "@d" + std::to_string(d) : "");
  r.gen_tokens = o.gen_tokens;
  r.depth = d;
  r.batch = o.batch;
  // One arena holds every sequence's blocks (one forward reads one arena); block tables kept here.
  DeviceKvArenaConfig ac = kvc;  // codec and rotation
  ac.num_layers = c.num_layers;
  ac.num_kv_heads = c.num_kv_heads;
  ac.head_dim = c.head_dim;
  ac.block_tokens = o.block_size;
  const int64_t per_seq = (d + o.gen_tokens + 2 + o.block_size - 1) / o.block_size;
  ac.num_blocks = static_cast<int32_t>(per_seq * o.batch);
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<DeviceKvArena> kv, DeviceKvArena::create(ac, be));
  std::vector<std::vector<BlockRef>> tables(static_cast<size_t>(o.batch));
  std::vector<int64_t> lengths(static_cast<size_t>(o.batch), 0);
  std::vector<float> logits;
  auto slice = [&](int32_t b, const int32_t* tokens, int32_t n) {
    auto& t = tables[static_cast<size_t>(b)];
    while (static_cast<int32_t>(t.size()) < kv->blocks_for(lengths[b] + n)) t.push_back(BlockRef::pool(*kv->pool().allocate()));
    SeqSlice s;
    s.tokens = tokens;
    s.num_tokens = n;
    s.start_pos = lengths[b];
    s.block_table = t.data();
    lengths[b] += n;
    return s;
  };
  auto fill = [&]() -> Status {
    for (int32_t b = 0; b < o.batch; ++b) {
      for (BlockRef ref : tables[b]) kv->pool().unref(ref.idx);
      tables[b].clear();
      lengths[b] = 0;
      const std::vector<int32_t> prompt = random_tokens(d, c.vocab, rng);
      for (int64_t i = 0; i < d; i += o.prefill_chunk) {
        const int32_t n = static_cast<int32_t>(std::min<int64_t>(o.prefill_chunk, d - i));
        HZ_RETURN_IF_ERROR(dm.forward({slice(b, prompt.data() + i, n)}, *kv, &logits));
      }
    }
    return Status();
  };
  auto step = [&](const std::vector<int32_t>& tokens) -> Status {
    std::vector<SeqSlice> batch;
    for (int32_t b = 0; b < o.batch; ++b) batch.push_back(slice(b, &tokens[b], 1));
    return dm.forward(batch, *kv, &logits);
  };
  for (int32_t i = 0; i < o.reps; ++i) {
    if (say) say(r.test + " rep " + std::to_string(i + 1) + "/" + std::to_string(o.reps));
    auto t0 = Clock::now();
    HZ_RETURN_IF_ERROR(fill());
    if (i == 0) r.fill_seconds = seconds_since(t0);
    if (o.warmup) HZ_RETURN_IF_ERROR(step(random_tokens(o.batch, c.vocab, rng)));
    std::vector<std::vector<int32_t>> tokens;
    for (int32_t g = 0; g < o.gen_tokens; ++g) tokens.push_back(random_tokens(o.batch, c.vocab, rng));
    auto t1 = Clock::now();
    for (const auto& t : tokens) HZ_RETURN_IF_ERROR(step(t));
    r.tokens_per_s.push_back(static_cast<double>(o.gen_tokens) * o.batch / seconds_since(t1));
  }
  r.summary = summarize(r.tokens_per_s);
  return r;
}

}  // namespace

Result<EngineBenchReport> run_device_engine_bench(const EngineBenchOptions& o, const ProgressFn& progress) {
  if (o.kv_budget_bytes > 0 || !o.kv_disk_dir.empty())
    return unimplemented("--kv-budget / --kv-disk-dir: bench engine --device cuda keeps the whole context in device memory");
  DeviceKvArenaConfig kvc;
  HZ_RETURN_IF_ERROR(DeviceKvArena::apply_precision(o.kv, &kvc));
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<cuda::Backend> be, make_device_backend(o.device));
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::load(o.model_path, {}, /*pack=*/false));
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<DeviceModel> dm, DeviceModel::create(*model, *be));
  const ModelConfig& c = model->config();
  int64_t capacity = 1;
  for (int64_t p : o.prompt_lengths) capacity = std::max(capacity, p);
  if (o.gen_tokens > 0) {
    for (int64_t d : o.depths) capacity = std::max(capacity, d + o.gen_tokens + 1);
  }
  if (capacity > (int64_t{1} << 30)) return invalid_argument("lengths up to {} tokens are too large", capacity);
  DeviceSequenceOptions so;
  so.max_tokens = static_cast<int32_t>(capacity);
  so.block_tokens = o.block_size;
  so.kv_codec = kvc.codec;
  so.kv_rotated_k = kvc.rotated_k;
  so.kv_rotated_v = kvc.rotated_v;
  so.prefill_chunk = o.prefill_chunk;
  std::unique_ptr<DeviceSequence> seq;
  if (o.batch == 1 || !o.prompt_lengths.empty()) {
    HZ_ASSIGN_OR_RETURN(seq, DeviceSequence::create(*dm, *be, so));
  }

  EngineBenchReport rep;
  nlohmann::json& cond = rep.conditions;
  cond = host_conditions();
  cond["device"] = be->describe();
  cond["model_path"] = o.model_path;
  cond["model_name"] = c.name;
  cond["arch"] = c.arch;
  cond["train_ctx"] = c.train_ctx;
  cond["weight_type"] = c.num_layers > 0 ? dtype_name(model->weights().layers[0].wq.dtype) : "?";
  cond["weights_file_bytes"] = model->file().file_size();
  cond["device_weight_bytes"] = dm->weight_bytes();
  cond["device_conversions"] = dm->conversions();
  // A decoded token reads every device weight but the embedding table (one row of it).
  const uint64_t embd = row_bytes(model->weights().token_embd.dtype, c.hidden) * static_cast<uint64_t>(c.vocab);
  const bool tied = model->weights().output.data == model->weights().token_embd.data;
  cond["decode_weight_bytes_per_token"] = dm->weight_bytes() - (tied ? 0 : std::min(embd, dm->weight_bytes()));
  cond["layers"] = c.num_layers;
  cond["hidden"] = c.hidden;
  cond["kv_cache_dtype"] = kv_precision_name(o.kv);
  cond["kv_bytes_per_token"] = seq ? seq->arena().block_bytes() / static_cast<uint64_t>(o.block_size) : 0;
  cond["threads"] = 1;  // the host thread that drives the device
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
      seq->truncate(0);
      HZ_RETURN_IF_ERROR(seq->append(random_tokens(std::min<int64_t>(p, 32), c.vocab, rng)).status());
    }
    for (int32_t i = 0; i < o.reps; ++i) {
      say(r.test + " rep " + std::to_string(i + 1) + "/" + std::to_string(o.reps));
      seq->truncate(0);
      auto tokens = random_tokens(p, c.vocab, rng);
      auto t0 = Clock::now();
      HZ_RETURN_IF_ERROR(seq->append(tokens).status());
      r.tokens_per_s.push_back(static_cast<double>(p) / seconds_since(t0));
    }
    r.summary = summarize(r.tokens_per_s);
    rep.results.push_back(std::move(r));
  }
  if (o.gen_tokens > 0 && o.batch > 1) {
    seq.reset();  // its arena's memory goes to the batch's
    for (int64_t d : o.depths) {
      HZ_ASSIGN_OR_RETURN(EngineBenchResult r, device_batched_decode(*dm, *be, kvc, o, d, rng, say));
      rep.results.push_back(std::move(r));
    }
  } else if (o.gen_tokens > 0) {
    for (int64_t d : o.depths) {
      EngineBenchResult r;
      r.test = "tg" + std::to_string(o.gen_tokens) + (d > 0 ? "@d" + std::to_string(d) : "");
      r.gen_tokens = o.gen_tokens;
      r.depth = d;
      if (d > 0) say(r.test + " filling " + std::to_string(d) + " positions (" + fill_mode_name(o.fill) + ")");
      auto t0 = Clock::now();
      seq->truncate(0);
      if (d > 0) {
        if (o.fill == FillMode::kSynthetic) {
          HZ_RETURN_IF_ERROR(seq->fill_synthetic(d, o.seed));
          r.fill_seconds = seconds_since(t0);
          if (o.check_attention) {
            say(r.test + " checking attention at depth " + std::to_string(d));
            HZ_ASSIGN_OR_RETURN(const DeviceSequence::AttentionCheck ac,
                                seq->check_synthetic_attention(dm->config().num_layers - 1));
            r.attention_check = fmt::format("layer {}: max |device - reference| {:.3g} of {:.3g}: {}", ac.layer,
                                            ac.max_abs_diff, ac.max_abs_ref, ac.ok() ? "pass" : "FAIL");
            r.attention_check_failed = !ac.ok();
          }
        } else {
          HZ_RETURN_IF_ERROR(seq->append(random_tokens(d, c.vocab, rng)).status());
          r.fill_seconds = seconds_since(t0);
        }
      }
      if (o.warmup) {
        say(r.test + " warm-up");
        HZ_RETURN_IF_ERROR(seq->append(random_tokens(1, c.vocab, rng)).status());
      }
      for (int32_t i = 0; i < o.reps; ++i) {
        say(r.test + " rep " + std::to_string(i + 1) + "/" + std::to_string(o.reps));
        seq->truncate(d);
        auto tokens = random_tokens(o.gen_tokens, c.vocab, rng);
        auto t1 = Clock::now();
        for (int32_t t : tokens) HZ_RETURN_IF_ERROR(seq->append({t}).status());
        r.tokens_per_s.push_back(static_cast<double>(o.gen_tokens) / seconds_since(t1));
      }
      r.summary = summarize(r.tokens_per_s);
      rep.results.push_back(std::move(r));
    }
  }
  return rep;
}

}  // namespace hz::bench
