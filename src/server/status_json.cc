#include "server/status_json.h"

#include <chrono>
#include <nlohmann/json.hpp>

namespace hz {
namespace {

using nlohmann::json;

json histogram_json(const stats::Histogram& h) {
  stats::HistogramData s = h.data();
  return {{"bounds", s.bounds}, {"buckets", s.counts}, {"sum", s.sum}, {"count", s.count}};
}

}  // namespace

std::string status_json(const EngineStats& s, const ServerMetrics& metrics, const std::string& model_name) {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  json kv = {
      {"ram",
       {{"blocks_total", s.kv_blocks_total},
        {"blocks_used", s.kv_blocks_used},
        {"blocks_cached", s.kv_blocks_cached},
        {"blocks_free", s.kv_blocks_free},
        {"bytes_used", s.kv_ram_bytes_used},
        {"bytes_total", s.kv_ram_bytes_total}}},
      {"prefix_cache",
       {{"blocks", s.kv_blocks_cached},
        {"queries", s.prefix_cache_queries},
        {"hits", s.prefix_cache_hits},
        {"evictions", s.prefix_cache_evictions}}},
      {"disk",
       {{"enabled", s.kv_disk_enabled},
        {"degraded", s.kv_disk_degraded},
        {"blocks", s.kv_disk_blocks},
        {"bytes_used", s.kv_disk_bytes_used},
        {"bytes_total", s.kv_disk_bytes_total},
        {"hits", s.kv_disk_hits},
        {"promotions", s.kv_disk_promotions},
        {"demotions", s.kv_disk_demotions},
        {"writes", s.kv_disk_writes},
        {"evictions", s.kv_disk_evictions}}},
      {"far",
       {{"enabled", s.kv_far_enabled},
        {"degraded", s.kv_far_degraded},
        {"blocks", s.kv_far_blocks},
        {"bytes_used", s.kv_far_bytes_used},
        {"bytes_total", s.kv_far_bytes_total},
        {"spills", s.kv_far_spills},
        {"read_bytes", s.kv_far_read_bytes},
        {"checked_bytes", s.kv_far_checked_bytes},
        {"write_bytes", s.kv_far_write_bytes}}},
      {"remote",
       {{"enabled", s.kv_remote_enabled},
        {"degraded", s.kv_remote_degraded},
        {"hits", s.kv_remote_hits},
        {"misses", s.kv_remote_misses},
        {"promotions", s.kv_remote_promotions},
        {"writes", s.kv_remote_writes},
        {"dropped_writes", s.kv_remote_dropped_writes},
        {"errors", s.kv_remote_errors},
        {"corrupt", s.kv_remote_corrupt},
        {"read_bytes", s.kv_remote_read_bytes},
        {"write_bytes", s.kv_remote_write_bytes}}},
  };
  json j = {
      {"object", "horizon.status"},
      {"model", model_name},
      {"time_ms", std::chrono::duration_cast<std::chrono::milliseconds>(now).count()},
      {"requests",
       {{"running", s.running},
        {"waiting", s.waiting},
        {"queue_capacity", s.max_queue},
        {"finished_total", s.requests_finished_total},
        {"queue_rejections_total", s.queue_rejections_total},
        {"preemptions_total", s.preemptions_total}}},
      {"tokens", {{"prompt_total", s.prompt_tokens_total}, {"generation_total", s.generation_tokens_total}}},
      {"engine", {{"steps_total", s.steps_total}, {"max_seqs_in_step", s.max_seqs_in_step}, {"draining", s.draining}}},
      {"kv", kv},
      {"latency", {{"ttft_seconds", histogram_json(metrics.ttft())}, {"itl_seconds", histogram_json(metrics.inter_token())}}},
  };
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace hz
