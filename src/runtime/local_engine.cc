#include "runtime/local_engine.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <limits>
#include <random>

#include "base/byte_size.h"
#include "base/check.h"
#include "base/finite.h"
#include "base/log.h"
#include "kernels/kernels.h"
#include "kvstore/fingerprint.h"
#include "model/device_model.h"
#include "model/model_shape.h"
#include "planner/capacity_plan.h"
#include "planner/host_info.h"
#include "runtime/drafter.h"
#include "runtime/embedding.h"
#include "runtime/startup_admission.h"
#include "runtime/sampler.h"
#include "runtime/stop_matcher.h"

namespace hz {

struct LocalEngine::Request {
  uint64_t id = 0;
  std::optional<Model::NonFinite> non_finite;  // with check_finite: where its activations first broke
  std::shared_ptr<GenerationSink> sink;
  SamplingParams params;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::optional<std::chrono::steady_clock::time_point> first_token_deadline;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StreamingDetokenizer> detok;
  std::unique_ptr<StopMatcher> stop;
  int32_t prompt_tokens = 0;
  int32_t generated = 0;
  int32_t max_new_tokens = 0;  // after clamping to max_model_len
  // Drafts are proposed for it (speculation is on and it has no grammar: a grammar's mask would
  // reject most context continuations, and each verified row would pay the mask).
  bool speculate = false;
  // Adaptive drafting (EngineOptions::spec_adaptive): the current draft length, and steps left
  // without drafting after drafts that were rejected outright (more after each such miss).
  int32_t draft_len = 0;
  int32_t pause_steps = 0;
  int32_t misses = 0;
  // Prompt logprobs (GenerationRequest::prompt_logprobs): gathered as the prompt's chunks run, one
  // entry per prompt token scored so far (the first has none), sent once the prompt has run (then
  // prompt_logprobs turns off: a recompute after preemption scores nothing again).
  bool prompt_logprobs = false;
  std::vector<TokenLogprob> prompt_chosen;
  std::vector<std::vector<TokenLogprob>> prompt_top;
  // Timings for the request histograms (queue, prefill, decode).
  std::chrono::steady_clock::time_point arrival;  // submit()
  std::optional<std::chrono::steady_clock::time_point> first_scheduled, first_token;
  std::chrono::steady_clock::time_point last_token;
};

namespace {

// Prompt tokens per step of a scored prompt (prompt logprobs): every position's logits are kept
// for the step, 64 x the vocabulary's floats (8 MiB at 32K tokens) per such sequence.
constexpr int32_t kScoredPromptChunk = 64;

uint64_t total_ram_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : (uint64_t{8} << 30);
}

Status check_engine_options(const EngineOptions& opts) {
  if (opts.max_num_seqs < 1) return invalid_argument("--max-num-seqs must be at least 1");
  if (opts.max_num_batched_tokens < 1) return invalid_argument("--max-num-batched-tokens must be at least 1");
  if (opts.prefill_chunk < 1) return invalid_argument("--prefill-chunk must be at least 1");
  if (opts.prefill_with_decode < 0) return invalid_argument("--prefill-while-decoding must be 0 or more");
  if (opts.max_queue < 0) return invalid_argument("--max-queue must be 0 or more (0: no request waits beyond the running ones)");
  if (opts.max_model_len < 0) return invalid_argument("--max-model-len must be positive");
  if (opts.check_finite && opts.device != EngineDevice::kCpu)
    return invalid_argument("--check-finite checks the CPU forward pass; it does not run with --device cuda");
  if (opts.spec != SpecMode::kOff || opts.drafter != nullptr) {
    if (opts.spec_draft_tokens < 1 || opts.spec_draft_tokens > 64)
      return invalid_argument("--spec-draft {} must be between 1 and 64", opts.spec_draft_tokens);
    if (opts.spec_ngram_min < 1 || opts.spec_ngram_max < opts.spec_ngram_min || opts.spec_ngram_max > 64)
      return invalid_argument("--spec-ngram-min {} and --spec-ngram-max {} must satisfy 1 <= min <= max <= 64",
                              opts.spec_ngram_min, opts.spec_ngram_max);
  }
  return Status();
}

KvDemand kv_demand(const EngineOptions& opts, const ModelConfig& c) {
  KvDemand d;
  d.geometry.num_layers = static_cast<uint64_t>(c.num_layers);
  d.geometry.num_heads = static_cast<uint64_t>(c.num_kv_heads);
  d.geometry.head_dim = static_cast<uint64_t>(c.head_dim);
  d.geometry.fp8_row_scales = opts.device != EngineDevice::kCpu;  // the device arena's layout
  d.max_num_seqs = opts.max_num_seqs;
  d.max_model_len = opts.max_model_len;
  d.prefill_chunk = opts.prefill_chunk;
  d.total_ram_bytes = total_ram_bytes();
  return d;
}

StartupDemand startup_demand(const EngineOptions& opts) {
  StartupDemand d;
  d.available_ram_bytes = probe_host().available_ram_bytes;
  d.max_num_seqs = opts.max_num_seqs;
  d.max_model_len = opts.max_model_len;
  d.prefill_chunk = opts.prefill_chunk;
  d.threads = opts.threads;
  d.far_on_disk = !opts.kv_disk_dir.empty();
  return d;
}

}  // namespace

