// Rendering of a PlanReport: JSON with stable snake_case keys for machines, a table for people.
#include <nlohmann/json.hpp>

#include <cmath>

#include "base/byte_size.h"
#include "planner/capacity_plan.h"

namespace hz {

namespace {

// Whole numbers print as integers (131072, not 131072.0).
nlohmann::ordered_json number(double v) {
  if (std::floor(v) == v && v < 9e15) return static_cast<uint64_t>(v);
  return v;
}

std::string params_string(uint64_t n) {
  if (n >= 1000000000ull) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1000000ull) return fmt::format("{:.2f} M", n / 1e6);
  return fmt::format("{}", n);
}

}  // namespace

nlohmann::ordered_json plan_to_json(const PlanReport& r) {
  using json = nlohmann::ordered_json;
  const ModelShape& s = r.shape;
  json model = {{"source", s.source},
                {"architecture", s.architecture},
                {"layers", s.num_layers},
                {"hidden", s.hidden},
                {"heads", s.num_heads},
                {"kv_heads", s.num_kv_heads},
                {"head_dim", s.head_dim},
                {"ffn", s.ffn},
                {"vocab", s.vocab},
                {"experts", s.num_experts},
                {"experts_used", s.num_experts_used},
                {"moe_ffn", s.moe_ffn},
                {"shared_experts", s.num_shared_experts},
                {"shared_expert_ffn", s.shared_expert_ffn},
                {"first_k_dense", s.first_k_dense},
                {"tied_embeddings", s.tied_embeddings},
                {"max_positions", s.max_positions},
                {"rope_scaling", {{"type", s.rope_scaling.type},
                                  {"factor", s.rope_scaling.factor},
                                  {"original_max_positions", s.rope_scaling.original_max_positions}}}};
  if (s.is_mla()) {
    model["mla"] = {{"q_lora_rank", s.q_lora_rank},
                    {"kv_lora_rank", s.kv_lora_rank},
                    {"qk_rope_head_dim", s.qk_rope_head_dim},
                    {"qk_nope_head_dim", s.qk_nope_head_dim},
                    {"v_head_dim", s.v_head_dim}};
  } else {
    model["mla"] = nullptr;
  }
  json j;
  j["model"] = model;
  j["params_total"] = r.params.total;
  j["params_active"] = r.params.active;
  j["weight_type"] = r.weight_type;
  j["weights_bytes"] = r.weights_bytes;
  json by_type = json::object();
  for (const auto& [name, b] : r.weights_bytes_by_type) by_type[name] = b;
  j["weights_bytes_by_type"] = by_type;
  j["block_tokens"] = r.options.block_tokens;
  json kv = json::object();
  for (const auto& [name, b] : r.kv_bytes_per_token) kv[name] = number(b);
  j["kv_bytes_per_token"] = kv;
  j["runtime_overhead_bytes"] = {{"activations", r.overhead.activations},
                                 {"logits", r.overhead.logits},
                                 {"thread_buffers", r.overhead.thread_buffers},
                                 {"base", r.overhead.base},
                                 {"kv_staging", r.overhead.kv_staging},
                                 {"total", r.overhead.total()}};
  j["memory_bytes"] = r.options.memory_bytes;
  j["context_limit"] = r.context_limit;
  json table = json::object();
  for (const auto& row : r.max_context) {
    json cells = json::object();
    for (const auto& cell : row.cells) cells[std::to_string(cell.concurrency)] = cell.max_tokens;
    table[row.kv] = cells;
  }
  j["max_context"] = table;
  const PlanOptions& o = r.options;
  j["requested"] = {{"kv_cache_dtype", kv_type_pair_name(o.kv.hot_types())},
                    {"kv_hot_window", o.kv.hot_window},
                    {"kv_cold_dtype", o.kv.hot_window > 0 ? json(kv_type_pair_name(o.kv.cold_types())) : json(nullptr)},
                    {"max_num_seqs", o.max_num_seqs},
                    {"max_model_len", r.requested_context},
                    {"kv_bytes_per_token", number(r.requested_kv_bytes_per_token)},
                    {"kv_bytes", r.requested_kv_bytes},
                    {"required_bytes", r.required_bytes}};
  j["fits"] = r.fits;
  json remedies = json::array();
  for (const auto& rem : r.remedies) {
    remedies.push_back(
        {{"kind", rem.kind}, {"flags", rem.flags}, {"fits", rem.fits}, {"value", rem.value}, {"text", rem.text}});
  }
  j["remedies"] = remedies;
  return j;
}

