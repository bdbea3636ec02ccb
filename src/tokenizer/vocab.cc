#include "tokenizer/vocab.h"

#include <algorithm>
#include <limits>

namespace hz {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";

// Texts of tokens that end a turn in the common chat formats. GGUF files often name only the EOS
// token, so (like llama.cpp) these are found by text and treated as end-of-generation controls.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
};

// Pre-tokenizer names whose published tokenizers add BOS by default (Llama 3 family).
bool pre_adds_bos(std::string_view pre) {
  return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3";
}

}  // namespace

Result<Vocab> Vocab::from_gguf(const GgufFile& f) {
  Vocab v;
  HZ_ASSIGN_OR_RETURN(v.model_name_, f.get_string_or(std::string(kModelKey), ""));
  if (v.model_name_.empty()) return not_found("{}: missing metadata '{}'", f.path(), kModelKey);
  if (v.model_name_ == "llama") {
    v.kind_ = VocabKind::kSpm;
  } else if (v.model_name_ == "gpt2") {
    v.kind_ = VocabKind::kBpe;
  } else {
    return unimplemented("{}: '{}' = '{}' is not a supported tokenizer (supported: llama, gpt2)", f.path(),
                         kModelKey, v.model_name_);
  }
  HZ_ASSIGN_OR_RETURN(v.pre_, f.get_string_or(std::string(kPreKey), ""));

  HZ_ASSIGN_OR_RETURN(const std::vector<std::string>* tokens, f.get_string_array(kTokensKey));
  if (tokens == nullptr || tokens->empty()) return not_found("{}: missing or empty metadata '{}'", f.path(), kTokensKey);
  if (tokens->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2)) {
    return data_loss("{}: '{}' has {} entries, too many", f.path(), kTokensKey, tokens->size());
  }
  const size_t n = tokens->size();
  v.texts_ = *tokens;

  HZ_ASSIGN_OR_RETURN(v.scores_, f.get_f32_array(kScoresKey));
  if (v.scores_.empty()) {
    v.scores_.assign(n, 0.0f);
  } else if (v.scores_.size() != n) {
    return data_loss("{}: '{}' has {} entries, expected {} (one per token)", f.path(), kScoresKey, v.scores_.size(), n);
  }

  HZ_ASSIGN_OR_RETURN(std::vector<int64_t> types, f.get_int_array(kTypesKey));
  if (!types.empty() && types.size() != n) {
    return data_loss("{}: '{}' has {} entries, expected {} (one per token)", f.path(), kTypesKey, types.size(), n);
  }
  v.types_.assign(n, TokenType::kNormal);
  for (size_t i = 0; i < types.size(); ++i) {
    // Unknown type codes are kept as "undefined" (rendered as nothing), as llama.cpp does.
    v.types_[i] = (types[i] >= 0 && types[i] <= 6) ? static_cast<TokenType>(types[i]) : TokenType::kUndefined;
  }

  v.text_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // An empty text could never be matched and would make the special-token matcher loop.
    if (v.texts_[i].empty()) v.texts_[i] = "[EMPTY_" + std::to_string(i) + "]";
    v.text_to_id_[v.texts_[i]] = static_cast<int32_t>(i);
    v.max_token_bytes_ = std::max(v.max_token_bytes_, v.texts_[i].size());
  }

  if (v.kind_ == VocabKind::kBpe) {
    HZ_ASSIGN_OR_RETURN(const std::vector<std::string>* merges, f.get_string_array(kMergesKey));
    if (merges == nullptr || !f.has(kMergesKey)) return not_found("{}: missing metadata '{}' (required by gpt2 tokenizers)", f.path(), kMergesKey);
    if (merges->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      return data_loss("{}: '{}' has {} entries, too many", f.path(), kMergesKey, merges->size());
    }
    v.merge_ranks_.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const std::string& m = (*merges)[i];
      size_t pos = m.find(' ', 1);
      if (pos == std::string::npos || pos + 1 >= m.size()) {
        return data_loss("{}: '{}[{}]' = '{}' is not two symbols separated by a space", f.path(), kMergesKey, i, m);
      }
      v.merge_ranks_.emplace(m, static_cast<int32_t>(i));  // the first occurrence keeps its rank
    }
  }

  v.add_space_prefix_ = v.kind_ == VocabKind::kSpm;
  v.add_bos_ = v.kind_ == VocabKind::kSpm || pre_adds_bos(v.pre_);
  v.add_eos_ = false;
  HZ_ASSIGN_OR_RETURN(v.add_space_prefix_, f.get_bool_or("tokenizer.ggml.add_space_prefix", v.add_space_prefix_));
  HZ_ASSIGN_OR_RETURN(v.add_bos_, f.get_bool_or("tokenizer.ggml.add_bos_token", v.add_bos_));
  HZ_ASSIGN_OR_RETURN(v.add_eos_, f.get_bool_or("tokenizer.ggml.add_eos_token", v.add_eos_));
  HZ_RETURN_IF_ERROR(v.load_special_ids(f));
  return v;
}

