#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/finite.h"
#include "model/device_model.h"
#include "runtime/device_sequence.h"
#include "runtime/single_sequence.h"

namespace hz {

namespace {

// One window's logits, [window][vocab], from an empty cache.
using WindowEval = std::function<Result<const std::vector<float>*>(const std::vector<int32_t>& window)>;

// Where a window's activations first stopped being finite, when the model checks them (else null).
using NonFiniteSite = std::function<std::optional<Model::NonFinite>()>;

Result<PerplexityResult> score_windows(const WindowEval& eval, int32_t vocab, const std::vector<int32_t>& tokens,
                                       const PerplexityOptions& opts, const NonFiniteSite& where = nullptr) {
  PerplexityResult r;
  r.vocab = vocab;
  const int64_t num_windows = static_cast<int64_t>(tokens.size()) / opts.ctx;
  r.num_windows = static_cast<int32_t>(num_windows);
  const int32_t first = opts.ctx / 2;
  double nll = 0, nll2 = 0;
  for (int64_t w = 0; w < num_windows; ++w) {
    std::vector<int32_t> win(tokens.begin() + w * opts.ctx, tokens.begin() + (w + 1) * opts.ctx);
    if (opts.bos_id >= 0) win[0] = opts.bos_id;
    HZ_ASSIGN_OR_RETURN(const std::vector<float>* all, eval(win));
    const std::vector<float>& logits = *all;
    for (int32_t j = first; j < opts.ctx - 1; ++j) {
      const float* l = &logits[static_cast<size_t>(j) * vocab];
      if (!all_finite(l, vocab)) {
        return Status(StatusCode::kInternal,
                      fmt::format("the model's logits after position {} of window {} are not finite (NaN or infinity): "
                                  "its weights or activations are broken; {}",
                                  j, w + 1, Model::non_finite_cause(where != nullptr, where ? where() : std::nullopt)));
      }
      double m = *std::max_element(l, l + vocab), sum = 0;
      for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(l[i]) - m);
      const double lse = m + std::log(sum);
      const int32_t next = tokens[w * opts.ctx + j + 1];
      const double token_nll = lse - l[next];
      nll += token_nll;
      nll2 += token_nll * token_nll;
      ++r.num_scored;
      if (opts.keep_logprobs) {
        for (int32_t i = 0; i < vocab; ++i) r.logprobs.push_back(static_cast<float>(l[i] - lse));
      }
    }
    if (opts.on_window) opts.on_window(w + 1, num_windows, nll, nll2, r.num_scored);
  }
  r.nll_mean = nll / static_cast<double>(r.num_scored);
  r.ppl = std::exp(r.nll_mean);
  r.ppl_error = perplexity_error(nll, nll2, r.num_scored);
  return r;
}

Status check_input(int32_t vocab, const std::vector<int32_t>& tokens, const PerplexityOptions& opts) {
  if (opts.ctx < 4) return invalid_argument("--ctx must be at least 4, got {}", opts.ctx);
  if (static_cast<int64_t>(tokens.size()) / opts.ctx < 1)
    return invalid_argument("the text has {} tokens, fewer than one --ctx window of {}", tokens.size(), opts.ctx);
  for (int32_t t : tokens) {
    if (t < 0 || t >= vocab) return invalid_argument("token id {} is outside the vocabulary [0, {})", t, vocab);
  }
  return Status();
}

}  // namespace

Result<PerplexityResult> compute_perplexity(Model& model, ThreadPool& pool, const std::vector<int32_t>& tokens,
                                            const PerplexityOptions& opts) {
  const int32_t vocab = model.config().vocab;
  HZ_RETURN_IF_ERROR(check_input(vocab, tokens, opts));
  SingleSequenceOptions so;
  so.max_tokens = opts.ctx;
  so.block_tokens = opts.block_tokens;
  so.kv_precision = opts.kv;
  so.prefill_chunk = opts.prefill_chunk;
  SingleSequence seq(model, pool, so);
  return score_windows(
      [&](const std::vector<int32_t>& win) -> Result<const std::vector<float>*> {
        seq.reset();
        return &seq.append(win, /*all_logits=*/true);
      },
      vocab, tokens, opts,
      model.check_finite() ? NonFiniteSite([&] { return seq.non_finite(); }) : NonFiniteSite());
}

Result<PerplexityResult> compute_perplexity_on_device(const Model& model, cuda::Backend& backend,
                                                      const std::vector<int32_t>& tokens, const PerplexityOptions& opts) {
  const int32_t vocab = model.config().vocab;
  HZ_RETURN_IF_ERROR(check_input(vocab, tokens, opts));
  DeviceKvArenaConfig kvc;
  HZ_RETURN_IF_ERROR(DeviceKvArena::apply_precision(opts.kv, &kvc));
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<DeviceModel> dm, DeviceModel::create(model, backend));
  DeviceSequenceOptions so;
  so.max_tokens = opts.ctx;
  so.block_tokens = opts.block_tokens;
  so.kv_codec = kvc.codec;
  so.kv_rotated_k = kvc.rotated_k;
  so.kv_rotated_v = kvc.rotated_v;
  so.prefill_chunk = opts.prefill_chunk;
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<DeviceSequence> seq, DeviceSequence::create(*dm, backend, so));
  return score_windows(
      [&](const std::vector<int32_t>& win) -> Result<const std::vector<float>*> {
        seq->truncate(0);
        return seq->append(win, /*all_logits=*/true);
      },
      vocab, tokens, opts);
}

