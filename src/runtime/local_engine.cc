#include "runtime/local_engine.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <random>

#include "base/check.h"
#include "base/log.h"
#include "kernels/kernels.h"
#include "kvstore/fingerprint.h"
#include "planner/capacity_plan.h"
#include "planner/host_info.h"
#include "planner/model_shape.h"
#include "runtime/sampler.h"
#include "runtime/stop_matcher.h"

namespace hz {

struct LocalEngine::Request {
  uint64_t id = 0;
  std::shared_ptr<GenerationSink> sink;
  SamplingParams params;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StreamingDetokenizer> detok;
  std::unique_ptr<StopMatcher> stop;
  int32_t prompt_tokens = 0;
  int32_t generated = 0;
  int32_t max_new_tokens = 0;  // after clamping to max_model_len
};

namespace {

uint64_t total_ram_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : (uint64_t{8} << 30);
}

}  // namespace

Result<std::unique_ptr<LocalEngine>> LocalEngine::create(const EngineOptions& opts) {
  std::unique_ptr<LocalEngine> e(new LocalEngine());
  e->opts_ = opts;
  HZ_ASSIGN_OR_RETURN(e->model_, Model::load(opts.model_path, opts.model_overrides));
  HZ_ASSIGN_OR_RETURN(e->tokenizer_, Tokenizer::from_gguf(e->model_->file()));
  const ModelConfig& c = e->model_->config();
  if (e->tokenizer_->vocab_size() != c.vocab)
    return data_loss("{}: the tokenizer has {} tokens but token_embd.weight has {} rows", opts.model_path,
                     e->tokenizer_->vocab_size(), c.vocab);
  if (opts.block_size < 16 || opts.block_size > 256 || opts.block_size % 16 != 0)
    return invalid_argument("--block-size {} must be a multiple of 16 between 16 and 256", opts.block_size);
  if (opts.kv_hot_window < 0) return invalid_argument("--kv-hot-window must be 0 or more");
  // The disk tier's prefix store is a tier of the prefix cache: it implies it. Not with a hot
  // window: blocks come back from disk in their cold form only, and a new sequence reads the
  // newest blocks of its prefix hot, so nothing could be reused from disk. The far tier (running
  // sequences' far blocks, read cold) works with any KV types.
  const bool hot_window = opts.kv_hot_window > 0 && opts.kv_dtype != opts.kv_cold_dtype;
  const bool prefix_store = !opts.kv_disk_dir.empty() && !hot_window;
  if (prefix_store) e->opts_.enable_prefix_caching = true;
  if (!opts.kv_disk_dir.empty() && hot_window)
    HZ_LOG_WARN("--kv-disk-dir with --kv-hot-window: the prefix store is off (blocks would come back from disk in their "
                "cold form only); long contexts still keep their far blocks on disk");
  if (opts.max_num_seqs < 1) return invalid_argument("--max-num-seqs must be at least 1");
  if (opts.max_num_batched_tokens < 1) return invalid_argument("--max-num-batched-tokens must be at least 1");
  if (opts.prefill_chunk < 1) return invalid_argument("--prefill-chunk must be at least 1");
  if (opts.max_model_len < 0) return invalid_argument("--max-model-len must be positive");
  int32_t max_len = opts.max_model_len > 0 ? opts.max_model_len : c.train_ctx;
  e->opts_.max_model_len = max_len;

  KvCacheConfig kc;
  kc.num_layers = c.num_layers;
  kc.num_kv_heads = c.num_kv_heads;
  kc.head_dim = c.head_dim;
  kc.block_tokens = opts.block_size;
  KvPrecision prec;
  prec.hot = opts.kv_dtype;
  prec.hot_window = static_cast<uint64_t>(opts.kv_hot_window);
  prec.cold = opts.kv_cold_dtype;
  kc.precision = prec;
  prec = kc.resolved_precision();
  // The planner's figure for one block (kv_layout.h): what the arena allocates per block.
  const uint64_t block_bytes = kv_block_bytes(kc.geometry(), prec.hot_window > 0 ? prec.cold : prec.hot, kc.block_tokens);
  uint64_t budget = opts.kv_budget_bytes;
  if (budget == 0) {
    uint64_t blocks_per_seq = (static_cast<uint64_t>(max_len) + kc.block_tokens - 1) / kc.block_tokens;
    budget = std::min<uint64_t>(blocks_per_seq * opts.max_num_seqs * block_bytes, total_ram_bytes() / 4);
  }
  // Admission at start-up (SPEC M12): the planner's figures for weights + runtime + one sequence of
  // --max-model-len must fit in the memory this machine has available, and so must the KV budget.
  {
    auto shape = load_model_shape(opts.model_path);
    if (shape.ok()) {
      const HostInfo host = probe_host();
      PlanOptions po;
      po.memory_bytes = host.available_ram_bytes;
      po.kv = prec;
      po.max_num_seqs = static_cast<uint64_t>(opts.max_num_seqs);
      po.max_model_len = static_cast<uint64_t>(max_len);
      po.block_tokens = static_cast<uint64_t>(kc.block_tokens);
      po.prefill_chunk_tokens = static_cast<uint64_t>(opts.prefill_chunk);
      po.num_threads = static_cast<uint64_t>(std::max(1, opts.threads));
      auto plan = make_plan(*shape, po);
      if (plan.ok()) {
        // With a disk tier a sequence's far blocks need not fit in RAM: only the KV budget must.
        if (opts.kv_disk_dir.empty()) HZ_RETURN_IF_ERROR(check_startup_fits(*plan));
        const uint64_t need = plan->weights_bytes + plan->overhead.total() + budget;
        if (host.available_ram_bytes > 0 && need > host.available_ram_bytes)
          return out_of_range("weights ({} MiB) + runtime ({} MiB) + KV budget ({} MiB) exceed the {} MiB of memory available; lower --kv-budget or --max-model-len, or use a quantized --kv-cache-dtype",
                              plan->weights_bytes >> 20, plan->overhead.total() >> 20, budget >> 20,
                              host.available_ram_bytes >> 20);
      }
    }
  }
  // Prefix caching with a hot window keeps the hot (staging) form of recently cached blocks, so that
  // a later sequence can attach them (KvCache::set_hot_retention): that memory comes out of the
  // budget. Enough for every sequence slot's attach point (hot blocks + 1) four times over.
  const bool hot_retention = opts.enable_prefix_caching && prec.hot_window > 0;
  const int64_t hot_blocks =
      prec.hot_window > 0 ? static_cast<int64_t>((prec.hot_window - 1 + kc.block_tokens - 1) / kc.block_tokens) : 0;
  uint64_t retained_blocks = 0;
  if (hot_retention) {
    const uint64_t staging_bytes = kv_block_bytes(kc.geometry(), prec.hot == KvType::kF32 ? KvType::kF32 : KvType::kF16, kc.block_tokens);
    retained_blocks = std::min<uint64_t>(4 * static_cast<uint64_t>(hot_blocks + 1) * static_cast<uint64_t>(opts.max_num_seqs),
                                         budget / 4 / staging_bytes);
    budget -= retained_blocks * staging_bytes;
  }
  uint64_t num_blocks = budget / block_bytes;
  if (num_blocks == 0)
    return out_of_range("--kv-budget {} bytes holds no KV block (one block of {} tokens takes {} bytes)", budget,
                        kc.block_tokens, block_bytes);
  kc.num_blocks = static_cast<int32_t>(std::min<uint64_t>(num_blocks, INT32_MAX));
  e->kv_ = std::make_unique<KvCache>(kc);
  if (retained_blocks > 0) e->kv_->set_hot_retention(static_cast<int32_t>(retained_blocks));
  HZ_CHECK(e->kv_->block_bytes() == block_bytes);
  HZ_LOG_DEBUG("{}", e->kv_->memory().summary());
  e->pool_ = std::make_unique<ThreadPool>(opts.threads);
  SchedulerConfig sc;
  sc.max_num_seqs = opts.max_num_seqs;
  sc.max_num_batched_tokens = opts.max_num_batched_tokens;
  sc.prefill_chunk = opts.prefill_chunk;
  sc.block_tokens = kc.block_tokens;
  e->sched_ = std::make_unique<Scheduler>(sc, e->kv_->pool());
  KvCache* kv = e->kv_.get();
  e->sched_->set_copy_block([kv](int32_t src, int32_t dst) { kv->copy_block(src, dst); });
  if (prefix_store) HZ_RETURN_IF_ERROR(e->open_disk_tier(kv_precision_name(prec)));
  if (!opts.kv_disk_dir.empty()) {
    // What one running sequence must keep in RAM: the blocks a prefill chunk writes, those its
    // queries read hot or exactly, and one partly written block. A smaller pool gains nothing
    // from the far tier (prompts must fit in it anyway).
    const int64_t min_blocks = kv->blocks_for(opts.prefill_chunk) + hot_blocks + 2;
    if (kc.num_blocks < min_blocks) {
      HZ_LOG_WARN("KV far tier off: --kv-budget holds {} KV blocks, and a running sequence with its far blocks on disk "
                  "needs {} in RAM (a --prefill-chunk of {} tokens plus the hot window); contexts are limited to the RAM pool",
                  kc.num_blocks, min_blocks, opts.prefill_chunk);
    } else {
      e->open_far_tier();
    }
  }
  if (e->opts_.enable_prefix_caching) {
    // Everything the cached K/V depend on: the model, its shape and the cache's layout and types.
    std::string identity = fmt::format("{}|{}|L{}|H{}|D{}|V{}|{}|bt{}", c.name, opts.model_path, c.num_layers,
                                       c.num_kv_heads, c.head_dim, c.vocab, kv_precision_name(prec), kc.block_tokens);
    std::optional<uint64_t> seed;
    if (e->kv_store_) {
      // Keys must mean the same in the next process: the fingerprint names the content (not the
      // path, which may move), the store's secret seed keys the hash.
      identity = "kv-fingerprint " + e->fingerprint_.hex();
      seed = e->kv_store_->hash_seed();
    }
    e->prefix_cache_ = std::make_unique<PrefixCache>(kv->pool(), kc.block_tokens, identity, seed);
    if (e->kv_store_ && opts.kv_disk_policy != "lru") {
      // The same policy picks the block to demote from RAM as the record to drop from disk.
      HZ_ASSIGN_OR_RETURN(e->ram_policy_, kvstore::make_policy(opts.kv_disk_policy, "--kv-disk-policy"));
      kv->pool().set_eviction_policy(e->ram_policy_.get());
    }
    if (hot_retention) {
      // Full blocks are registered at once (their arena form is sealed, their hot form staged);
      // attaching sequences copy the ones they read hot.
      const int64_t bt = kc.block_tokens;
      e->sched_->set_prefix_cache(e->prefix_cache_.get(), [bt](int64_t n) { return n / bt; });
      e->sched_->set_hot_attach(static_cast<int32_t>(hot_blocks), [kv](int32_t b) { return kv->hot_form_available(b); });
    } else {
      e->sched_->set_prefix_cache(e->prefix_cache_.get(), [kv](int64_t n) { return kv->finalized_blocks(n); });
    }
    if (e->kv_store_) {
      e->disk_tier_ = std::make_unique<DiskTier>(*kv, *e->prefix_cache_, *e->kv_store_, opts.kv_disk_dtype);
      DiskTier* tier = e->disk_tier_.get();
      e->sched_->set_promoter([tier](const int32_t* tokens, int32_t n) { tier->promote_prefix(tokens, n); });
    }
  }

  ModelInfo& info = e->info_;
  std::string file = opts.model_path.substr(opts.model_path.find_last_of('/') + 1);
  info.name = !opts.served_model_name.empty() ? opts.served_model_name : file;
  info.path = opts.model_path;
  info.max_model_len = max_len;
  info.vocab_size = c.vocab;
  info.max_token_bytes = static_cast<int32_t>(std::min<size_t>(e->tokenizer_->max_token_bytes(), INT32_MAX));
  auto tmpl = e->model_->file().get_string_or("tokenizer.chat_template", "");
  if (tmpl.ok()) info.chat_template = *tmpl;
  if (e->tokenizer_->bos_id() >= 0) info.bos_token = e->tokenizer_->token_text(e->tokenizer_->bos_id());
  if (e->tokenizer_->eos_id() >= 0) info.eos_token = e->tokenizer_->token_text(e->tokenizer_->eos_id());
  info.created_unix = static_cast<int64_t>(std::time(nullptr));

  e->stats_.max_queue = opts.max_queue;
  e->stats_.kv_blocks_total = kc.num_blocks;
  e->stats_.kv_blocks_free = kc.num_blocks;
  e->stats_.last_progress = std::chrono::steady_clock::now();
  e->publish_stats();  // the disk tier's figures are visible before the first step
  LocalEngine* raw = e.get();
  e->thread_ = std::thread([raw] { raw->loop(); });
  return e;
}

