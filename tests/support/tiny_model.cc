#include "support/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "format/gguf.h"

namespace hz::test {
namespace {

using Vec = std::vector<double>;

bool is_neox(const std::string& arch) { return arch != "llama" && arch != "mistral"; }

Vec rms_norm(const Vec& x, const std::vector<float>& w, size_t off = 0, size_t n = 0) {
  if (n == 0) n = x.size();
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
  double r = 1.0 / std::sqrt(ss / n + 1e-5);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[off + i] * r * w[i];
  return y;
}

// y = W x for W [rows][cols] stored at w + offset.
Vec matvec(const std::vector<float>& w, size_t offset, int64_t rows, int64_t cols, const Vec& x) {
  Vec y(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(w[offset + r * cols + c]) * x[c];
    y[r] = s;
  }
  return y;
}

double silu(double v) { return v / (1 + std::exp(-v)); }

Vec swiglu_ffn(const std::vector<float>& g, const std::vector<float>& u, const std::vector<float>& d, size_t off_gu,
               size_t off_d, int64_t ffn, int64_t hidden, const Vec& h) {
  Vec a = matvec(g, off_gu, ffn, hidden, h);
  Vec b = matvec(u, off_gu, ffn, hidden, h);
  for (int64_t i = 0; i < ffn; ++i) a[i] = silu(a[i]) * b[i];
  return matvec(d, off_d, hidden, ffn, a);
}

void rope(double* v, int32_t head_dim, int64_t pos, double base, bool neox) {
  const int32_t half = head_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    double theta = pos * std::pow(base, -2.0 * i / head_dim);
    double c = std::cos(theta), s = std::sin(theta);
    int32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    double x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

}  // namespace

TinyModel TinyModel::random(const TinyModelSpec& s) {
  TinyModel m;
  m.spec = s;
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto add = [&](const std::string& name, std::vector<uint64_t> dims, float scale, float bias = 0.0f) {
    uint64_t n = 1;
    for (auto d : dims) n *= d;
    std::vector<float> v(n);
    for (auto& x : v) x = bias + scale * nd(rng);
    m.w[name] = std::move(v);
    m.dims[name] = std::move(dims);
  };
  const uint64_t H = s.hidden, qd = s.heads * s.head_dim, kd = s.kv_heads * s.head_dim;
  auto mat_scale = [](uint64_t cols) { return 1.0f / std::sqrt(static_cast<float>(cols)); };
  add("token_embd.weight", {H, static_cast<uint64_t>(s.vocab)}, 1.0f);
  add("output_norm.weight", {H}, 0.1f, 1.0f);
  add("output.weight", {H, static_cast<uint64_t>(s.vocab)}, mat_scale(H));
  const bool moe = s.experts > 0;
  const uint64_t eff = s.expert_ffn > 0 ? s.expert_ffn : s.ffn;
  for (int32_t l = 0; l < s.layers; ++l) {
    auto n = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
    add(n("attn_norm.weight"), {H}, 0.1f, 1.0f);
    add(n("attn_q.weight"), {H, qd}, mat_scale(H));
    add(n("attn_k.weight"), {H, kd}, mat_scale(H));
    add(n("attn_v.weight"), {H, kd}, mat_scale(H));
    add(n("attn_output.weight"), {qd, H}, mat_scale(qd));
    if (s.qkv_bias) {
      add(n("attn_q.bias"), {qd}, 0.2f);
      add(n("attn_k.bias"), {kd}, 0.2f);
      add(n("attn_v.bias"), {kd}, 0.2f);
    }
    if (s.qk_norm) {
      // Far from 1 so that leaving the norm out (or applying it to the wrong rows) shows.
      add(n("attn_q_norm.weight"), {static_cast<uint64_t>(s.head_dim)}, 0.5f, 1.0f);
      add(n("attn_k_norm.weight"), {static_cast<uint64_t>(s.head_dim)}, 0.5f, 1.0f);
    }
    add(n("ffn_norm.weight"), {H}, 0.1f, 1.0f);
    if (!moe) {
      add(n("ffn_gate.weight"), {H, static_cast<uint64_t>(s.ffn)}, mat_scale(H));
      add(n("ffn_up.weight"), {H, static_cast<uint64_t>(s.ffn)}, mat_scale(H));
      add(n("ffn_down.weight"), {static_cast<uint64_t>(s.ffn), H}, mat_scale(s.ffn));
    } else {
      const uint64_t E = s.experts;
      add(n("ffn_gate_inp.weight"), {H, E}, s.router_scale * mat_scale(H));
      add(n("ffn_gate_exps.weight"), {H, eff, E}, mat_scale(H));
      add(n("ffn_up_exps.weight"), {H, eff, E}, mat_scale(H));
      add(n("ffn_down_exps.weight"), {eff, H, E}, mat_scale(eff));
      if (s.shared_ffn > 0) {
        const uint64_t sf = s.shared_ffn;
        add(n("ffn_gate_inp_shexp.weight"), {H}, mat_scale(H));
        add(n("ffn_gate_shexp.weight"), {H, sf}, mat_scale(H));
        add(n("ffn_up_shexp.weight"), {H, sf}, mat_scale(H));
        add(n("ffn_down_shexp.weight"), {sf, H}, mat_scale(sf));
      }
    }
  }
  return m;
}

bool TinyModel::write(const std::string& path, const std::function<void(GgufWriter&)>& extra) const {
  const TinyModelSpec& s = spec;
  GgufWriter g;
  const std::string p = s.arch + ".";
  g.set_str("general.architecture", s.arch);
  g.set_str("general.name", "tiny-" + s.arch);
  g.set_u32(p + "block_count", s.layers);
  g.set_u32(p + "embedding_length", s.hidden);
  g.set_u32(p + "feed_forward_length", s.ffn);
  g.set_u32(p + "attention.head_count", s.heads);
  g.set_u32(p + "attention.head_count_kv", s.kv_heads);
  g.set_u32(p + "attention.key_length", s.head_dim);
  g.set_u32(p + "attention.value_length", s.head_dim);
  g.set_u32(p + "context_length", 256);
  g.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  g.set_f32(p + "rope.freq_base", s.rope_base);
  if (s.experts > 0) {
    g.set_u32(p + "expert_count", s.experts);
    g.set_u32(p + "expert_used_count", s.experts_used);
    if (s.expert_ffn > 0) g.set_u32(p + "expert_feed_forward_length", s.expert_ffn);
    if (s.shared_ffn > 0) g.set_u32(p + "expert_shared_feed_forward_length", s.shared_ffn);
  }
  for (const auto& [name, v] : w) g.add_tensor_data(name, DType::kF32, dims.at(name), v.data());
  if (extra) extra(g);
  return g.write(path).ok();
}

std::vector<float> TinyModel::reference_logits(const std::vector<int32_t>& tokens, Trace* trace,
                                               bool skip_qk_norm) const {
  const TinyModelSpec& s = spec;
  const int64_t H = s.hidden, hd = s.head_dim, qd = s.heads * hd, kd = s.kv_heads * hd;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const bool neox = is_neox(s.arch);
  const bool moe = s.experts > 0;
  const bool norm_topk = s.arch != "qwen2moe";
  const int64_t eff = s.expert_ffn > 0 ? s.expert_ffn : s.ffn;
  auto W = [&](const std::string& name) -> const std::vector<float>& { return w.at(name); };
  auto has = [&](const std::string& name) { return w.count(name) > 0; };
  if (trace) trace->experts.assign(s.layers, std::vector<std::vector<int32_t>>(n));

  std::vector<std::vector<Vec>> K(s.layers), V(s.layers);  // [layer][pos][kd]
  std::vector<float> out(n * s.vocab);
  for (int64_t t = 0; t < n; ++t) {
    Vec x(H);
    for (int64_t i = 0; i < H; ++i) x[i] = W("token_embd.weight")[tokens[t] * H + i];
    for (int32_t l = 0; l < s.layers; ++l) {
      auto nm = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
      Vec h = rms_norm(x, W(nm("attn_norm.weight")));
      Vec q = matvec(W(nm("attn_q.weight")), 0, qd, H, h);
      Vec k = matvec(W(nm("attn_k.weight")), 0, kd, H, h);
      Vec v = matvec(W(nm("attn_v.weight")), 0, kd, H, h);
      if (has(nm("attn_q.bias"))) {
        for (int64_t i = 0; i < qd; ++i) q[i] += W(nm("attn_q.bias"))[i];
        for (int64_t i = 0; i < kd; ++i) k[i] += W(nm("attn_k.bias"))[i];
        for (int64_t i = 0; i < kd; ++i) v[i] += W(nm("attn_v.bias"))[i];
      }
      if (has(nm("attn_q_norm.weight")) && !skip_qk_norm) {
        for (int32_t hh = 0; hh < s.heads; ++hh) {
          Vec y = rms_norm(q, W(nm("attn_q_norm.weight")), hh * hd, hd);
          std::copy(y.begin(), y.end(), q.begin() + hh * hd);
        }
        for (int32_t hh = 0; hh < s.kv_heads; ++hh) {
          Vec y = rms_norm(k, W(nm("attn_k_norm.weight")), hh * hd, hd);
          std::copy(y.begin(), y.end(), k.begin() + hh * hd);
        }
      }
      for (int32_t hh = 0; hh < s.heads; ++hh) rope(&q[hh * hd], hd, t, s.rope_base, neox);
      for (int32_t hh = 0; hh < s.kv_heads; ++hh) rope(&k[hh * hd], hd, t, s.rope_base, neox);
      K[l].push_back(k);
      V[l].push_back(v);
      Vec att(qd, 0.0);
      const int32_t group = s.heads / s.kv_heads;
      for (int32_t hh = 0; hh < s.heads; ++hh) {
        const int32_t kvh = hh / group;
        Vec sc(t + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += q[hh * hd + i] * K[l][j][kvh * hd + i];
          sc[j] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (auto& e : sc) sum += (e = std::exp(e - mx));
        for (int64_t j = 0; j <= t; ++j) {
          for (int64_t i = 0; i < hd; ++i) att[hh * hd + i] += sc[j] / sum * V[l][j][kvh * hd + i];
        }
      }
      Vec o = matvec(W(nm("attn_output.weight")), 0, H, qd, att);
      for (int64_t i = 0; i < H; ++i) x[i] += o[i];

      h = rms_norm(x, W(nm("ffn_norm.weight")));
      Vec f(H, 0.0);
      if (!moe) {
        f = swiglu_ffn(W(nm("ffn_gate.weight")), W(nm("ffn_up.weight")), W(nm("ffn_down.weight")), 0, 0, s.ffn, H, h);
      } else {
        Vec logits = matvec(W(nm("ffn_gate_inp.weight")), 0, s.experts, H, h);
        double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
        for (auto& e : logits) sum += (e = std::exp(e - mx));
        for (auto& e : logits) e /= sum;
        std::vector<int32_t> order(s.experts);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
        if (trace) {
          trace->experts[l][t].assign(order.begin(), order.begin() + s.experts_used);
          if (s.experts_used < s.experts)
            trace->min_route_margin = std::min(trace->min_route_margin,
                                               logits[order[s.experts_used - 1]] - logits[order[s.experts_used]]);
        }
        double wsum = 0;
        for (int32_t r = 0; r < s.experts_used; ++r) wsum += logits[order[r]];
        for (int32_t r = 0; r < s.experts_used; ++r) {
          const int32_t e = order[r];
          const double wt = norm_topk ? logits[e] / wsum : logits[e];
          Vec y = swiglu_ffn(W(nm("ffn_gate_exps.weight")), W(nm("ffn_up_exps.weight")), W(nm("ffn_down_exps.weight")),
                             e * eff * H, e * H * eff, eff, H, h);
          for (int64_t i = 0; i < H; ++i) f[i] += wt * y[i];
        }
        if (s.shared_ffn > 0) {
          double g = 0;
          for (int64_t i = 0; i < H; ++i) g += W(nm("ffn_gate_inp_shexp.weight"))[i] * h[i];
          g = 1 / (1 + std::exp(-g));
          Vec y = swiglu_ffn(W(nm("ffn_gate_shexp.weight")), W(nm("ffn_up_shexp.weight")), W(nm("ffn_down_shexp.weight")),
                             0, 0, s.shared_ffn, H, h);
          for (int64_t i = 0; i < H; ++i) f[i] += g * y[i];
        }
      }
      for (int64_t i = 0; i < H; ++i) x[i] += f[i];
    }
    Vec hN = rms_norm(x, W("output_norm.weight"));
    Vec lg = matvec(W("output.weight"), 0, s.vocab, H, hN);
    for (int32_t i = 0; i < s.vocab; ++i) out[t * s.vocab + i] = static_cast<float>(lg[i]);
  }
  return out;
}

}  // namespace hz::test