Result<std::unique_ptr<LocalEngine>> LocalEngine::create(const EngineOptions& opts) {
  std::unique_ptr<LocalEngine> e(new LocalEngine());
  e->opts_ = opts;
  const bool on_device = opts.device != EngineDevice::kCpu;
  HZ_ASSIGN_OR_RETURN(e->model_, Model::load(opts.model_path, opts.model_overrides, /*pack=*/!on_device));
  HZ_ASSIGN_OR_RETURN(e->tokenizer_, Tokenizer::from_gguf(e->model_->file()));
  const ModelConfig& c = e->model_->config();
  if (e->tokenizer_->vocab_size() != c.vocab)
    return data_loss("{}: the tokenizer has {} tokens but token_embd.weight has {} rows", opts.model_path,
                     e->tokenizer_->vocab_size(), c.vocab);
  HZ_RETURN_IF_ERROR(check_engine_options(opts));
  for (int32_t id = 0; id < c.vocab; ++id) {
    if (e->tokenizer_->is_eog(id)) e->eog_ids_.push_back(id);
  }
  e->model_->set_check_finite(opts.check_finite);
  e->opts_.max_model_len = opts.max_model_len > 0 ? opts.max_model_len : c.train_ctx;
  if (c.train_ctx > 0 && e->opts_.max_model_len > c.train_ctx && c.rope.scaling == RopeScaling::kNone)
    HZ_LOG_WARN("--max-model-len {} is beyond the model's context length of {} tokens and no RoPE scaling is set: "
                "output degrades past {} (--rope-scaling yarn or linear extends the context)",
                e->opts_.max_model_len, c.train_ctx, c.train_ctx);
  // KvOptions::validate composes the KV features (the prefix store, hot retention, the far tier).
  KvOptions ko = kv_options(opts);
  if (on_device) {
    HZ_RETURN_IF_ERROR(e->open_device(ko));
  } else {
    HZ_ASSIGN_OR_RETURN(const KvPlan plan, ko.validate(kv_demand(e->opts_, c)));
    HZ_RETURN_IF_ERROR(admit_at_startup(load_model_shape(opts.model_path), plan, startup_demand(e->opts_)).status());
    HZ_ASSIGN_OR_RETURN(e->kvm_, KvManager::open(ko, plan, e->kv_model_info(plan)));
    e->plan_ = plan;
  }
  const KvPlan& plan = e->plan_;
  e->kv_ = e->kvm_->cache();
  e->kv_store_ = e->kvm_->store();
  e->far_ = e->kvm_->far();
  e->prefix_cache_ = e->kvm_->prefix_cache();
  e->disk_tier_ = e->kvm_->disk_tier();
  e->fingerprint_ = e->kvm_->fingerprint();
  e->pool_ = std::make_unique<ThreadPool>(opts.threads);
  SchedulerConfig sc;
  sc.max_num_seqs = opts.max_num_seqs;
  sc.max_num_batched_tokens = opts.max_num_batched_tokens;
  sc.prefill_chunk = opts.prefill_chunk;
  sc.prefill_with_decode = opts.prefill_with_decode;
  sc.block_tokens = plan.block_tokens;
  e->sched_ = std::make_unique<Scheduler>(sc, *e->kvm_);
  if (opts.drafter != nullptr) {
    e->drafter_ = opts.drafter;
  } else if (opts.spec == SpecMode::kNgram) {
    NgramDrafterOptions no;
    no.max_ngram = opts.spec_ngram_max;
    no.min_ngram = opts.spec_ngram_min;
    e->drafter_ = std::make_shared<NgramDrafter>(no);
  }
  e->opts_.enable_prefix_caching = plan.prefix_caching;
  e->fill_model_info();
  e->stats_.max_queue = opts.max_queue;
  e->stats_.kv_blocks_total = plan.num_blocks;
  e->stats_.kv_blocks_free = plan.num_blocks;
  e->stats_.last_progress = std::chrono::steady_clock::now();
  e->publish_stats();  // the disk tier's figures are visible before the first step
  LocalEngine* raw = e.get();
  e->thread_ = std::thread([raw] { raw->loop(); });
  return e;
}

