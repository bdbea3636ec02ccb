// `--device cpu|cuda` for the engine commands (run, serve, bench engine, perplexity): one
// definition, one error when CUDA is asked for and cannot run.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "base/status.h"

namespace hz::cli {

void add_device_flag(CLI::App& app, std::string& device);
// cpu: ok. cuda: an error naming --device that says why (no CUDA in this build, no driver or GPU,
// an unsupported GPU, or, with a GPU, that the engine does not run on it yet).
Status check_device_flag(const std::string& device);

}  // namespace hz::cli
