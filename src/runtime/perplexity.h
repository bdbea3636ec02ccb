// Perplexity and KL divergence of a model over a text, llama.cpp style: the tokens are cut into
// windows of `ctx` (BOS first), each window is evaluated from scratch, and the second half of each
// window is scored (every scored token has at least ctx/2 tokens of context). A base run's
// next-token distributions can be saved and compared: KL(base || this run) per scored position.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/cuda/backend.h"
#include "kernels/kv_codec.h"
#include "kv/kv_layout.h"
#include "model/model.h"

namespace hz {

struct PerplexityOptions {
  int32_t ctx = 256;
  int32_t block_tokens = 16;
  KvPrecision kv;               // KV element types of the run
  int32_t prefill_chunk = 0;    // tokens per forward call (0: a whole window at once)
  int32_t bos_id = -1;          // first token of every window when >= 0
  bool keep_logprobs = false;   // keep every scored position's log-softmax (for KLD)
  // Called after each window with the running figures: windows done of num_windows, and the sums
  // of the scored tokens' negative log-likelihoods and of their squares (for a standard error).
  std::function<void(int64_t done, int64_t num_windows, double nll_sum, double nll2_sum, int64_t num_scored)> on_window;
};

struct PerplexityResult {
  double ppl = 0;
  double ppl_error = 0;  // standard error of ppl (from the spread of the per-token log-likelihoods)
  double nll_mean = 0;
  int64_t num_scored = 0;
  int32_t num_windows = 0;
  int32_t vocab = 0;
  std::vector<float> logprobs;  // [num_scored][vocab] when keep_logprobs
};

// Perplexity exp(mean nll) and its standard error ppl * sqrt(var(nll) / (n - 1)), to first order.
double perplexity_error(double nll_sum, double nll2_sum, int64_t n);

Result<PerplexityResult> compute_perplexity(Model& model, ThreadPool& pool, const std::vector<int32_t>& tokens,
                                            const PerplexityOptions& opts);
// The same on the GPU path: the model's weights on `backend` (a CUDA backend, or its host
// emulation), one sequence's KV cache on the device in opts.kv (one type for keys and values, no
// hot window: other precisions are errors naming the flag). `model` must be loaded unpacked.
Result<PerplexityResult> compute_perplexity_on_device(const Model& model, cuda::Backend& backend,
                                                      const std::vector<int32_t>& tokens, const PerplexityOptions& opts);

struct KlStats {
  int64_t n = 0;
  double mean = 0, median = 0, p99 = 0, max = 0;
  double top_token_change_rate = 0;  // share of positions whose most likely token differs
};
// KL(base || test) per position over [n][vocab] log-probabilities.
KlStats kl_divergence(const std::vector<float>& base, const std::vector<float>& test, int32_t vocab);

// A saved base run: its tokens, window, vocab and scored log-probabilities.
struct KlBase {
  int32_t ctx = 0;
  int32_t vocab = 0;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};
Status save_kl_base(const std::string& path, const KlBase& base);
Result<KlBase> load_kl_base(const std::string& path);

}  // namespace hz
