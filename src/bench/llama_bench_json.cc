#include "bench/llama_bench_json.h"

#include "bench/stats.h"

namespace hz::bench {

double LlamaBenchRecord::median_ts() const { return samples_ts.empty() ? avg_ts : summarize(samples_ts).median; }

std::string LlamaBenchRecord::test_name() const {
  std::string s;
  if (n_prompt > 0) s = "pp" + std::to_string(n_prompt);
  if (n_gen > 0) s += (s.empty() ? "tg" : "+tg") + std::to_string(n_gen);
  if (n_depth > 0) s += "@d" + std::to_string(n_depth);
  return s;
}

namespace {

using nlohmann::json;

Status need(const json& r, size_t i, const char* key, json::value_t type) {
  auto it = r.find(key);
  if (it == r.end()) return invalid_argument("llama-bench JSON: record {} has no field '{}'", i, key);
  const bool ok = type == json::value_t::number_integer ? it->is_number_integer()
                  : type == json::value_t::number_float ? it->is_number()
                                                        : it->type() == type;
  if (!ok) return invalid_argument("llama-bench JSON: record {} field '{}' has the wrong type ({})", i, key, it->type_name());
  return Status();
}

}  // namespace

Result<std::vector<LlamaBenchRecord>> parse_llama_bench_json(const json& j) {
  if (!j.is_array()) return invalid_argument("llama-bench JSON: expected an array of test records, got {}", j.type_name());
  std::vector<LlamaBenchRecord> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& r = j[i];
    if (!r.is_object()) return invalid_argument("llama-bench JSON: record {} is not an object", i);
    for (const char* k : {"build_commit", "type_k", "type_v"}) HZ_RETURN_IF_ERROR(need(r, i, k, json::value_t::string));
    for (const char* k : {"build_number", "n_threads", "n_prompt", "n_gen"}) {
      HZ_RETURN_IF_ERROR(need(r, i, k, json::value_t::number_integer));
    }
    // Builds before llama-bench's -d (early 2025) write no n_depth: depth 0.
    if (r.contains("n_depth")) HZ_RETURN_IF_ERROR(need(r, i, "n_depth", json::value_t::number_integer));
    HZ_RETURN_IF_ERROR(need(r, i, "avg_ts", json::value_t::number_float));
    LlamaBenchRecord x;
    x.build_commit = r["build_commit"].get<std::string>();
    x.build_number = r["build_number"].get<int64_t>();
    x.model_filename = r.value("model_filename", std::string());
    x.n_threads = r["n_threads"].get<int64_t>();
    x.n_prompt = r["n_prompt"].get<int64_t>();
    x.n_gen = r["n_gen"].get<int64_t>();
    x.n_depth = r.value("n_depth", int64_t{0});
    x.type_k = r["type_k"].get<std::string>();
    x.type_v = r["type_v"].get<std::string>();
    // Older builds wrote flash_attn as a bool; newer ones as the llama_flash_attn_type integer.
    if (auto fa = r.find("flash_attn"); fa != r.end()) {
      if (fa->is_boolean()) {
        x.flash_attn = fa->get<bool>() ? 1 : 0;
      } else if (fa->is_number_integer()) {
        x.flash_attn = fa->get<int32_t>();
      } else {
        return invalid_argument("llama-bench JSON: record {} field 'flash_attn' has the wrong type ({})", i, fa->type_name());
      }
    } else {
      return invalid_argument("llama-bench JSON: record {} has no field 'flash_attn'", i);
    }
    x.avg_ts = r["avg_ts"].get<double>();
    if (auto s = r.find("samples_ts"); s != r.end()) {
      if (!s->is_array()) return invalid_argument("llama-bench JSON: record {} field 'samples_ts' is not an array", i);
      for (const auto& v : *s) {
        if (!v.is_number()) return invalid_argument("llama-bench JSON: record {} field 'samples_ts' holds a non-number", i);
        x.samples_ts.push_back(v.get<double>());
      }
    }
    out.push_back(std::move(x));
  }
  return out;
}

Result<json> batched_bench_records(const std::string& text, const std::string& type_k, const std::string& type_v) {
  json out = json::array();
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty() || line[0] != '{') continue;
    json r = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded() || !r.is_object()) {
      return invalid_argument("llama-batched-bench output line {} is not JSON: '{}'", line_no, line.substr(0, 200));
    }
    for (const char* k : {"pp", "tg", "pl", "n_threads", "flash_attn"}) {
      if (!r.contains(k) || !r[k].is_number_integer()) {
        return invalid_argument("llama-batched-bench output line {}: no integer field '{}'", line_no, k);
      }
    }
    if (!r.contains("speed_tg") || !r["speed_tg"].is_number()) {
      return invalid_argument("llama-batched-bench output line {}: no number field 'speed_tg'", line_no);
    }
    const double ts = r["speed_tg"].get<double>();
    out.push_back({{"build_commit", ""},
                   {"build_number", 0},
                   {"n_threads", r["n_threads"]},
                   {"n_prompt", 0},
                   {"n_gen", r["tg"]},
                   {"n_depth", r["pp"]},
                   {"n_parallel", r["pl"]},
                   {"type_k", type_k},
                   {"type_v", type_v},
                   {"flash_attn", r["flash_attn"].get<int32_t>()},
                   {"avg_ts", ts},
                   {"samples_ts", json::array({ts})},
                   {"source", "llama-batched-bench"}});
  }
  if (out.empty()) return invalid_argument("llama-batched-bench wrote no JSON lines (was --output-format jsonl given?)");
  return out;
}

Result<std::vector<LlamaBenchRecord>> parse_llama_bench_json(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("llama-bench output is not JSON: '{}'", text.substr(0, 200));
  return parse_llama_bench_json(j);
}

}  // namespace hz::bench
