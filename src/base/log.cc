#include "base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace hz {

void init_logging(const char* level) {
  static bool initialized = false;
  if (!initialized) {
    auto logger = spdlog::stderr_color_mt("horizon");
    logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    spdlog::set_default_logger(logger);
    initialized = true;
  }
  const char* env = std::getenv("HORIZON_LOG");
  const char* chosen = level != nullptr ? level : (env != nullptr ? env : "info");
  spdlog::set_level(spdlog::level::from_str(chosen));
}

}  // namespace hz