double perplexity_error(double nll_sum, double nll2_sum, int64_t n) {
  if (n < 2) return 0;
  const double mean = nll_sum / static_cast<double>(n);
  const double var = std::max(0.0, nll2_sum / static_cast<double>(n) - mean * mean);
  return std::exp(mean) * std::sqrt(var / static_cast<double>(n - 1));
}

KlStats kl_divergence(const std::vector<float>& base, const std::vector<float>& test, int32_t vocab) {
  KlStats s;
  const int64_t n = static_cast<int64_t>(std::min(base.size(), test.size()) / vocab);
  std::vector<double> kl(n);
  int64_t changed = 0;
  for (int64_t p = 0; p < n; ++p) {
    const float* b = &base[p * vocab];
    const float* t = &test[p * vocab];
    double acc = 0;
    for (int32_t i = 0; i < vocab; ++i) acc += std::exp(static_cast<double>(b[i])) * (static_cast<double>(b[i]) - t[i]);
    kl[p] = std::max(0.0, acc);  // rounding can give -1e-12
    if (std::max_element(b, b + vocab) - b != std::max_element(t, t + vocab) - t) ++changed;
  }
  s.n = n;
  if (n == 0) return s;
  double sum = 0;
  for (double v : kl) sum += v;
  s.mean = sum / n;
  std::sort(kl.begin(), kl.end());
  s.median = kl[n / 2];
  s.p99 = kl[std::min<int64_t>(n - 1, static_cast<int64_t>(std::ceil(0.99 * n)) - 1)];
  s.max = kl.back();
  s.top_token_change_rate = static_cast<double>(changed) / n;
  return s;
}

namespace {
constexpr char kMagic[8] = {'H', 'Z', 'K', 'L', 'D', 'B', '1', '\0'};
struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
}  // namespace

Status save_kl_base(const std::string& path, const KlBase& b) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (!f) return invalid_argument("--kl-divergence-base {}: cannot open for writing", path);
  const uint32_t ctx = static_cast<uint32_t>(b.ctx), vocab = static_cast<uint32_t>(b.vocab);
  const uint64_t nt = b.tokens.size(), nl = b.logprobs.size();
  bool ok = std::fwrite(kMagic, 1, 8, f.get()) == 8 && std::fwrite(&ctx, 4, 1, f.get()) == 1 &&
            std::fwrite(&vocab, 4, 1, f.get()) == 1 && std::fwrite(&nt, 8, 1, f.get()) == 1 &&
            std::fwrite(&nl, 8, 1, f.get()) == 1 && std::fwrite(b.tokens.data(), 4, nt, f.get()) == nt &&
            std::fwrite(b.logprobs.data(), 4, nl, f.get()) == nl;
  if (!ok) return invalid_argument("--kl-divergence-base {}: write failed", path);
  return Status();
}

Result<KlBase> load_kl_base(const std::string& path) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return not_found("--kl-divergence-base {}: cannot open", path);
  char magic[8];
  uint32_t ctx = 0, vocab = 0;
  uint64_t nt = 0, nl = 0;
  if (std::fread(magic, 1, 8, f.get()) != 8 || std::memcmp(magic, kMagic, 8) != 0)
    return data_loss("--kl-divergence-base {}: not a horizon KL base file (bad magic)", path);
  if (std::fread(&ctx, 4, 1, f.get()) != 1 || std::fread(&vocab, 4, 1, f.get()) != 1 ||
      std::fread(&nt, 8, 1, f.get()) != 1 || std::fread(&nl, 8, 1, f.get()) != 1)
    return data_loss("--kl-divergence-base {}: truncated header", path);
  if (ctx < 4 || vocab == 0 || nt > (uint64_t{1} << 32) || nl > (uint64_t{1} << 36) || nl % vocab != 0)
    return data_loss("--kl-divergence-base {}: implausible header (ctx {}, vocab {}, {} tokens, {} values)", path, ctx,
                     vocab, nt, nl);
  KlBase b;
  b.ctx = static_cast<int32_t>(ctx);
  b.vocab = static_cast<int32_t>(vocab);
  b.tokens.resize(nt);
  b.logprobs.resize(nl);
  if (std::fread(b.tokens.data(), 4, nt, f.get()) != nt || std::fread(b.logprobs.data(), 4, nl, f.get()) != nl)
    return data_loss("--kl-divergence-base {}: truncated data", path);
  return b;
}

}  // namespace hz
