#include "server/embeddings.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

namespace hz {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit per request

}  // namespace

std::string base64_encode(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = (uint32_t{static_cast<uint8_t>(in[i])} << 16) | (uint32_t{static_cast<uint8_t>(in[i + 1])} << 8) |
                       static_cast<uint8_t>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint32_t{static_cast<uint8_t>(in[i])} << 16;
    if (i + 1 < in.size()) v |= uint32_t{static_cast<uint8_t>(in[i + 1])} << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<ApiError> parse_embeddings_request(std::string_view body, EmbeddingsRequest* out) {
  *out = EmbeddingsRequest();
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad_request("the request body must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key != "input" && key != "model" && key != "encoding_format" && key != "dimensions" && key != "user")
      return bad_request(fmt::format("unrecognized request argument supplied: '{}'", key.substr(0, 64)), key.substr(0, 64));
  }
  if (auto m = j.find("model"); m != j.end() && !m->is_null()) {
    if (!m->is_string()) return bad_request("'model' must be a string", "model");
    out->model = m->get<std::string>();
  }
  if (auto u = j.find("user"); u != j.end() && !u->is_null() && !u->is_string()) return bad_request("'user' must be a string", "user");
  if (auto f = j.find("encoding_format"); f != j.end() && !f->is_null()) {
    if (*f == "base64") out->base64 = true;
    else if (*f != "float") return bad_request("'encoding_format' must be float or base64", "encoding_format");
  }
  if (auto d = j.find("dimensions"); d != j.end() && !d->is_null()) {
    return bad_request("'dimensions' is not supported: vectors have the model's hidden size", "dimensions");
  }
  auto input = j.find("input");
  if (input == j.end() || input->is_null()) return bad_request("'input' is required", "input");
  auto token_ids = [](const json& arr, const std::string& field, std::vector<int32_t>* ids) -> std::optional<ApiError> {
    if (arr.empty()) return bad_request(fmt::format("'{}' must not be empty", field), field);
    for (size_t k = 0; k < arr.size(); ++k) {
      const json& t = arr[k];
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
        return bad_request(fmt::format("'{}[{}]' must be a token id", field, k), fmt::format("{}[{}]", field, k));
      ids->push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return std::nullopt;
  };
  if (input->is_string()) {
    out->texts.push_back(input->get<std::string>());
  } else if (input->is_array()) {
    if (input->empty()) return bad_request("'input' must not be empty", "input");
    if (input->size() > kMaxInputs) return bad_request(fmt::format("'input' has more than {} entries", kMaxInputs), "input");
    if ((*input)[0].is_number_integer()) {  // one input as token ids
      out->token_inputs.emplace_back();
      if (auto e = token_ids(*input, "input", &out->token_inputs.back())) return e;
    } else {
      for (size_t i = 0; i < input->size(); ++i) {
        const json& e = (*input)[i];
        const std::string field = fmt::format("input[{}]", i);
        if (e.is_string() && out->token_inputs.empty()) {
          out->texts.push_back(e.get<std::string>());
        } else if (e.is_array() && out->texts.empty()) {
          out->token_inputs.emplace_back();
          if (auto err = token_ids(e, field, &out->token_inputs.back())) return err;
        } else {
          return bad_request(fmt::format("'{}' must be a string (or, in a list of token lists, a list of token ids)", field), field);
        }
      }
    }
  } else {
    return bad_request("'input' must be a string, an array of strings, or token ids", "input");
  }
  for (size_t i = 0; i < out->texts.size(); ++i) {
    // A plain string is 'input' itself; a list's entries are 'input[i]'.
    const std::string field = input->is_string() ? std::string("input") : fmt::format("input[{}]", i);
    if (out->texts[i].empty()) return bad_request(fmt::format("'{}' is empty", field), field);
  }
  return std::nullopt;
}

std::string embeddings_body(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model,
                            int64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json item = {{"object", "embedding"}, {"index", i}};
    if (base64) {
      std::string bytes(vectors[i].size() * sizeof(float), '\0');
      static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32");
      std::memcpy(bytes.data(), vectors[i].data(), bytes.size());
      item["embedding"] = base64_encode(bytes);
    } else {
      item["embedding"] = vectors[i];
    }
    data.push_back(std::move(item));
  }
  json j = {{"object", "list"},
            {"data", std::move(data)},
            {"model", model},
            {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace hz
