// LocalEngine: the in-process engine behind the Engine interface. One engine thread owns the model,
// the KV cache and the scheduler and runs the step loop (schedule -> forward -> sample -> emit);
// other threads only touch the inbox (under a mutex) and the stats snapshot.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "base/thread_pool.h"
#include "kernels/cuda/backend.h"
#include "kv/disk_tier.h"
#include "kv/kv_cache.h"
#include "kv/kv_manager.h"
#include "kv/prefix_cache.h"
#include "kvstore/kv_store.h"
#include "model/device_model.h"
#include "model/model.h"
#include "runtime/drafter.h"
#include "runtime/engine_api.h"
#include "runtime/engine_options.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace hz {

class LocalEngine : public Engine {
 public:
  // Loads the model and tokenizer, sizes the KV pool and starts the engine thread.
  static Result<std::unique_ptr<LocalEngine>> create(const EngineOptions& opts);
  ~LocalEngine() override;

  Result<uint64_t> submit(GenerationRequest request) override;
  void cancel(uint64_t request_id) override;
  Status submit_embeddings(EmbeddingJob job) override;
  std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const override;
  std::vector<int32_t> tokenize_mixed(std::string_view text, std::span<const TextRange> plain,
                                      bool add_special) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  const Tokenizer* get_tokenizer() const override { return tokenizer_.get(); }
  const ModelInfo& model_info() const override { return info_; }
  EngineStats stats() const override;
  void begin_drain() override;
  bool wait_idle(std::chrono::milliseconds timeout) override;

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Model& model() const { return *model_; }
  const EngineOptions& options() const { return opts_; }
  const KvCache& kv() const { return *kv_; }  // the CPU's KV cache (not with --device cuda)
  // The device path (--device cuda or its host emulation): the model's device copy, else null.
  const DeviceModel* device_model() const { return device_model_.get(); }
  const KvPlan& kv_plan() const { return plan_; }
  // The disk tier's fingerprint (what makes this engine's KV reusable); zero without a disk tier.
  const kvstore::Fingerprint& kv_fingerprint() const { return fingerprint_; }
  // Tests: injects I/O faults into the disk tier's writes. Call before the first request.
  void set_kv_disk_io_fault(kvstore::IoFault f) {
    if (far_) far_->set_io_fault(f);
    if (kv_store_) kv_store_->set_io_fault(std::move(f));
  }
  // Tests: runs on the engine thread after every step (e.g. to corrupt a far block on disk).
  void set_step_hook(std::function<void(FarTier*)> f) { step_hook_ = std::move(f); }

 private:
  struct Request;  // per-request runtime state (sampler, detokenizer, sink), engine thread only

  LocalEngine() = default;
  // --device cuda: the backend, the weights on it and the KV manager over a device arena.
  Status open_device(KvOptions ko);
  uint64_t kv_block_bytes() const;
  void loop();
  void drain_inbox();
  void run_embeddings();  // the queued embedding jobs, between steps
  void step();
  // One step's forward batch, built from the scheduled slices (drafts appended to their slices).
  struct StepBatch {
    std::vector<SeqSlice> slices;
    std::vector<bool> samples;       // per slice: whether it samples a token this step
    std::vector<size_t> first_row;   // per slice: its first logits row
    std::vector<size_t> sample_row;  // per slice: the row its next token is sampled from
    bool decode_only = true;         // every slice samples after one real token (speculation's cost)
    bool any_draft = false;
  };
  StepBatch build_batch(const std::vector<ScheduledSlice>& slices, std::chrono::steady_clock::time_point now);
  // Tokens emitted, drafted and accepted by one step's sampling.
  struct StepCounts {
    uint64_t new_tokens = 0, drafted = 0, accepted = 0;
  };
  // Samples every slice that samples (not those in `redo`) and verifies drafts: row j of a
  // speculative slice holds the logits after its j-th draft token. Rejected draft positions are
  // cut from the slices (they roll back at commit); finished sequences go to `done`.
  // A sequence that finished in a step, and why (error: with kError).
  struct Finished {
    uint64_t id;
    FinishReason reason;
    Status error;
  };
  StepCounts sample_step(std::vector<ScheduledSlice>& slices, const StepBatch& b, const std::vector<bool>& redo,
                         std::vector<Finished>* done);
  // The error of a request whose logits row (predicting the token after `position`) holds a NaN
  // or an infinity.
  Status non_finite_logits(const Request& r, int64_t position) const;
  // Prompt logprobs: scores the prompt positions of this step's slices for the requests that asked,
  // and sends a request's scores once its prompt has run (before its first token is sampled).
  void score_prompts(const std::vector<ScheduledSlice>& slices, const StepBatch& b, const std::vector<bool>& redo);
  // Adaptive speculation: the seconds per emitted token of a decode-only step, with or without drafts.
  void record_spec_cost(const StepBatch& b, double seconds, uint64_t new_tokens);
  // Samples the next token of `seq` from its logits `row` and emits it; the reason it finished, if so.
  // With `draft` >= 0 (a drafted token for this position) it is verified (Sampler::sample_draft):
  // the token appended equals `draft` when it is accepted.
  std::optional<FinishReason> sample_next(Sequence& seq, float* row, int32_t draft = -1);
  // Speculative decoding: fills the draft of every running sequence that decodes this step.
  void propose_drafts();
  // Adaptive drafting: the next draft length and pause of `r` after `kept` of `drafted` were kept.
  void adapt_draft(Request& r, int32_t drafted, int32_t kept);
  void finish(uint64_t id, FinishReason reason, Status error = Status());
  void publish_stats();
  KvModelInfo kv_model_info(const KvPlan& plan) const;
  kvstore::FingerprintInputs fingerprint_inputs() const;
  void fill_model_info();
  // Sequences of this step whose far blocks failed their checksum: recomputed, not sampled.
  std::vector<bool> redo_corrupt(const std::vector<ScheduledSlice>& slices);

