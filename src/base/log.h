// Logging: a thin layer over spdlog so the sink and level are set in one place.
#pragma once

#include <spdlog/spdlog.h>

namespace hz {

// Sends logs to stderr; level from HORIZON_LOG (trace, debug, info, warn, error, off) or `level`.
void init_logging(const char* level = nullptr);

}  // namespace hz

#define HZ_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define HZ_LOG_INFO(...) spdlog::info(__VA_ARGS__)
#define HZ_LOG_WARN(...) spdlog::warn(__VA_ARGS__)
#define HZ_LOG_ERROR(...) spdlog::error(__VA_ARGS__)
