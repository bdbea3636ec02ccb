// /v1/embeddings: the request (input as text(s) or token ids, encoding_format float or base64) and
// the response body. The vectors come from Engine::submit_embeddings; no I/O here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"

namespace hz {

struct EmbeddingsRequest {
  std::string model;
  std::vector<std::string> texts;                 // one per input, when the input is text
  std::vector<std::vector<int32_t>> token_inputs;  // one per input, when the input is token ids
  bool base64 = false;                            // encoding_format
};

// Parses a /v1/embeddings body; the 400 to answer otherwise (names the field).
std::optional<ApiError> parse_embeddings_request(std::string_view body, EmbeddingsRequest* out);

// OpenAI's response: {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
// "model", "usage"}; base64 = the little-endian float32 bytes, base64-encoded.
std::string embeddings_body(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model,
                            int64_t prompt_tokens);

std::string base64_encode(std::string_view bytes);

}  // namespace hz