LocalEngine::~LocalEngine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // What the next process should find: every prefix still cached in RAM goes to disk.
  if (disk_tier_) disk_tier_->persist_all();
}

Status LocalEngine::open_disk_tier(const std::string& prec_name) {
  const ModelConfig& c = model_->config();
  kvstore::FingerprintInputs fi;
  fi.weights = kvstore::digest_weights(model_->file());
  fi.tokenizer = fmt::format("vocab {} bos {} eos {}", tokenizer_->vocab_size(), tokenizer_->bos_id(), tokenizer_->eos_id());
  const RopeConfig& r = c.rope;
  fi.rope = fmt::format("dim {} base {:a} scaling {} scale {:a} orig {} ext {:a} attn {:a} beta {:a}/{:a} llama3 {:a}/{:a} factors",
                        r.dim, r.freq_base, static_cast<int>(r.scaling), r.freq_scale, r.orig_ctx, r.ext_factor,
                        r.attn_factor, r.beta_fast, r.beta_slow, r.low_freq_factor, r.high_freq_factor);
  for (float f : r.freq_factors) fi.rope += fmt::format(" {:a}", f);
  fi.kv_type = prec_name;
  const KvType disk_type = opts_.kv_disk_dtype.value_or(kv_->arena_type());
  fi.kv_type += std::string(" disk ") + kv_type_name(disk_type);
  fi.block_tokens = static_cast<uint32_t>(kv_->config().block_tokens);
  // The kernels' ISA too: scalar and AVX2 kernels may differ in the last bits of the K/V they
  // compute, and a disk hit must give exactly what this engine would have computed.
  fi.identity = fmt::format("{}|L{}|H{}|KV{}|D{}|DV{}|V{}|SW{}|eps {:a}|isa {}", c.arch, c.num_layers, c.num_heads,
                            c.num_kv_heads, c.head_dim, c.head_dim_v, c.vocab, c.sliding_window, c.rms_eps,
                            kernels::isa_name(kernels::active_isa()));
  fingerprint_ = kvstore::make_fingerprint(fi);

  kvstore::StoreOptions so;
  so.dir = opts_.kv_disk_dir;
  so.budget_bytes = opts_.kv_disk_budget_bytes;
  so.fingerprint = fingerprint_;
  so.block_tokens = static_cast<uint32_t>(kv_->config().block_tokens);
  so.block_bytes = kv_->block_bytes_for(kv_codec(disk_type));
  auto codec = kvstore::codec_from_name(opts_.kv_disk_codec);
  if (!codec) return invalid_argument("--kv-disk-codec '{}' is not one of zstd, lz4, none", opts_.kv_disk_codec);
  so.codec = *codec;
  so.level = opts_.kv_disk_level;
  so.policy = opts_.kv_disk_policy;
  auto store = kvstore::KvStore::open(so);
  if (!store.ok()) {
    // A bad flag is the user's to fix; an unusable folder only costs the disk tier.
    if (store.status().code() != StatusCode::kIoError) return store.status();
    HZ_LOG_WARN("KV disk tier off: {}", store.status().message());
    return Status();
  }
  kv_store_ = std::move(*store);
  const kvstore::StoreStats st = kv_store_->stats();
  HZ_LOG_INFO("KV disk tier {}: {} blocks of {} reusable (fingerprint {}{}{})", so.dir, st.blocks, st.slots_total,
              fingerprint_.hex(), fi.weights.full ? ", full weights hash" : ", sampled weights digest",
              st.fingerprint_reset ? "; cleared a store of another model" : "");
  return Status();
}

