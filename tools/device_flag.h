// `--device cpu|cuda` for the engine commands (run, serve, chat, bench engine, perplexity): one
// definition, one error when CUDA is asked for and cannot run.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "base/status.h"
#include "runtime/engine_options.h"

namespace hz::cli {

void add_device_flag(CLI::App& app, std::string& device);
// cpu: the CPU. cuda: the CUDA backend, or an error naming --device that says why it cannot run
// (no CUDA in this build, no driver or GPU, an unsupported GPU). With HORIZON_CUDA_EMULATE=1,
// cuda is the host emulation of the CUDA backend (tests of the GPU path without a GPU).
Result<EngineDevice> resolve_device_flag(const std::string& device);

}  // namespace hz::cli
