// `horizon plan --device cuda`: weights, reserve, activations, attention scratch and KV on GPU
// memory, planned without a GPU through --device-memory; errors name the flag.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "device/device.h"
#include "planner/device_plan.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::string llama8b() { return std::string(HORIZON_SOURCE_DIR) + "/tests/fixtures/configs/llama-3-8b.json"; }

nlohmann::json plan_json(const std::string& flags, int* rc) {
  std::string out, err;
  *rc = test::run_command(std::string(HORIZON_BINARY) + " plan " + llama8b() + " --device cuda --json " + flags, &out, &err);
  if (*rc != 0) return nlohmann::json{{"error", err}};
  return nlohmann::json::parse(out);
}

TEST(DevicePlanTest, PlansAnH200WithoutAGpu) {
  int rc = 0;
  auto j = plan_json("--device-memory 140GiB --max-model-len 131072 --kv-cache-dtype int8", &rc);
  ASSERT_EQ(rc, 0) << j.dump();
  EXPECT_EQ(j["device"], "--device-memory");
  EXPECT_EQ(j["device_bytes"].get<uint64_t>(), uint64_t{140} << 30);
  const uint64_t weights = j["weights_bytes"], kv = j["kv_budget_bytes"];
  EXPECT_GT(weights, uint64_t{14} << 30);  // 8B parameters in bf16
  EXPECT_LT(weights, uint64_t{17} << 30);
  const uint64_t parts = j["reserve_bytes"].get<uint64_t>() + weights + j["activation_bytes"].get<uint64_t>() +
                         j["attention_scratch_bytes"].get<uint64_t>() + j["table_bytes"].get<uint64_t>() + kv;
  EXPECT_EQ(parts, uint64_t{140} << 30);
  EXPECT_TRUE(j["fits"].get<bool>());
  // int8 KV of the 8B shape: 32 layers x 2 x 8 heads x (128 + 8) bytes = 69,632 bytes per token.
  EXPECT_EQ(j["requested_kv_bytes"].get<uint64_t>(), uint64_t{131072} * 69632);
  EXPECT_EQ(j["max_tokens_at_requested"].get<uint64_t>(), 8192u);  // capped at the model's 8192 positions
}

TEST(DevicePlanTest, TooSmallADeviceDoesNotFit) {
  int rc = 0;
  auto j = plan_json("--device-memory 16GiB --max-model-len 8192", &rc);
  ASSERT_EQ(rc, 0) << j.dump();
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_EQ(j["kv_budget_bytes"].get<uint64_t>(), 0u);
}

TEST(DevicePlanTest, ErrorsNameTheFlag) {
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " plan " + llama8b() + " --device-memory 8GiB", &out, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--device-memory needs --device cuda"), std::string::npos) << err;
  rc = test::run_command(std::string(HORIZON_BINARY) + " plan " + llama8b() + " --device tpu", &out, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--device 'tpu'"), std::string::npos) << err;
  rc = test::run_command(std::string(HORIZON_BINARY) + " plan " + llama8b() + " --device cuda --device-memory 80GiB --kv-hot-window 4096",
                         &out, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--kv-hot-window"), std::string::npos) << err;
  for (const char* t : {"int4c", "int8c"}) {  // per-channel types: no GPU codec yet
    rc = test::run_command(std::string(HORIZON_BINARY) + " plan " + llama8b() +
                               " --device cuda --device-memory 80GiB --kv-cache-dtype " + t,
                           &out, &err);
    EXPECT_NE(rc, 0);
    EXPECT_NE(err.find(std::string("--kv-cache-dtype ") + t + " is not available with --device cuda"), std::string::npos)
        << err;
  }
  // Without a GPU and without --device-memory: one error saying what to do.
  if (!device::require_gpu("probe").ok()) {
    rc = test::run_command(std::string(HORIZON_BINARY) + " plan " + llama8b() + " --device cuda", &out, &err);
    EXPECT_NE(rc, 0);
    EXPECT_NE(err.find("--device-memory"), std::string::npos) << err;
  }
}

TEST(DevicePlanTest, TextReportListsEveryPart) {
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " plan " + llama8b() + " --device cuda --device-memory 80GiB", &out, &err);
  ASSERT_EQ(rc, 0) << err;
  for (const char* part : {"Device plan (cuda)", "weights", "activations", "attention scratch", "KV cache budget", "requested KV"})
    EXPECT_NE(out.find(part), std::string::npos) << part << " missing in\n" << out;
}

}  // namespace
}  // namespace hz