void LocalEngine::open_far_tier() {
  FarTierOptions fo;
  fo.dir = opts_.kv_disk_dir;
  fo.budget_bytes = opts_.kv_disk_budget_bytes;
  fo.num_layers = kv_->config().num_layers;
  fo.plane_bytes = kv_->plane_bytes();
  fo.segments = kv_->far_segments();
  auto far = FarTier::open(fo);
  if (!far.ok()) {
    HZ_LOG_WARN("KV far tier off: {}; a sequence's context is limited to the RAM pool", far.status().message());
    return;
  }
  far_ = std::move(*far);
  kv_->attach_far(far_.get());
  KvCache* kv = kv_.get();
  LocalEngine* self = this;
  sched_->set_far_tier(
      [kv, self](int32_t b) -> int32_t {
        auto id = kv->spill(b);
        if (!id) return -1;
        // A registered block leaves the prefix cache (to the disk store, when there is one).
        if (self->prefix_cache_) self->prefix_cache_->forget(b);
        kv->pool().unref(b);
        return *id;
      },
      [kv](int32_t b) { kv->release_far(b); }, [kv](int64_t n) { return kv->finalized_blocks(n); });
}

std::vector<bool> LocalEngine::redo_corrupt(const std::vector<ScheduledSlice>& slices) {
  std::vector<bool> redo(slices.size(), false);
  if (!far_) return redo;
  const std::vector<int32_t> bad = far_->take_corrupt();
  if (bad.empty()) return redo;
  const int32_t base = kv_->config().num_blocks;
  for (size_t i = 0; i < slices.size(); ++i) {
    for (int32_t b : slices[i].seq->block_table) {
      if (b >= base && std::find(bad.begin(), bad.end(), b - base) != bad.end()) redo[i] = true;
    }
    if (redo[i]) {
      ++far_recomputes_;
      HZ_LOG_WARN("request {}: a far KV block failed its checksum; recomputing the sequence", slices[i].seq->id);
      sched_->restart(slices[i].seq);
    }
  }
  return redo;
}

