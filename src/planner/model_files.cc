#include "planner/model_files.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "format/gguf.h"
#include "format/json_limits.h"
#include "model/model_shape.h"

namespace hz {

const char* check_level_name(CheckLevel l) {
  switch (l) {
    case CheckLevel::kPass: return "PASS";
    case CheckLevel::kWarn: return "WARN";
    case CheckLevel::kFail: return "FAIL";
  }
  return "?";
}

namespace {

namespace fs = std::filesystem;

CheckResult pass(std::string name, std::string detail) { return {CheckLevel::kPass, std::move(name), std::move(detail)}; }
CheckResult warn(std::string name, std::string detail) { return {CheckLevel::kWarn, std::move(name), std::move(detail)}; }
CheckResult failure(std::string name, std::string detail) { return {CheckLevel::kFail, std::move(name), std::move(detail)}; }

void check_gguf(const std::string& path, std::vector<CheckResult>* out) {
  auto f = GgufFile::open(path);
  if (!f.ok()) {
    out->push_back(failure("model", f.status().message()));
    return;
  }
  auto s = model_shape_from_gguf(*f);
  if (!s.ok()) {
    out->push_back(failure("model", fmt::format("GGUF parses but its hyper-parameters do not: {}", s.status().message())));
    return;
  }
  out->push_back(pass("model", fmt::format("{}: GGUF v{}, {} tensors, {} ({} layers, hidden {}, vocab {})", path, f->version(),
                                           f->tensors().size(), s->architecture, s->num_layers, s->hidden, s->vocab)));
  if (!f->has("tokenizer.ggml.model") || !f->has("tokenizer.ggml.tokens"))
    out->push_back(warn("tokenizer", "the GGUF has no tokenizer.ggml.* vocabulary: text prompts will not work"));
}

// A safetensors file starts with a u64 header length and a JSON header of that many bytes.
std::string safetensors_problem(const fs::path& p) {
  std::error_code ec;
  uint64_t size = fs::file_size(p, ec);
  if (ec) return "cannot read its size";
  if (size < 8) return fmt::format("{} bytes: too short for a safetensors header", size);
  std::ifstream in(p, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  if (!in) return "cannot read the header length";
  if (n > size - 8 || n > (uint64_t{100} << 20)) return fmt::format("header length {} exceeds the {}-byte file (truncated?)", n, size);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  if (json_nesting(header, kMaxJsonFileDepth).exceeded_at != std::string_view::npos) return "the header JSON nests too deeply";
  auto j = nlohmann::json::parse(header, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "the header is not a JSON object";
  // Every tensor's data_offsets must lie inside the file.
  uint64_t data_size = size - 8 - n;
  for (const auto& [name, t] : j.items()) {
    if (name == "__metadata__") continue;
    if (!t.is_object() || !t.contains("data_offsets") || !t["data_offsets"].is_array() || t["data_offsets"].size() != 2)
      return fmt::format("tensor '{}' has no data_offsets", name);
    const auto& d = t["data_offsets"];
    if (!d[0].is_number_unsigned() || !d[1].is_number_unsigned() || d[0].get<uint64_t>() > d[1].get<uint64_t>() ||
        d[1].get<uint64_t>() > data_size)
      return fmt::format("tensor '{}' data_offsets {} lie outside the {}-byte data section (truncated?)", name, d.dump(), data_size);
  }
  return "";
}

void check_hf_folder(const fs::path& dir, std::vector<CheckResult>* out) {
  std::error_code ec;
  auto shape = load_model_shape((dir / "config.json").string());
  if (!shape.ok()) {
    out->push_back(failure("config", shape.status().message()));
  } else {
    out->push_back(pass("config", fmt::format("{}: {} ({} layers, hidden {}, vocab {})", (dir / "config.json").string(),
                                              shape->architecture, shape->num_layers, shape->hidden, shape->vocab)));
    if (!shape->prequantized.empty()) {  // whether the engine can load the checkpoint's quantization
      if (shape->prequantized_loadable) {
        out->push_back(pass("quant", fmt::format("pre-quantized ({}): matrices are dequantized at load into q8_0",
                                                 shape->prequantized_detail)));
      } else {
        out->push_back(failure("quant", shape->prequantized_detail));
      }
    }
  }
  if (fs::exists(dir / "tokenizer.json", ec) || fs::exists(dir / "tokenizer.model", ec)) {
    out->push_back(pass("tokenizer", fs::exists(dir / "tokenizer.json", ec) ? "tokenizer.json" : "tokenizer.model"));
  } else {
    out->push_back(failure("tokenizer", fmt::format("{}: neither tokenizer.json nor tokenizer.model", dir.string())));
  }
  for (const char* optional : {"tokenizer_config.json", "generation_config.json"}) {
    if (!fs::exists(dir / optional, ec)) out->push_back(warn("files", fmt::format("{} is missing (defaults apply)", optional)));
  }

  std::vector<std::string> shards;
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index, ec)) {
    std::ifstream in(index);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    auto j = json_nesting(text, kMaxJsonFileDepth).exceeded_at != std::string_view::npos
                 ? nlohmann::json(nlohmann::json::value_t::discarded)
                 : nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      out->push_back(failure("shards", fmt::format("{}: not valid JSON with a weight_map object", index.string())));
      return;
    }
    std::set<std::string> files;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string()) {
        out->push_back(failure("shards", fmt::format("{}: weight_map['{}'] is not a file name", index.string(), tensor)));
        return;
      }
      files.insert(file.get<std::string>());
    }
    shards.assign(files.begin(), files.end());
    if (shards.empty()) {
      out->push_back(failure("shards", fmt::format("{}: weight_map is empty", index.string())));
      return;
    }
  } else if (fs::exists(dir / "model.safetensors", ec)) {
    shards.push_back("model.safetensors");
  } else {
    out->push_back(failure("weights", fmt::format("{}: no model.safetensors and no model.safetensors.index.json", dir.string())));
    return;
  }
  std::vector<std::string> missing, broken;
  uint64_t total = 0;
  for (const auto& s : shards) {
    fs::path p = dir / s;
    if (s.find("..") != std::string::npos || s.find('/') != std::string::npos || !fs::exists(p, ec)) {
      missing.push_back(s);
      continue;
    }
    std::string problem = safetensors_problem(p);
    if (!problem.empty()) broken.push_back(fmt::format("{}: {}", s, problem));
    total += fs::file_size(p, ec);
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    out->push_back(failure("shards", fmt::format("{} of {} shards missing: {}", missing.size(), shards.size(), list)));
  } else if (!broken.empty()) {
    out->push_back(failure("shards", broken.front()));
  } else {
    out->push_back(pass("shards", fmt::format("{} safetensors file{}, {} bytes, headers valid", shards.size(),
                                              shards.size() == 1 ? "" : "s", total)));
  }
}

}  // namespace

std::vector<CheckResult> check_model_files(const std::string& path) {
  std::vector<CheckResult> out;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    out.push_back(failure("model", fmt::format("{}: no such file or folder", path)));
    return out;
  }
  if (fs::is_directory(path, ec)) {
    if (fs::exists(fs::path(path) / "config.json", ec)) {
      check_hf_folder(path, &out);
      return out;
    }
    out.push_back(failure("model", fmt::format("{}: folder has no config.json", path)));
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) {
    check_gguf(path, &out);
  } else if (fs::path(path).extension() == ".json") {
    auto s = load_model_shape(path);
    if (s.ok()) {
      out.push_back(warn("model", fmt::format("{}: a bare config.json (no weights to check)", path)));
    } else {
      out.push_back(failure("model", s.status().message()));
    }
  } else {
    out.push_back(failure("model", fmt::format("{}: not a GGUF file (bad magic) and not a Hugging Face folder", path)));
  }
  return out;
}

}  // namespace hz
