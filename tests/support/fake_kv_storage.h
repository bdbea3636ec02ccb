// FakeKvStorage: a KvStorage whose answers tests script (copies, hot forms, far-tier room), so the
// KV manager and the scheduler run over a bare BlockPool with no model.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "kv/kv_storage.h"

namespace hz {

struct FakeKvStorage : KvStorage {
  int32_t block_tokens = 16;
  std::function<void(int32_t, int32_t)> on_copy;
  std::function<bool(int32_t)> hot;
  std::function<std::optional<int32_t>(int32_t)> on_spill;  // the far slot, or nullopt (full)
  std::function<void(int32_t)> on_release_far;

  int64_t sinks = 0;  // sink_blocks()

  int64_t finalized_blocks(int64_t n) const override { return n / block_tokens; }
  int64_t sink_blocks() const override { return sinks; }
  void copy_block(int32_t src, int32_t dst) override {
    if (on_copy) on_copy(src, dst);
  }
  bool hot_form_available(int32_t b) const override { return hot && hot(b); }
  std::optional<int32_t> spill(int32_t b) override { return on_spill ? on_spill(b) : std::nullopt; }
  void release_far_slot(int32_t slot) override {
    if (on_release_far) on_release_far(slot);
  }
  std::vector<int32_t> reopened;  // blocks reopen_block() was called for, in order
  bool reopen_block(int32_t b) override {
    reopened.push_back(b);
    return true;
  }
};

}  // namespace hz