Result<uint64_t> LocalEngine::submit(GenerationRequest req) {
  const int32_t max_len = opts_.max_model_len;
  if (req.prompt.empty()) return invalid_argument("the prompt is empty (it must have at least one token)");
  for (int32_t id : req.prompt) {
    if (id < 0 || id >= info_.vocab_size)
      return invalid_argument("prompt token id {} is outside the vocabulary [0, {})", id, info_.vocab_size);
  }
  if (static_cast<int64_t>(req.prompt.size()) >= max_len)
    return out_of_range("the prompt has {} tokens; --max-model-len {} allows at most {} prompt tokens", req.prompt.size(),
                        max_len, max_len - 1);
  if (req.sampling.max_tokens < 1) return invalid_argument("max_tokens must be at least 1, got {}", req.sampling.max_tokens);
  const int64_t total = std::min<int64_t>(max_len, static_cast<int64_t>(req.prompt.size()) + req.sampling.max_tokens);
  const int64_t far_blocks = far_ ? far_->capacity() : 0;
  if (kv_->blocks_for(total) > kv_->config().num_blocks + far_blocks)
    return out_of_range("the prompt and max_tokens need {} tokens of KV cache; the pool holds {} tokens{} (raise --kv-budget{})",
                        total, static_cast<int64_t>(kv_->config().num_blocks) * kv_->config().block_tokens,
                        far_ ? fmt::format(" in RAM and {} on disk", far_blocks * kv_->config().block_tokens) : "",
                        far_ ? " or --kv-disk-budget" : " or add a disk tier, --kv-disk-dir");
  if (!req.sink) return invalid_argument("no event sink");
  std::lock_guard<std::mutex> lk(mu_);
  if (draining_ || stop_) return Status(StatusCode::kCancelled, "the server is shutting down");
  if (num_queued_ >= opts_.max_queue) {
    ++stats_.queue_rejections_total;
    return Status(StatusCode::kResourceExhausted, fmt::format("the request queue is full ({} waiting)", num_queued_));
  }
  uint64_t id = next_id_++;
  ++num_queued_;
  inbox_.emplace_back(id, std::move(req));
  cv_.notify_all();
  return id;
}

