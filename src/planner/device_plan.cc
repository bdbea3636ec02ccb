#include "planner/device_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/byte_size.h"
#include "kernels/kv_codec.h"

namespace hz {
namespace {

// The CUDA context, cudart, the caching allocator's slack and captured graphs.
constexpr uint64_t kReserveBytes = uint64_t{1} << 30;
constexpr uint64_t kSegmentTokens = 512;  // device attention's split (kernels/cuda/launch.h)
constexpr uint64_t kDescriptorBytes = 40; // device/kv_block_desc.h

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

Result<DevicePlan> make_device_plan(const PlanReport& host, const std::string& device, uint64_t device_bytes,
                                    const std::string& weight_type, uint64_t weights_on_device, const std::string& weight_note) {
  const ModelShape& s = host.shape;
  const PlanOptions& o = host.options;
  if (o.kv.hot_window > 0) return unimplemented("--kv-hot-window is not available with --device cuda yet");
  if (!o.kv.hot_types().same())
    return unimplemented("--kv-cache-dtype-k {} / --kv-cache-dtype-v {}: separate key and value types are not available "
                         "with --device cuda yet (give one --kv-cache-dtype)",
                         kv_type_name(o.kv.hot_types().k), kv_type_name(o.kv.hot_types().v));
  // The GPU codecs (kernels/cuda/kv_codec.cu) scale per row group or per head, not per channel.
  if (kernels::kv_channel_scaled(o.kv.hot))
    return unimplemented("--kv-cache-dtype {} is not available with --device cuda yet (the GPU stores f32, f16, bf16, "
                         "fp8, int8 and int4)",
                         kv_type_name(o.kv.hot));
  if (s.is_mla()) return unimplemented("--device cuda: {} uses latent attention (MLA), not planned on the GPU yet", s.architecture);
  if (device_bytes == 0) return invalid_argument("--device-memory must be more than 0 bytes");
  DevicePlan p;
  p.device = device;
  p.device_bytes = device_bytes;
  p.reserve_bytes = std::min(kReserveBytes, device_bytes);
  p.weight_type = weight_type;
  p.weights_bytes = weights_on_device;
  p.weight_note = weight_note;
  p.max_num_seqs = o.max_num_seqs;
  p.requested_context = host.requested_context;
  // One step: a prefill chunk of T tokens (or max_num_seqs decodes, whichever is more).
  const uint64_t t = std::max(o.prefill_chunk_tokens, o.max_num_seqs);
  const uint64_t hd = s.head_dim, q_width = s.num_heads * hd, kv_width = s.num_kv_heads * hd;
  const uint64_t ffn = std::max({s.ffn, s.moe_ffn * std::max<uint64_t>(s.num_experts_used, 1), uint64_t{1}});
  const uint64_t f32_floats = t * (3 * s.hidden + q_width + 2 * kv_width + q_width + 2 * ffn);
  const uint64_t q8_bytes = t * std::max(s.hidden, ffn) / 32 * 34;
  const uint64_t logits = o.max_num_seqs * s.vocab * 4;
  p.activation_bytes = f32_floats * 4 + q8_bytes + logits;
  const uint64_t segments = ceil_div(std::max<uint64_t>(host.requested_context, 1), kSegmentTokens);
  p.attention_scratch_bytes = t * s.num_heads * segments * (hd + 2) * 4;
  p.table_bytes = o.max_num_seqs * ceil_div(std::max<uint64_t>(host.requested_context, 1), o.block_tokens) * kDescriptorBytes +
                  t * 16;
  const uint64_t used = p.reserve_bytes + p.weights_bytes + p.activation_bytes + p.attention_scratch_bytes + p.table_bytes;
  p.kv_budget_bytes = device_bytes > used ? device_bytes - used : 0;
  KvGeometry g = s.kv_geometry();
  g.fp8_row_scales = true;  // the device arena's layout
  p.requested_kv_bytes = kv_bytes_for_tokens(g, o.kv, o.block_tokens, host.requested_context) * o.max_num_seqs;
  p.fits = p.kv_budget_bytes > 0 && p.requested_kv_bytes <= p.kv_budget_bytes;
  const uint64_t limit = host.context_limit > 0 ? host.context_limit : UINT64_MAX;
  p.max_tokens_at_requested = std::min(limit, max_tokens_per_seq(g, o.kv, o.block_tokens, p.kv_budget_bytes, o.max_num_seqs));
  for (uint64_t c : o.concurrencies) {
    p.max_context.emplace_back(c, std::min(limit, max_tokens_per_seq(g, o.kv, o.block_tokens, p.kv_budget_bytes, c)));
  }
  return p;
}

nlohmann::ordered_json device_plan_to_json(const DevicePlan& p) {
  nlohmann::ordered_json j;
  j["device"] = p.device;
  j["device_bytes"] = p.device_bytes;
  j["reserve_bytes"] = p.reserve_bytes;
  j["weight_type"] = p.weight_type;
  j["weights_bytes"] = p.weights_bytes;
  if (!p.weight_note.empty()) j["weight_note"] = p.weight_note;
  j["activation_bytes"] = p.activation_bytes;
  j["attention_scratch_bytes"] = p.attention_scratch_bytes;
  j["table_bytes"] = p.table_bytes;
  j["kv_budget_bytes"] = p.kv_budget_bytes;
  j["max_num_seqs"] = p.max_num_seqs;
  j["requested_context"] = p.requested_context;
  j["requested_kv_bytes"] = p.requested_kv_bytes;
  j["max_tokens_at_requested"] = p.max_tokens_at_requested;
  auto& mc = j["max_context"] = nlohmann::ordered_json::array();
  for (auto [c, tokens] : p.max_context) mc.push_back({{"concurrency", c}, {"max_tokens", tokens}});
  j["fits"] = p.fits;
  return j;
}

std::string device_plan_to_text(const DevicePlan& p) {
  std::string s = fmt::format("Device plan (cuda): {}\n", p.device);
  auto line = [&](const char* what, uint64_t bytes, const std::string& note) {
    s += fmt::format("  {:<22} {:>12}{}\n", what, format_bytes(bytes), note.empty() ? "" : "  " + note);
  };
  line("device memory", p.device_bytes, "");
  line("runtime reserve", p.reserve_bytes, "CUDA context, allocator, graphs");
  line("weights", p.weights_bytes, p.weight_type);
  if (!p.weight_note.empty()) s += fmt::format("  {:<22} {}\n", "", p.weight_note);
  line("activations", p.activation_bytes, "one step, and the logits");
  line("attention scratch", p.attention_scratch_bytes, "split-KV partials at the requested context");
  line("block tables", p.table_bytes, "");
  line("KV cache budget", p.kv_budget_bytes, "");
  s += fmt::format("  {:<22} {:>12}  {} sequence(s) x {} tokens: {}\n", "requested KV", format_bytes(p.requested_kv_bytes),
                   p.max_num_seqs, p.requested_context, p.fits ? "fits" : "does NOT fit");
  s += "  largest context per sequence:";
  for (auto [c, tokens] : p.max_context) s += fmt::format("  {} seq: {}", c, tokens);
  s += "\n";
  return s;
}

}  // namespace hz
