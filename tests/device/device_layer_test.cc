// The device layer where no GPU answers (CI, this build with or without CUDA): every call that needs
// a GPU is one clear error, nothing aborts, and empty objects are harmless.
#include <gtest/gtest.h>

#include "device/device.h"

namespace hz::device {
namespace {

bool gpu_present() { return require_gpu("probe").ok(); }

TEST(DeviceLayerTest, WithoutGpuEveryCallIsAClearError) {
  if (gpu_present()) GTEST_SKIP() << "a GPU answers here; this test covers machines without one";
  auto n = device_count();
  ASSERT_FALSE(n.ok());
  const std::string& m = n.status().message();
  // Either this build has no CUDA, or the runtime says why there is no GPU.
  EXPECT_TRUE(m.find("no CUDA backend") != std::string::npos || m.find("driver") != std::string::npos ||
              m.find("no CUDA GPU") != std::string::npos)
      << m;
  Status st = require_gpu("--device cuda");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("--device cuda: ", 0), 0u) << st.message();
  EXPECT_FALSE(query(0).ok());
  auto b = Buffer::allocate(1024, "test buffer");
  EXPECT_FALSE(b.ok());
  EXPECT_FALSE(Stream::create().ok());
  EXPECT_FALSE(Event::create().ok());
}

TEST(DeviceLayerTest, EmptyObjectsAndZeroSizesNeedNoGpu) {
  auto b = Buffer::allocate(0, "nothing");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data(), nullptr);
  EXPECT_EQ(b->bytes(), 0u);
  Buffer moved = std::move(*b);
  EXPECT_EQ(moved.bytes(), 0u);
  Stream s;
  EXPECT_TRUE(copy_to_device(nullptr, nullptr, 0, s).ok());
  EXPECT_TRUE(copy_to_host(nullptr, nullptr, 0, s).ok());
  EXPECT_TRUE(fill_bytes(nullptr, 0, 0, s).ok());
  Graph g;
  EXPECT_TRUE(g.empty());
}

TEST(DeviceLayerTest, FormatsVersionsAndDescriptions) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12080), "12.8");
  EXPECT_EQ(cuda_version_string(0), "none");
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.num_sms = 132;
  d.total_bytes = uint64_t{140} << 30;
  d.free_bytes = uint64_t{139} << 30;
  d.driver_version = 13000;
  d.runtime_version = 13000;
  const std::string s = describe(d);
  EXPECT_NE(s.find("NVIDIA H200 (sm_90, 132 SMs)"), std::string::npos) << s;
  EXPECT_NE(s.find("driver 13.0"), std::string::npos) << s;
}

TEST(DeviceLayerTest, CompiledMatchesTheBuild) {
  // A CUDA build reports the runtime's reason; a stub build says it has no CUDA backend.
  auto n = device_count();
  if (n.ok()) GTEST_SKIP();
  const bool says_no_backend = n.status().message().find("no CUDA backend") != std::string::npos;
  EXPECT_EQ(says_no_backend, !compiled()) << n.status().message();
}

}  // namespace
}  // namespace hz::device