void LocalEngine::cancel(uint64_t request_id) {
  std::lock_guard<std::mutex> lk(mu_);
  cancels_.push_back(request_id);
  cv_.notify_all();
}

std::vector<int32_t> LocalEngine::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  return tokenizer_->encode(text, add_special, parse_special);
}

std::string LocalEngine::detokenize(const std::vector<int32_t>& ids) const { return tokenizer_->decode(ids); }

EngineStats LocalEngine::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

void LocalEngine::begin_drain() {
  std::lock_guard<std::mutex> lk(mu_);
  draining_ = true;
  stats_.draining = true;
}

bool LocalEngine::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  auto idle = [&] { return inbox_.empty() && stats_.running == 0 && stats_.waiting == 0; };
  if (idle_cv_.wait_for(lk, timeout, idle)) return true;
  // Out of time: cancel what is left and wait briefly for the cancellations to land.
  for (const auto& [id, r] : inbox_) cancels_.push_back(id);
  for (uint64_t id = 1; id < next_id_; ++id) cancels_.push_back(id);
  cv_.notify_all();
  idle_cv_.wait_for(lk, std::chrono::seconds(5), idle);
  return false;
}

void LocalEngine::drain_inbox() {
  std::deque<std::pair<uint64_t, GenerationRequest>> incoming;
  std::vector<uint64_t> cancels;
  {
    std::lock_guard<std::mutex> lk(mu_);
    incoming.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (auto& [id, g] : incoming) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->sink = std::move(g.sink);
    r->params = g.sampling;
    r->deadline = g.deadline;
    uint64_t seed = g.sampling.seed ? *g.sampling.seed : std::random_device{}();
    r->sampler = std::make_unique<Sampler>(g.sampling, seed);
    r->sampler->add_prompt_tokens(g.prompt);
    r->detok = std::make_unique<StreamingDetokenizer>(*tokenizer_);
    r->stop = std::make_unique<StopMatcher>(g.sampling.stop);
    r->prompt_tokens = static_cast<int32_t>(g.prompt.size());
    r->max_new_tokens = std::min<int32_t>(g.sampling.max_tokens, opts_.max_model_len - r->prompt_tokens);
    auto seq = std::make_unique<Sequence>();
    seq->id = id;
    seq->tokens = std::move(g.prompt);
    seq->num_prompt_tokens = r->prompt_tokens;
    sched_->add(std::move(seq));
    requests_.emplace(id, std::move(r));
  }
  for (uint64_t id : cancels) {
    if (requests_.count(id) != 0) finish(id, FinishReason::kCancelled);
  }
}