  EngineOptions opts_;
  ModelInfo info_;
  // The device backend outlives everything that holds its memory (declared first, destroyed last).
  std::unique_ptr<cuda::Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<DeviceModel> device_model_;  // --device cuda: the weights and forward pass on the device
  KvPlan plan_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> eog_ids_;  // end-of-generation tokens (held back before min_tokens)
  std::unique_ptr<KvManager> kvm_;  // the KV cache: arena, prefix cache, tiers
  // Parts of kvm_, not owned (null when off): the arena, the disk store (with --kv-disk-dir), the
  // far tier (--kv-disk-dir: running sequences' far blocks), the prefix cache
  // (--enable-prefix-caching or --kv-disk-dir), the disk tier of the prefix cache (with kv_store_).
  KvCache* kv_ = nullptr;
  kvstore::KvStore* kv_store_ = nullptr;
  FarTier* far_ = nullptr;
  PrefixCache* prefix_cache_ = nullptr;
  DiskTier* disk_tier_ = nullptr;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Scheduler> sched_;
  kvstore::Fingerprint fingerprint_;
  uint64_t persisted_inserts_ = 0;  // prefix cache inserts already written behind to disk
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;  // engine thread only
  std::vector<float> logits_;
  std::shared_ptr<Drafter> drafter_;                // null: speculative decoding off
  // Speculation pays only where a step of 1 + d tokens costs less than the tokens it keeps (decode
  // bound by memory bandwidth; not a tiny model bound by compute). With spec_adaptive the engine
  // keeps the seconds per emitted token of decode-only steps with and without drafts (moving
  // averages) and, while drafting costs more per token, drafts nothing for kSpecPauseSteps steps.
  struct SpecCost {
    double plain = 0, spec = 0;  // seconds per emitted token
    int32_t num_plain = 0, num_spec = 0;
    int32_t pause = 0;           // steps left without drafts
  };
  static constexpr int32_t kSpecPauseSteps = 64;
  SpecCost spec_cost_;
  std::vector<std::vector<int32_t>> step_tokens_;  // per slice of a step: next token + draft
  std::vector<float> hidden_;  // embeddings: final hidden states of one input
  std::function<void(FarTier*)> step_hook_;
  uint64_t far_recomputes_ = 0;

  // Inbox: written by any thread under mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Incoming {
    uint64_t id;
    GenerationRequest request;
    std::chrono::steady_clock::time_point arrival;
  };
  std::deque<Incoming> inbox_;
  std::vector<uint64_t> cancels_;
  std::deque<EmbeddingJob> embed_inbox_;
  int32_t num_queued_ = 0;   // inbox + scheduler waiting, for admission
  int32_t num_running_ = 0;  // the scheduler's running sequences (free slots take requests at once)
  bool stop_ = false;
  bool draining_ = false;
  uint64_t next_id_ = 1;
  EngineStats stats_;       // published snapshot
  std::condition_variable idle_cv_;

  std::thread thread_;
};

}  // namespace hz
