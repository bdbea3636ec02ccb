#include "model/arch.h"

namespace hz {
namespace {

// One entry per architecture. Facts from each family's reference implementation (HF
// transformers) as converted by llama.cpp's GGUF writer.
constexpr ArchSpec kArchs[] = {
    // Llama 1-3, and Mixtral (llama arch + expert_count): softmax -> top-k -> renormalise.
    {"llama", RopeLayout::kNormal, false, true, false, false},
    {"mistral", RopeLayout::kNormal, false, true, false, false},
    // Qwen2: NeoX RoPE, q/k/v biases (bound when present).
    {"qwen2", RopeLayout::kNeox, false, true, false, false},
    // Qwen3: NeoX RoPE, per-head q/k RMSNorm (bound when present).
    {"qwen3", RopeLayout::kNeox, false, true, false, false},
    // Qwen1.5-MoE / Qwen2-MoE: qwen2 attention, top-k weights not renormalised, plus a shared expert.
    {"qwen2moe", RopeLayout::kNeox, true, false, true, true},
    // Qwen3-MoE: qwen3 attention, top-k renormalised, no shared expert.
    {"qwen3moe", RopeLayout::kNeox, true, true, false, true},
};

}  // namespace

const ArchSpec* find_arch(std::string_view name) {
  for (const ArchSpec& a : kArchs) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

std::string supported_arch_names() {
  std::string s;
  for (const ArchSpec& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

}  // namespace hz