void LocalEngine::finish(uint64_t id, FinishReason reason, Status error) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  std::unique_ptr<Request> r = std::move(it->second);
  requests_.erase(it);
  std::unique_ptr<Sequence> seq = sched_->remove(id);
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
    std::string tail = r->detok->flush();
    bool stopped = false;
    std::string out = r->stop->push(tail, &stopped);
    if (!stopped) out += r->stop->flush();
    if (!out.empty()) {
      GenerationEvent ev;
      ev.kind = GenerationEvent::Kind::kTokens;
      ev.text = std::move(out);
      r->sink->on_event(std::move(ev));
    }
  }
  GenerationEvent ev;
  ev.kind = GenerationEvent::Kind::kFinished;
  ev.finish_reason = reason;
  ev.error = std::move(error);
  ev.prompt_tokens = r->prompt_tokens;
  ev.completion_tokens = r->generated;
  ev.cached_tokens = seq ? seq->num_cached_tokens : 0;
  r->sink->on_event(std::move(ev));
  std::lock_guard<std::mutex> lk(mu_);
  ++stats_.requests_finished_total;
  stats_.prompt_tokens_total += r->prompt_tokens;
}

void LocalEngine::step() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<uint64_t> expired;
  for (const auto& [id, r] : requests_) {
    if (r->deadline && now > *r->deadline) expired.push_back(id);
  }
  for (uint64_t id : expired) finish(id, FinishReason::kTimeout);

  std::vector<ScheduledSlice> slices = sched_->schedule();
  if (slices.empty()) {
    // Nothing could run although sequences are running: the lone one cannot grow (its far blocks
    // found no room on disk: the disk tier is full or failed). It cannot continue.
    if (sched_->num_running() > 0 && sched_->num_waiting() == 0) {
      const uint64_t id = sched_->running().front()->id;
      finish(id, FinishReason::kError,
             Status(StatusCode::kResourceExhausted,
                    "the KV cache is full: the RAM pool and the disk tier hold no more of this sequence's context"));
    }
    return;
  }
  std::vector<SeqSlice> batch;
  std::vector<bool> samples;
  batch.reserve(slices.size());
  for (const auto& s : slices) {
    SeqSlice x;
    x.tokens = s.seq->tokens.data() + s.seq->num_computed;
    x.num_tokens = s.num_tokens;
    x.start_pos = s.seq->num_computed;
    x.block_table = s.seq->block_table.data();
    batch.push_back(x);
    samples.push_back(s.samples());
  }
  model_->forward(batch, *kv_, *pool_, &logits_);
  // A far block that failed its checksum was read this step: those sequences are recomputed (and
  // left out of the commit and the sampling); everything else stands.
  const std::vector<bool> redo = redo_corrupt(slices);
  if (std::find(redo.begin(), redo.end(), true) != redo.end()) {
    std::vector<ScheduledSlice> kept;
    for (size_t i = 0; i < slices.size(); ++i) {
      if (!redo[i]) kept.push_back(slices[i]);
    }
    sched_->commit(kept);
  } else {
    sched_->commit(slices);
  }
  if (step_hook_) step_hook_(far_.get());

  const int32_t vocab = info_.vocab_size;
  uint64_t new_tokens = 0;
  std::vector<std::pair<uint64_t, FinishReason>> done;
  for (size_t i = 0; i < slices.size(); ++i) {
    if (!samples[i] || redo[i]) continue;
    Sequence* seq = slices[i].seq;
    Request& r = *requests_.at(seq->id);
    float* row = &logits_[i * static_cast<size_t>(vocab)];
    GenerationEvent ev;
    ev.kind = GenerationEvent::Kind::kTokens;
    TokenLogprob chosen;
    std::vector<TokenLogprob> top;
    const bool want_lp = r.params.logprobs || r.params.top_logprobs > 0;
    int32_t tok = r.sampler->sample(row, vocab, want_lp ? &chosen : nullptr, want_lp ? &top : nullptr);
    r.sampler->accept(tok);
    seq->tokens.push_back(tok);
    ++r.generated;
    ++new_tokens;
    const bool is_stop_token = (!r.params.ignore_eos && tokenizer_->is_eog(tok)) ||
                               std::find(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end(), tok) !=
                                   r.params.stop_token_ids.end();
    bool stopped = is_stop_token;
    ev.token_ids.push_back(tok);
    if (!is_stop_token) ev.text = r.stop->push(r.detok->push(tok), &stopped);
    if (want_lp) {
      chosen.text = tokenizer_->token_to_piece(tok);
      for (auto& t : top) t.text = tokenizer_->token_to_piece(t.token);
      ev.chosen.push_back(std::move(chosen));
      ev.top.push_back(std::move(top));
    }
    r.sink->on_event(std::move(ev));
    if (stopped) {
      done.emplace_back(seq->id, FinishReason::kStop);
    } else if (r.generated >= r.max_new_tokens || static_cast<int64_t>(seq->tokens.size()) >= opts_.max_model_len) {
      done.emplace_back(seq->id, FinishReason::kLength);
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.generation_tokens_total += new_tokens;
    ++stats_.steps_total;
    stats_.max_seqs_in_step = std::max<int32_t>(stats_.max_seqs_in_step, static_cast<int32_t>(slices.size()));
  }
  for (const auto& [id, reason] : done) finish(id, reason);
}