std::string plan_to_text(const PlanReport& r) {
  const ModelShape& s = r.shape;
  const PlanOptions& o = r.options;
  std::string out;
  auto line = [&](const std::string& l) { out += l + "\n"; };
  line(fmt::format("model: {} ({})", s.source, s.architecture.empty() ? "?" : s.architecture));
  if (s.is_mla()) {
    line(fmt::format("  {} layers, hidden {}, {} heads, MLA (kv_lora_rank {}, rope dim {}), FFN {}, vocab {}", s.num_layers,
                     s.hidden, s.num_heads, s.kv_lora_rank, s.qk_rope_head_dim, s.ffn, s.vocab));
  } else {
    line(fmt::format("  {} layers, hidden {}, {} heads / {} KV heads x {}, FFN {}, vocab {}", s.num_layers, s.hidden,
                     s.num_heads, s.num_kv_heads, s.head_dim, s.ffn, s.vocab));
  }
  if (s.is_moe()) {
    line(fmt::format("  MoE: {} experts, {} used per token, expert FFN {}, {} shared, first {} layers dense", s.num_experts,
                     s.num_experts_used, s.moe_ffn, s.num_shared_experts, s.first_k_dense));
  }
  line(fmt::format("  context limit: {}{}", s.max_positions,
                   s.rope_scaling.type.empty() ? "" : fmt::format(" (rope scaling {} x{})", s.rope_scaling.type, s.rope_scaling.factor)));
  line(fmt::format("parameters: {} total, {} active per token", params_string(r.params.total), params_string(r.params.active)));
  line(fmt::format("weights: {} as {}", format_bytes(r.weights_bytes), r.weight_type));
  std::string by_type = "  by type:";
  for (const auto& [name, b] : r.weights_bytes_by_type) by_type += fmt::format(" {} {},", name, format_bytes(b));
  by_type.pop_back();
  line(by_type);
  std::string kv = fmt::format("KV per token (blocks of {}):", o.block_tokens);
  for (const auto& [name, b] : r.kv_bytes_per_token) kv += fmt::format(" {} {:.0f} B,", name, b);
  kv.pop_back();
  line(kv);
  line(fmt::format("runtime overhead: {} (activations {}, logits {}, thread buffers {}, base {}{})", format_bytes(r.overhead.total()),
                   format_bytes(r.overhead.activations), format_bytes(r.overhead.logits),
                   format_bytes(r.overhead.thread_buffers), format_bytes(r.overhead.base),
                   r.overhead.kv_staging > 0 ? ", KV staging " + format_bytes(r.overhead.kv_staging) : std::string()));
  line(fmt::format("memory budget: {}", format_bytes(o.memory_bytes)));
  line("");
  line("largest context per sequence ('*': the model's limit):");
  std::string head = fmt::format("  {:<24}", "kv type");
  for (uint64_t c : o.concurrencies) head += fmt::format(" {:>12}", fmt::format("{} seq{}", c, c == 1 ? "" : "s"));
  line(head);
  for (const auto& row : r.max_context) {
    std::string l = fmt::format("  {:<24}", row.kv);
    for (const auto& cell : row.cells) l += fmt::format(" {:>12}", fmt::format("{}{}", cell.max_tokens, cell.limited_by_model ? "*" : ""));
    line(l);
  }
  line("");
  line(fmt::format("requested: {} KV, {} sequence{} x {} tokens: needs {} (weights {} + runtime {} + KV {}) of {}: {}",
                   kv_precision_name(o.kv), o.max_num_seqs, o.max_num_seqs == 1 ? "" : "s", r.requested_context,
                   format_bytes(r.required_bytes), format_bytes(r.weights_bytes), format_bytes(r.overhead.total()),
                   format_bytes(r.requested_kv_bytes), format_bytes(o.memory_bytes), r.fits ? "fits" : "DOES NOT FIT"));
  if (o.max_num_seqs == 1)
    line("  (one sequence: `horizon serve` decodes up to 16 at once unless told; --max-num-seqs 16 plans for that)");
  if (!r.remedies.empty()) {
    line("remedies, in order:");
    int i = 1;
    for (const auto& rem : r.remedies) {
      line(fmt::format("  {}. {}{}  [{}]", i++, rem.text, rem.fits ? "" : " (not enough alone)", rem.flags));
    }
  }
  return out;
}

}  // namespace hz
