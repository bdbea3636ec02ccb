// The engine on the GPU path (--device cuda), run on the host emulation of the CUDA backend: the
// scheduler, KV manager and block tables on the host, the weights and KV arena in "device"
// memory. Concurrent requests, chunked prefill, prefix caching and speculation give the golden
// story; the KV flags the device cache lacks are refused with errors naming them.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/drafter.h"
#include "runtime/local_engine.h"
#include "support/collect_sink.h"
#include "support/device_model_checks.h"
#include "support/golden.h"
#include "support/test_support.h"

namespace hz {
namespace {

using test::CollectSink;

EngineOptions device_options() {
  EngineOptions o;
  o.model_path = test::model_path("stories260K.gguf");
  o.device = EngineDevice::kHostEmulation;
  o.threads = 1;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 64;
  o.prefill_chunk = 7;  // odd chunks: prompts split and interleaved with decodes
  return o;
}

void expect_golden_stories(LocalEngine& e, int reps) {
  test::GoldenFile g = test::load_golden("stories260K.json");
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (int rep = 0; rep < reps; ++rep) {
    for (const auto& c : g.cases) {
      auto s = std::make_shared<CollectSink>();
      ASSERT_TRUE(e.submit(test::greedy_request(c.prompt_ids, static_cast<int>(c.output_ids.size()), s)).ok());
      sinks.push_back(s);
    }
  }
  for (size_t i = 0; i < sinks.size(); ++i) {
    ASSERT_TRUE(sinks[i]->wait());
    const auto& c = g.cases[i % g.cases.size()];
    EXPECT_EQ(sinks[i]->ids, c.output_ids) << c.prompt;
    EXPECT_EQ(sinks[i]->final_event.finish_reason, FinishReason::kLength);
  }
}

TEST(DeviceEngineTest, ConcurrentGreedyRequestsMatchGolden) {
  auto e = LocalEngine::create(device_options());
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_NE((*e)->device_model(), nullptr);
  expect_golden_stories(**e, 2);
  EngineStats st = (*e)->stats();
  for (int i = 0; i < 200 && st.kv_blocks_used != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    st = (*e)->stats();
  }
  EXPECT_GT(st.max_seqs_in_step, 1);  // steps really were shared
  EXPECT_EQ(st.kv_blocks_used, 0);
}

// Prefix caching on the device arena: the second round attaches the first round's blocks (host
// bookkeeping, device contents) and still tells the same stories.
TEST(DeviceEngineTest, PrefixCachingReusesDeviceBlocks) {
  EngineOptions o = device_options();
  o.enable_prefix_caching = true;
  o.block_size = 16;
  auto e = LocalEngine::create(o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  expect_golden_stories(**e, 1);
  expect_golden_stories(**e, 1);
}

// Speculation on the device: drafts verified in one step (all_logits rows, rollback of rejected
// positions) give plain decoding's output.
TEST(DeviceEngineTest, SpeculationKeepsTheGreedyOutput) {
  EngineOptions o = device_options();
  o.spec = SpecMode::kNgram;
  o.spec_adaptive = false;
  auto e = LocalEngine::create(o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  expect_golden_stories(**e, 1);
}

// fp8 and int4 KV on the device engine (the plan's block size is the device arena's, one fp8 scale
// per row; int4 rows rotated by default): concurrent, chunked greedy requests give what one
// DeviceSequence alone gives.
TEST(DeviceEngineTest, QuantizedKvRequestsMatchASequenceAlone) {
  test::GoldenFile g = test::load_golden("stories260K.json");
  auto be = cuda::make_host_backend();
  test::DeviceFixture f = test::load_on_device("stories260K.gguf", *be);
  ASSERT_NE(f.device, nullptr);
  for (KvType t : {KvType::kFp8, KvType::kInt4}) {
    SCOPED_TRACE(kv_type_name(t));
    std::vector<std::vector<int32_t>> want;
    for (const auto& c : g.cases) {
      const bool rotated = t == KvType::kInt4;  // --kv-rotation auto: int8 and int4 rows rotated
      auto seq = test::device_sequence(*f.device, *be,
                                       {.max_tokens = 512, .kv_codec = t, .kv_rotated_k = rotated, .kv_rotated_v = rotated});
      ASSERT_NE(seq, nullptr);
      std::vector<float> logits = test::append(*seq, c.prompt_ids);
      std::vector<int32_t> ids;
      for (size_t i = 0; i < c.output_ids.size(); ++i) {
        ids.push_back(test::argmax(logits.data(), static_cast<int>(logits.size())));
        logits = test::append(*seq, {ids.back()});
      }
      want.push_back(ids);
    }
    EngineOptions o = device_options();
    o.kv_dtype = t;
    auto e = LocalEngine::create(o);
    ASSERT_TRUE(e.ok()) << e.status().message();
    std::vector<std::shared_ptr<CollectSink>> sinks;
    for (const auto& c : g.cases) {
      auto sink = std::make_shared<CollectSink>();
      ASSERT_TRUE((*e)->submit(test::greedy_request(c.prompt_ids, static_cast<int>(c.output_ids.size()), sink)).ok());
      sinks.push_back(sink);
    }
    for (size_t i = 0; i < sinks.size(); ++i) {
      ASSERT_TRUE(sinks[i]->wait());
      EXPECT_EQ(sinks[i]->ids, want[i]) << g.cases[i].prompt;
    }
  }
}

TEST(DeviceEngineTest, RefusesWhatTheDeviceCacheLacks) {
  struct Case {
    void (*set)(EngineOptions&);
    const char* flag;
  };
  const Case cases[] = {
      {[](EngineOptions& o) { o.kv_dtype = KvType::kInt8c; }, "--kv-cache-dtype int8c"},
      {[](EngineOptions& o) { o.kv_hot_window = 32; }, "--kv-hot-window"},
      {[](EngineOptions& o) { o.kv_disk_dir = "/tmp/never-made"; }, "--kv-disk-dir"},
      {[](EngineOptions& o) { o.model_path = test::model_path("stories260K-moe4.gguf"); }, "mixture-of-experts"},
  };
  for (const Case& c : cases) {
    EngineOptions o = device_options();
    c.set(o);
    auto e = LocalEngine::create(o);
    ASSERT_FALSE(e.ok()) << c.flag;
    EXPECT_NE(e.status().message().find(c.flag), std::string::npos) << e.status().message();
  }
}

// Embeddings have no device path: an error, not a CPU run over a device KV cache.
TEST(DeviceEngineTest, EmbeddingsAreRefused) {
  auto e = LocalEngine::create(device_options());
  ASSERT_TRUE(e.ok()) << e.status().message();
  EmbeddingJob job;
  job.inputs = {{1, 403, 407}};
  job.done = [](Result<std::vector<std::vector<float>>>) {};
  Status s = (*e)->submit_embeddings(std::move(job));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace hz