// The GPU path (or its host emulation): the weights uploaded, then the KV cache in what device
// memory is left after them and one step's scratch (a --kv-budget, when given, is taken as is).
Status LocalEngine::open_device(KvOptions ko) {
  const ModelConfig& c = model_->config();
  HZ_RETURN_IF_ERROR(DeviceModel::check_supported(c));
  HZ_ASSIGN_OR_RETURN(backend_, make_device_backend(opts_.device));
  ko.backend = "cuda";
  // The flags the device KV cache lacks fail before the weights are uploaded.
  {
    KvOptions probe = ko;
    probe.budget_bytes = uint64_t{1} << 40;
    HZ_ASSIGN_OR_RETURN(const KvPlan p, probe.validate(kv_demand(opts_, c)));
    HZ_RETURN_IF_ERROR(KvManager::check_device_options(ko, p));
  }
  HZ_ASSIGN_OR_RETURN(device_model_, DeviceModel::create(*model_, *backend_));
  HZ_LOG_INFO("{}: weights {} on the device", backend_->describe(), format_bytes(device_model_->weight_bytes()));
  if (ko.budget_bytes == 0) {
    HZ_ASSIGN_OR_RETURN(const uint64_t free, backend_->free_bytes());
    const int64_t step_tokens = std::max(opts_.max_num_batched_tokens, opts_.prefill_chunk) + opts_.max_num_seqs * 65;
    const uint64_t scratch = DeviceModel::scratch_bytes_for(c, step_tokens, opts_.max_model_len);
    // What the CUDA runtime, graphs and the allocator keep besides our buffers.
    const uint64_t reserve = opts_.device == EngineDevice::kCuda ? (uint64_t{1} << 30) : 0;
    const uint64_t usable = free > scratch + reserve ? (free - scratch - reserve) / 10 * 9 : 0;
    // As on the CPU: room for max_num_seqs full-length sequences; on the host emulation also at
    // most a quarter of free RAM.
    const KvGeometry g = kv_demand(opts_, c).geometry;  // the device arena's layout
    const uint64_t block = hz::kv_block_bytes(g, ko.hot_type, static_cast<uint64_t>(ko.block_tokens));
    const uint64_t wanted = (static_cast<uint64_t>(opts_.max_model_len) + ko.block_tokens - 1) / ko.block_tokens *
                            static_cast<uint64_t>(opts_.max_num_seqs) * block;
    ko.budget_bytes = std::min(wanted, opts_.device == EngineDevice::kCuda ? usable : free / 4);
    if (ko.budget_bytes < block)
      return out_of_range("--device cuda: {} of device memory is free after the weights ({}), not enough for one KV block "
                          "and a step's {} of activations (lower --max-num-batched-tokens, or use a smaller model or "
                          "weight type)",
                          format_bytes(free), format_bytes(device_model_->weight_bytes()), format_bytes(scratch));
  }
  HZ_ASSIGN_OR_RETURN(plan_, ko.validate(kv_demand(opts_, c)));
  HZ_ASSIGN_OR_RETURN(kvm_, KvManager::open_device(ko, plan_, kv_model_info(plan_), *backend_));
  HZ_LOG_INFO("KV cache on the device: {} blocks of {} tokens ({})", plan_.num_blocks, plan_.block_tokens,
              format_bytes(static_cast<uint64_t>(plan_.num_blocks) * plan_.block_bytes));
  return Status();
}

uint64_t LocalEngine::kv_block_bytes() const { return plan_.block_bytes; }

KvModelInfo LocalEngine::kv_model_info(const KvPlan& plan) const {
  const ModelConfig& c = model_->config();
  KvModelInfo m;
  m.num_layers = c.num_layers;
  m.num_kv_heads = c.num_kv_heads;
  m.head_dim = c.head_dim;
  // Everything the cached K/V depend on: the model, its shape and the cache's layout and types.
  m.identity = fmt::format("{}|{}|L{}|H{}|D{}|V{}|{}|bt{}", c.name, opts_.model_path, c.num_layers, c.num_kv_heads,
                           c.head_dim, c.vocab, kv_precision_name(plan.precision), plan.block_tokens);
  m.fingerprint_inputs = [this] { return fingerprint_inputs(); };
  return m;
}

kvstore::FingerprintInputs LocalEngine::fingerprint_inputs() const {
  const ModelConfig& c = model_->config();
  kvstore::FingerprintInputs fi;
  fi.weights = kvstore::digest_weights(model_->file());
  fi.tokenizer = fmt::format("vocab {} bos {} eos {}", tokenizer_->vocab_size(), tokenizer_->bos_id(), tokenizer_->eos_id());
  const RopeConfig& r = c.rope;
  fi.rope = fmt::format("dim {} base {:a} scaling {} scale {:a} orig {} ext {:a} attn {:a} beta {:a}/{:a} llama3 {:a}/{:a} factors",
                        r.dim, r.freq_base, static_cast<int>(r.scaling), r.freq_scale, r.orig_ctx, r.ext_factor,
                        r.attn_factor, r.beta_fast, r.beta_slow, r.low_freq_factor, r.high_freq_factor);
  for (float f : r.freq_factors) fi.rope += fmt::format(" {:a}", f);
  // The kernels' ISA too: scalar and AVX2 kernels may differ in the last bits of the K/V they
  // compute, and a disk hit must give exactly what this engine would have computed.
  fi.identity = fmt::format("{}|L{}|H{}|KV{}|D{}|DV{}|V{}|SW{}|eps {:a}|isa {}", c.arch, c.num_layers, c.num_heads,
                            c.num_kv_heads, c.head_dim, c.head_dim_v, c.vocab, c.sliding_window, c.rms_eps,
                            kernels::isa_name(kernels::active_isa()));
  return fi;
}

