#include "runtime/engine_api.h"

#include <cmath>

namespace hz {

Status check_sampling(const SamplingParams& s) {
  if (!(std::isfinite(s.temperature) && s.temperature >= 0)) return invalid_argument("temperature must be >= 0, got {}", s.temperature);
  if (!(s.top_p > 0 && s.top_p <= 1)) return invalid_argument("top_p must be in (0, 1], got {}", s.top_p);
  if (!(s.min_p >= 0 && s.min_p <= 1)) return invalid_argument("min_p must be in [0, 1], got {}", s.min_p);
  if (s.top_k < 0) return invalid_argument("top_k must be 0 (off) or more, got {}", s.top_k);
  if (!(s.repetition_penalty > 0 && s.repetition_penalty <= 10))
    return invalid_argument("repetition_penalty must be > 0 and <= 10 (1 = off), got {}", s.repetition_penalty);
  if (!(s.presence_penalty >= -2 && s.presence_penalty <= 2))
    return invalid_argument("presence_penalty must be in [-2, 2], got {}", s.presence_penalty);
  if (!(s.frequency_penalty >= -2 && s.frequency_penalty <= 2))
    return invalid_argument("frequency_penalty must be in [-2, 2], got {}", s.frequency_penalty);
  if (s.min_tokens < 0) return invalid_argument("min_tokens must be 0 or more, got {}", s.min_tokens);
  if (s.top_logprobs < 0 || s.top_logprobs > 20) return invalid_argument("top_logprobs must be in [0, 20], got {}", s.top_logprobs);
  return Status();
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kTimeout: return "timeout";
    case FinishReason::kError: return "error";
  }
  return "error";
}

}  // namespace hz