Status Vocab::load_special_ids(const GgufFile& f) {
  const int32_t n = size();
  // SentencePiece vocabularies have fixed defaults (<unk>=0, <s>=1, </s>=2); BPE ones have none.
  const bool spm = kind_ == VocabKind::kSpm;
  auto read_id = [&](std::string_view key, int32_t def, int32_t* out) -> Status {
    auto r = f.get_int_or(std::string(key), def);
    if (!r.ok()) return r.status();
    int64_t id = *r;
    if (id == 0xFFFFFFFFLL || id == -1) {  // GGUF's "no such token"
      *out = -1;
    } else if (id < 0 || id >= n) {
      return out_of_range("{}: '{}' = {} is out of range (the vocabulary has {} tokens)", f.path(), key, id, n);
    } else {
      *out = static_cast<int32_t>(id);
    }
    return Status();
  };
  HZ_RETURN_IF_ERROR(read_id("tokenizer.ggml.bos_token_id", spm && n > 1 ? 1 : -1, &bos_id_));
  HZ_RETURN_IF_ERROR(read_id("tokenizer.ggml.eos_token_id", spm && n > 2 ? 2 : -1, &eos_id_));
  HZ_RETURN_IF_ERROR(read_id("tokenizer.ggml.unknown_token_id", spm ? 0 : -1, &unk_id_));
  int32_t eot_id = -1, eom_id = -1;
  HZ_RETURN_IF_ERROR(read_id("tokenizer.ggml.eot_token_id", -1, &eot_id));
  HZ_RETURN_IF_ERROR(read_id("tokenizer.ggml.eom_token_id", -1, &eom_id));

  if (add_bos_ && bos_id_ < 0) {
    return invalid_argument("{}: 'tokenizer.ggml.add_bos_token' is set but the vocabulary has no BOS token "
                            "('tokenizer.ggml.bos_token_id')", f.path());
  }
  if (add_eos_ && eos_id_ < 0) {
    return invalid_argument("{}: 'tokenizer.ggml.add_eos_token' is set but the vocabulary has no EOS token "
                            "('tokenizer.ggml.eos_token_id')", f.path());
  }

  for (int32_t id : {eos_id_, eot_id, eom_id}) {
    if (id >= 0) eog_ids_.push_back(id);
  }
  for (std::string_view t : kEndOfTurnTexts) {
    int32_t id = find(t);
    if (id < 0) continue;
    eog_ids_.push_back(id);
    // NOTE: such tokens are sometimes typed "normal" or "user-defined" by converters; they are
    // control tokens in their chat formats (and llama.cpp retypes them the same way).
    types_[id] = TokenType::kControl;
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());
  return Status();
}

int32_t Vocab::find(std::string_view text) const {
  auto it = text_to_id_.find(text);
  return it == text_to_id_.end() ? -1 : it->second;
}

int32_t Vocab::merge_rank(std::string_view left, std::string_view right) const {
  // Reused per thread: this sits in the BPE merge loop.
  thread_local std::string key;
  key.assign(left);
  key.push_back(' ');
  key.append(right);
  auto it = merge_ranks_.find(std::string_view(key));
  return it == merge_ranks_.end() ? -1 : it->second;
}

bool Vocab::is_eog(int32_t id) const { return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id); }

}  // namespace hz