void LocalEngine::publish_stats() {
  std::lock_guard<std::mutex> lk(mu_);
  num_queued_ = static_cast<int32_t>(inbox_.size()) + sched_->num_waiting();
  stats_.running = sched_->num_running();
  stats_.waiting = num_queued_;
  stats_.preemptions_total = sched_->num_preemptions();
  const BlockPool& p = kv_->pool();
  stats_.kv_blocks_used = p.num_used();
  stats_.kv_blocks_free = p.num_free();
  stats_.kv_blocks_cached = p.num_cached();
  if (prefix_cache_) {
    stats_.prefix_cache_queries = prefix_cache_->queries();
    stats_.prefix_cache_hits = prefix_cache_->hits();
    stats_.prefix_cache_evictions = prefix_cache_->evictions();
  }
  stats_.kv_ram_bytes_total = kv_->total_bytes();
  stats_.kv_ram_bytes_used = static_cast<uint64_t>(p.num_used() + p.num_cached()) * kv_->block_bytes();
  if (disk_tier_) {
    const kvstore::StoreStats d = kv_store_->stats();
    const DiskTierStats& t = disk_tier_->stats();
    stats_.kv_disk_enabled = true;
    stats_.kv_disk_degraded = d.degraded;
    stats_.kv_disk_blocks = d.blocks;
    stats_.kv_disk_bytes_used = d.bytes_used;
    stats_.kv_disk_bytes_total = d.slots_total * kv_store_->slot_bytes();
    stats_.kv_disk_hits = d.hits;
    stats_.kv_disk_promotions = t.promotions;
    stats_.kv_disk_demotions = t.demotions;
    stats_.kv_disk_writes = d.writes;
    stats_.kv_disk_evictions = d.evictions;
    stats_.kv_disk_checksum_failures = d.checksum_failures;
    stats_.kv_disk_io_errors = d.io_errors;
    stats_.kv_disk_read_bytes = d.read_bytes;
    stats_.kv_disk_write_bytes = d.write_bytes;
    stats_.kv_disk_read_seconds = d.read_seconds;
    stats_.kv_disk_write_seconds = d.write_seconds;
  }
  if (far_) {
    const FarTierStats f = far_->stats();
    stats_.kv_far_enabled = true;
    stats_.kv_far_degraded = f.degraded;
    stats_.kv_far_blocks = f.blocks;
    stats_.kv_far_bytes_used = f.blocks * kv_->block_bytes();
    stats_.kv_far_bytes_total = f.capacity * kv_->block_bytes();
    stats_.kv_far_spills = f.spills;
    stats_.kv_far_read_bytes = f.read_bytes;
    stats_.kv_far_write_bytes = f.write_bytes;
    stats_.kv_far_checksum_failures = f.checksum_failures;
    stats_.kv_far_io_errors = f.io_errors;
    stats_.kv_far_recomputes = far_recomputes_;
  }
  stats_.last_progress = std::chrono::steady_clock::now();
  if (inbox_.empty() && requests_.empty()) idle_cv_.notify_all();
}

void LocalEngine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(100),
                   [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || !requests_.empty(); });
      if (stop_) break;
    }
    drain_inbox();
    step();
    // Write-behind when idle: the prefixes of finished requests go to disk while nothing waits,
    // so a crash (SIGKILL) loses at most what ran since the engine was last idle.
    if (disk_tier_ && requests_.empty() && prefix_cache_->inserts() != persisted_inserts_) {
      bool idle;
      {
        std::lock_guard<std::mutex> lk(mu_);
        idle = inbox_.empty();
      }
      if (idle) {
        persisted_inserts_ = prefix_cache_->inserts();
        disk_tier_->persist_all();
      }
    }
    publish_stats();
  }
  // Shutdown: every request still open gets its final event.
  std::vector<uint64_t> open;
  for (const auto& [id, r] : requests_) open.push_back(id);
  for (uint64_t id : open) finish(id, FinishReason::kCancelled);
}

}  // namespace hz