void LocalEngine::fill_model_info() {
  const ModelConfig& c = model_->config();
  ModelInfo& info = info_;
  const std::string file = opts_.model_path.substr(opts_.model_path.find_last_of('/') + 1);
  info.name = !opts_.served_model_name.empty() ? opts_.served_model_name : file;
  info.path = opts_.model_path;
  info.max_model_len = opts_.max_model_len;
  info.vocab_size = c.vocab;
  info.max_token_bytes = static_cast<int32_t>(std::min<size_t>(tokenizer_->max_token_bytes(), INT32_MAX));
  auto tmpl = model_->file().get_string_or("tokenizer.chat_template", "");
  if (tmpl.ok()) info.chat_template = *tmpl;
  if (tokenizer_->bos_id() >= 0) info.bos_token = tokenizer_->token_text(tokenizer_->bos_id());
  if (tokenizer_->eos_id() >= 0) info.eos_token = tokenizer_->token_text(tokenizer_->eos_id());
  info.created_unix = static_cast<int64_t>(std::time(nullptr));
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

std::vector<bool> LocalEngine::redo_corrupt(const std::vector<ScheduledSlice>& slices) {
  std::vector<bool> redo(slices.size(), false);
  if (!far_) return redo;
  const std::vector<int32_t> bad = far_->take_corrupt();
  if (bad.empty()) return redo;
  for (size_t i = 0; i < slices.size(); ++i) {
    for (BlockRef b : slices[i].seq->block_table) {
      if (b.is_far() && std::find(bad.begin(), bad.end(), b.idx) != bad.end()) redo[i] = true;
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
  HZ_RETURN_IF_ERROR(check_sampling(req.sampling));
  if (req.sampling.max_tokens < (req.prompt_logprobs ? 0 : 1))
    return invalid_argument("max_tokens must be at least {}, got {}", req.prompt_logprobs ? 0 : 1, req.sampling.max_tokens);
  const int64_t total = std::min<int64_t>(max_len, static_cast<int64_t>(req.prompt.size()) + req.sampling.max_tokens);
  const int64_t far_blocks = far_ ? far_->capacity() : 0;
  const int64_t bt = kvm_->block_tokens(), pool_blocks = kvm_->pool().num_blocks();
  if ((total + bt - 1) / bt > pool_blocks + far_blocks)
    return out_of_range("the prompt and max_tokens need {} tokens of KV cache; the pool holds {} tokens{} (raise --kv-budget{})",
                        total, pool_blocks * bt, far_ ? fmt::format(" in RAM and {} on disk", far_blocks * bt) : "",
                        far_ ? " or --kv-disk-budget" : " or add a disk tier, --kv-disk-dir");
  if (!req.sink) return invalid_argument("no event sink");
  std::lock_guard<std::mutex> lk(mu_);
  if (draining_ || stop_) return Status(StatusCode::kCancelled, "the server is shutting down");
  // Requests that free sequence slots will take at the next step are not waiting: the queue is
  // what stands beyond them.
  const int32_t waiting = num_queued_ - std::max(0, opts_.max_num_seqs - num_running_);
  if (waiting >= opts_.max_queue) {
    ++stats_.queue_rejections_total;
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("the request queue is full ({} waiting, --max-queue {})", waiting, opts_.max_queue));
  }
  uint64_t id = next_id_++;
  ++num_queued_;
  inbox_.push_back(Incoming{id, std::move(req), std::chrono::steady_clock::now()});
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

std::vector<int32_t> LocalEngine::tokenize_mixed(std::string_view text, std::span<const TextRange> plain,
                                                bool add_special) const {
  return tokenizer_->encode_mixed(text, plain, add_special);
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
  for (const Incoming& in : inbox_) cancels_.push_back(in.id);
  for (uint64_t id = 1; id < next_id_; ++id) cancels_.push_back(id);
  cv_.notify_all();
  idle_cv_.wait_for(lk, std::chrono::seconds(5), idle);
  return false;
}

Status LocalEngine::submit_embeddings(EmbeddingJob job) {
  if (device_model_ != nullptr) return unimplemented("embeddings run on the CPU only (this server runs with --device cuda)");
  for (const auto& input : job.inputs) {
    if (input.empty()) return invalid_argument("an embedding input has no tokens");
    if (static_cast<int64_t>(input.size()) > opts_.max_model_len) {
      return Status(StatusCode::kOutOfRange, fmt::format("an embedding input has {} tokens, more than --max-model-len {}",
                                                         input.size(), opts_.max_model_len));
    }
    for (int32_t t : input) {
      if (t < 0 || t >= info_.vocab_size) return invalid_argument("token id {} is not in the vocabulary", t);
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (draining_) return Status(StatusCode::kCancelled, "the engine is shutting down");
    embed_inbox_.push_back(std::move(job));
  }
  cv_.notify_one();
  return Status();
}

void LocalEngine::run_embeddings() {
  std::deque<EmbeddingJob> jobs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    jobs.swap(embed_inbox_);
  }
  for (EmbeddingJob& job : jobs) {
    std::vector<std::vector<float>> out;
    Status error;
    for (const auto& input : job.inputs) {
      auto v = compute_embedding(*model_, *kvm_, *kv_, *pool_, input, job.pooling, &hidden_);
      if (!v.ok()) {
        error = v.status();
        break;
      }
      out.push_back(std::move(v).value());
    }
    if (error.ok()) job.done(std::move(out));
    else job.done(error);
  }
}

void LocalEngine::drain_inbox() {
  std::deque<Incoming> incoming;
  std::vector<uint64_t> cancels;
  {
    std::lock_guard<std::mutex> lk(mu_);
    incoming.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (auto& [id, g, arrival] : incoming) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->arrival = arrival;
    r->sink = std::move(g.sink);
    r->params = g.sampling;
    r->deadline = g.deadline;
    r->first_token_deadline = g.first_token_deadline;
    uint64_t seed = g.sampling.seed ? *g.sampling.seed : std::random_device{}();
    r->sampler = std::make_unique<Sampler>(g.sampling, seed);
    r->sampler->add_prompt_tokens(g.prompt);
    r->detok = std::make_unique<StreamingDetokenizer>(*tokenizer_);
    r->stop = std::make_unique<StopMatcher>(g.sampling.stop);
    r->prompt_tokens = static_cast<int32_t>(g.prompt.size());
    r->max_new_tokens = std::min<int32_t>(g.sampling.max_tokens, opts_.max_model_len - r->prompt_tokens);
    r->speculate = drafter_ != nullptr && g.sampling.logit_mask == nullptr && g.speculate;
    r->draft_len = opts_.spec_draft_tokens;
    r->prompt_logprobs = g.prompt_logprobs;
    if (r->prompt_logprobs) {
      r->prompt_chosen.push_back(
          {g.prompt.front(), tokenizer_->token_to_piece(g.prompt.front()), std::numeric_limits<float>::quiet_NaN()});
      r->prompt_top.emplace_back();
    }
    auto seq = std::make_unique<Sequence>();
    seq->id = id;
    seq->reuse_prefix = !g.prompt_logprobs;
    if (g.prompt_logprobs) seq->max_chunk = kScoredPromptChunk;
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
  ev.max_tokens = r->max_new_tokens;
  if (r->first_scheduled) {
    using Seconds = std::chrono::duration<double>;
    ev.ran = true;
    ev.queue_seconds = Seconds(*r->first_scheduled - r->arrival).count();
    if (r->first_token) {
      ev.prefill_seconds = Seconds(*r->first_token - *r->first_scheduled).count();
      ev.decode_seconds = Seconds(r->last_token - *r->first_token).count();
    } else {
      ev.prefill_seconds = Seconds(std::chrono::steady_clock::now() - *r->first_scheduled).count();
    }
  }
  r->sink->on_event(std::move(ev));
  std::lock_guard<std::mutex> lk(mu_);
  ++stats_.requests_finished_total;
  stats_.prompt_tokens_total += r->prompt_tokens;
}

std::optional<FinishReason> LocalEngine::sample_next(Sequence& seq, float* row, int32_t draft) {
  const int32_t vocab = info_.vocab_size;
  Request& r = *requests_.at(seq.id);
  GenerationEvent ev;
  ev.kind = GenerationEvent::Kind::kTokens;
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
  const bool want_lp = r.params.logprobs || r.params.top_logprobs > 0;
  if (r.generated < r.params.min_tokens) {
    // Not yet: the tokens that would end the output cannot be chosen.
    for (int32_t id : eog_ids_) row[id] = -std::numeric_limits<float>::infinity();
    for (int32_t id : r.params.stop_token_ids) {
      if (id >= 0 && id < vocab) row[id] = -std::numeric_limits<float>::infinity();
    }
  }
  const int32_t tok = draft >= 0 ? r.sampler->sample_draft(row, vocab, draft, nullptr, want_lp ? &chosen : nullptr,
                                                           want_lp ? &top : nullptr)
                                  : r.sampler->sample(row, vocab, want_lp ? &chosen : nullptr, want_lp ? &top : nullptr);
  r.sampler->accept(tok);
  seq.tokens.push_back(tok);
  ++r.generated;
  r.last_token = std::chrono::steady_clock::now();
  if (!r.first_token) r.first_token = r.last_token;
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
  if (stopped) return FinishReason::kStop;
  if (r.generated >= r.max_new_tokens || static_cast<int64_t>(seq.tokens.size()) >= opts_.max_model_len)
    return FinishReason::kLength;
  return std::nullopt;
}

Status LocalEngine::non_finite_logits(const Request& r, int64_t position) const {
  // On the device the activations are not checked (--check-finite is CPU only): no cause to give.
  const std::string cause =
      device_model_ == nullptr ? "; " + Model::non_finite_cause(model_->check_finite(), r.non_finite) : "";
  return Status(StatusCode::kInternal,
                fmt::format("the model's logits after position {} are not finite (NaN or infinity): its weights or "
                            "activations are broken{}",
                            position, cause));
}

void LocalEngine::adapt_draft(Request& r, int32_t drafted, int32_t kept) {
  // All kept: one more next time. Some: as many as were kept, plus one. None: one token, and a
  // pause of as many steps as misses in a row (at most 8), so text without repeats costs little.
  if (kept == drafted) {
    r.draft_len = std::min(opts_.spec_draft_tokens, r.draft_len + 1);
    r.misses = 0;
  } else if (kept > 0) {
    r.draft_len = kept + 1;
    r.misses = 0;
  } else {
    r.draft_len = 1;
    r.misses = std::min(r.misses + 1, 8);
    r.pause_steps = r.misses;
  }
}

void LocalEngine::propose_drafts() {
  if (drafter_ == nullptr) return;
  const bool paused = spec_cost_.pause > 0;
  if (paused) --spec_cost_.pause;
  for (const auto& s : sched_->running()) {
    s->draft.clear();
    if (paused) continue;
    if (s->num_pending() != 1) continue;
    auto it = requests_.find(s->id);
    if (it == requests_.end() || !it->second->speculate) continue;
    Request& r = *it->second;
    if (r.pause_steps > 0) {
      --r.pause_steps;
      continue;
    }
    // Never past the request's last token: a draft of d tokens can emit d + 1.
    const int32_t max_tokens = std::min(r.draft_len, r.max_new_tokens - r.generated - 1);
    if (max_tokens > 0) drafter_->propose(s->tokens, max_tokens, &s->draft);
  }
}

void LocalEngine::step() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<uint64_t> expired;
  std::vector<uint64_t> late;
  for (const auto& [id, r] : requests_) {
    if (r->deadline && now > *r->deadline) {
      expired.push_back(id);
    } else if (r->first_token_deadline && !r->first_token && r->max_new_tokens > 0 && now > *r->first_token_deadline) {
      late.push_back(id);
    }
  }
  for (uint64_t id : expired) finish(id, FinishReason::kTimeout);
  for (uint64_t id : late) {
    const Request& r = *requests_.at(id);
    const double waited = std::chrono::duration<double>(now - r.arrival).count();
    finish(id, FinishReason::kError,
           Status(StatusCode::kDeadlineExceeded,
                  fmt::format("no first token within the first-token time limit: after {:.1f} ms on the engine the "
                              "request {} (the server is busier than the limit allows)",
                              waited * 1e3, r.first_scheduled ? "was still processing its prompt" : "was still queued")));
  }

  propose_drafts();
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
  const StepBatch b = build_batch(slices, now);
  const auto forward_start = std::chrono::steady_clock::now();
  if (device_model_ != nullptr) {
    Status st = device_model_->forward(b.slices, *kvm_->device_arena(), &logits_);
    if (!st.ok()) {
      // A device failure: the step's sequences end with the error (their KV is undefined); the
      // engine stays up for the next requests.
      HZ_LOG_ERROR("device step failed: {}", st.message());
      for (const ScheduledSlice& sl : slices) finish(sl.seq->id, FinishReason::kError, st);
      return;
    }
  } else {
    model_->forward(b.slices, *kv_, *pool_, &logits_);
    if (model_->check_finite()) {
      // Kept per request: a prompt prefilled in chunks may have broken in an earlier step.
      const auto& nf = model_->non_finite();
      for (size_t i = 0; i < slices.size() && i < nf.size(); ++i) {
        auto it = requests_.find(slices[i].seq->id);
        if (nf[i] && it != requests_.end() && !it->second->non_finite) it->second->non_finite = nf[i];
      }
    }
  }
  // A far block that failed its checksum was read this step: those sequences are recomputed (and
  // left out of the commit and the sampling); everything else stands.
  const std::vector<bool> redo = redo_corrupt(slices);
  std::vector<Finished> done;
  score_prompts(slices, b, redo);
  const StepCounts n = sample_step(slices, b, redo, &done);
  const bool any_redo = std::find(redo.begin(), redo.end(), true) != redo.end();
  if (!any_redo) {
    record_spec_cost(b, std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count(),
                     n.new_tokens);
    sched_->commit(slices);
  } else {
    std::vector<ScheduledSlice> kept;
    for (size_t i = 0; i < slices.size(); ++i) {
      if (!redo[i]) kept.push_back(slices[i]);
    }
    sched_->commit(kept);
  }
  if (step_hook_) step_hook_(far_);
  {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.generation_tokens_total += n.new_tokens;
    stats_.spec_draft_tokens_total += n.drafted;
    stats_.spec_accepted_tokens_total += n.accepted;
    ++stats_.steps_total;
    stats_.max_seqs_in_step = std::max<int32_t>(stats_.max_seqs_in_step, static_cast<int32_t>(slices.size()));
  }
  for (Finished& f : done) finish(f.id, f.reason, std::move(f.error));
}

LocalEngine::StepBatch LocalEngine::build_batch(const std::vector<ScheduledSlice>& slices,
                                                std::chrono::steady_clock::time_point now) {
  StepBatch b;
  size_t num_rows = 0;
  b.slices.reserve(slices.size());
  step_tokens_.resize(slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    const ScheduledSlice& s = slices[i];
    if (auto it = requests_.find(s.seq->id); it != requests_.end() && !it->second->first_scheduled)
      it->second->first_scheduled = now;
    SeqSlice x;
    x.tokens = s.seq->tokens.data() + s.seq->num_computed;
    if (s.num_draft > 0) {
      // The next token, then its draft: one contiguous run, every position's logits.
      std::vector<int32_t>& t = step_tokens_[i];
      t.assign(x.tokens, x.tokens + (s.num_tokens - s.num_draft));
      t.insert(t.end(), s.seq->draft.begin(), s.seq->draft.end());
      x.tokens = t.data();
      x.all_logits = true;
      x.num_draft = s.num_draft;
    } else if (auto it = requests_.find(s.seq->id); it != requests_.end() && it->second->prompt_logprobs &&
                                                     s.seq->num_computed + 1 < s.seq->num_prompt_tokens) {
      x.all_logits = true;  // prompt positions to score
    }
    x.num_tokens = s.num_tokens;
    x.start_pos = s.seq->num_computed;
    x.block_table = s.seq->block_table.data();
    b.slices.push_back(x);
    b.samples.push_back(s.samples());
    b.decode_only = b.decode_only && s.samples() && s.num_tokens - s.num_draft == 1;
    b.any_draft = b.any_draft || s.num_draft > 0;
    b.first_row.push_back(num_rows);
    b.sample_row.push_back(num_rows + (x.all_logits ? static_cast<size_t>(x.num_tokens - x.num_draft - 1) : 0));
    num_rows += x.all_logits ? static_cast<size_t>(x.num_tokens) : 1;
  }
  return b;
}

LocalEngine::StepCounts LocalEngine::sample_step(std::vector<ScheduledSlice>& slices, const StepBatch& b,
                                                 const std::vector<bool>& redo,
                                                 std::vector<Finished>* done) {
  // The token sampled from row j is compared with draft token j; the first mismatch (or a finish)
  // ends the run. Kept: the next token and the matching draft tokens.
  const int32_t vocab = info_.vocab_size;
  StepCounts n;
  for (size_t i = 0; i < slices.size(); ++i) {
    if (!b.samples[i] || redo[i]) continue;
    ScheduledSlice& sl = slices[i];
    Sequence& seq = *sl.seq;
    if (requests_.at(seq.id)->max_new_tokens == 0) {  // a prompt scored, nothing to generate
      done->push_back({seq.id, FinishReason::kLength, Status()});
      continue;
    }
    const std::vector<int32_t> draft = std::move(seq.draft);
    seq.draft.clear();
    int32_t kept = 0;
    bool finished = false;
    for (int32_t j = 0;; ++j) {
      const int32_t proposed = j < sl.num_draft ? draft[j] : -1;
      float* row = &logits_[(b.sample_row[i] + j) * static_cast<size_t>(vocab)];
      if (!all_finite(row, vocab)) {
        // Sampling from NaN would print garbage: the request fails, saying where it broke.
        done->push_back({seq.id, FinishReason::kError, non_finite_logits(*requests_.at(seq.id), static_cast<int64_t>(seq.tokens.size()) - 1)});
        finished = true;
        break;
      }
      std::optional<FinishReason> reason = sample_next(seq, row, proposed);
      ++n.new_tokens;
      if (reason) {
        done->push_back({seq.id, *reason, Status()});
        finished = true;
        break;
      }
      if (proposed < 0 || seq.tokens.back() != proposed) break;
      ++kept;
    }
    n.drafted += static_cast<uint64_t>(sl.num_draft);
    n.accepted += static_cast<uint64_t>(kept);
    if (sl.num_draft > 0 && opts_.spec_adaptive && !finished) adapt_draft(*requests_.at(seq.id), sl.num_draft, kept);
    sl.num_tokens -= sl.num_draft - kept;  // the rejected positions roll back at commit
  }
  return n;
}

void LocalEngine::score_prompts(const std::vector<ScheduledSlice>& slices, const StepBatch& b,
                                const std::vector<bool>& redo) {
  const int32_t vocab = info_.vocab_size;
  for (size_t i = 0; i < slices.size(); ++i) {
    if (redo[i]) continue;
    const ScheduledSlice& sl = slices[i];
    const Sequence& seq = *sl.seq;
    auto it = requests_.find(seq.id);
    if (it == requests_.end() || !it->second->prompt_logprobs) continue;
    Request& r = *it->second;
    const int64_t start = seq.num_computed;
    if (b.slices[i].all_logits) {
      // Row j follows position start + j: it scores the prompt token after it. Positions scored
      // before (a prompt recomputed after preemption before it was sent) are skipped.
      for (int32_t j = 0; j < sl.num_tokens - sl.num_draft && start + j + 1 < seq.num_prompt_tokens; ++j) {
        const int64_t next = start + j + 1;
        if (next != static_cast<int64_t>(r.prompt_chosen.size())) continue;
        const int32_t tok = seq.tokens[static_cast<size_t>(next)];
        TokenLogprob chosen;
        std::vector<TokenLogprob> top;
        r.sampler->score(&logits_[(b.first_row[i] + static_cast<size_t>(j)) * static_cast<size_t>(vocab)], vocab, tok,
                         &chosen, &top);
        chosen.text = tokenizer_->token_to_piece(tok);
        for (auto& t : top) t.text = tokenizer_->token_to_piece(t.token);
        r.prompt_chosen.push_back(std::move(chosen));
        r.prompt_top.push_back(std::move(top));
      }
    }
    if (start + sl.num_tokens >= seq.num_prompt_tokens &&
        static_cast<int64_t>(r.prompt_chosen.size()) == seq.num_prompt_tokens) {
      GenerationEvent ev;
      ev.kind = GenerationEvent::Kind::kTokens;
      ev.prompt_chosen = std::move(r.prompt_chosen);
      ev.prompt_top = std::move(r.prompt_top);
      r.prompt_logprobs = false;
      r.sink->on_event(std::move(ev));
    }
  }
}

void LocalEngine::record_spec_cost(const StepBatch& b, double seconds, uint64_t new_tokens) {
  if (drafter_ == nullptr || !opts_.spec_adaptive || !b.decode_only || new_tokens == 0) return;
  const double per_token = seconds / static_cast<double>(new_tokens);
  SpecCost& c = spec_cost_;
  double& avg = b.any_draft ? c.spec : c.plain;
  int32_t& num = b.any_draft ? c.num_spec : c.num_plain;
  avg = num == 0 ? per_token : 0.8 * avg + 0.2 * per_token;
  ++num;
  if (b.any_draft && c.num_spec >= 3 && c.num_plain >= 3 && c.spec > c.plain) c.pause = kSpecPauseSteps;
}

namespace {

// What the engine statistics table's sources (runtime/engine_stats.h) read, one engine step's view.
struct StatsSources {
  const Scheduler& sched;
  const BlockPool& pool;
  uint64_t kv_block_bytes;      // one KV block (RAM or device memory)
  uint64_t kv_total_bytes;      // the pool's capacity
  const PrefixCache* prefix;    // null without prefix caching
  kvstore::StoreStats store;    // the disk tier's store (zero without a disk tier)
  uint64_t store_slot_bytes;
  DiskTierStats disk_tier;
  FarTierStats far;             // zero without a far tier
  uint64_t far_recomputes;
  kvstore::RemoteStats remote;  // the remote tier's store (zero without one)
  RemoteTierStats remote_tier;
};

}  // namespace

void LocalEngine::publish_stats() {
  const StatsSources src{*sched_,
                         kvm_->pool(),
                         kv_block_bytes(),
                         kv_block_bytes() * static_cast<uint64_t>(kvm_->pool().num_blocks()),
                         prefix_cache_,
                         disk_tier_ ? kv_store_->stats() : kvstore::StoreStats{},
                         disk_tier_ ? kv_store_->slot_bytes() : 0,
                         disk_tier_ ? disk_tier_->stats() : DiskTierStats{},
                         far_ ? far_->stats() : FarTierStats{},
                         far_recomputes_,
                         kvm_->remote_tier() ? kvm_->remote_tier()->store().stats() : kvstore::RemoteStats{},
                         kvm_->remote_tier() ? kvm_->remote_tier()->stats() : RemoteTierStats{}};
  std::lock_guard<std::mutex> lk(mu_);
  num_queued_ = static_cast<int32_t>(inbox_.size()) + sched_->num_waiting();
  num_running_ = sched_->num_running();
  stats_.waiting = num_queued_;
  stats_.kv_disk_enabled = disk_tier_ != nullptr;
  stats_.kv_far_enabled = far_ != nullptr;
  stats_.kv_remote_enabled = kvm_->remote_tier() != nullptr;
  // Every row of the table that names a source, in one go.
#define HZ_STATS_FILL(field, type, kind, section, name, label_name, label_value, help, ...) \
  __VA_OPT__(if (stats_.reports(StatsSection::section)) stats_.field = static_cast<type>(__VA_ARGS__);)
#define HZ_STATS_NO_FILL(...)
  HZ_ENGINE_STATS(HZ_STATS_FILL, HZ_STATS_NO_FILL)
#undef HZ_STATS_FILL
#undef HZ_STATS_NO_FILL
  stats_.last_progress = std::chrono::steady_clock::now();
  if (inbox_.empty() && requests_.empty()) idle_cv_.notify_all();
}

void LocalEngine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(100),
                   [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || !requests_.empty() || !embed_inbox_.empty(); });
      if (stop_) break;
    }
    drain_inbox();
    run_embeddings();
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
  std::deque<EmbeddingJob> jobs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    jobs.swap(embed_inbox_);
  }
  for (EmbeddingJob& job : jobs) job.done(Status(StatusCode::kCancelled, "the engine shut down"));
}

}  // namespace hz
