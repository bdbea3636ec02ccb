// `--device` on the engine commands and the GPU line of `horizon doctor`, where no GPU answers:
// one clear error naming the flag, and doctor still passes (the CPU engine runs).
#include <gtest/gtest.h>

#include "device/device.h"
#include "support/test_support.h"

namespace hz {
namespace {

bool gpu_here() { return device::require_gpu("probe").ok(); }

TEST(DeviceFlagTest, CudaWithoutGpuIsOneClearError) {
  if (gpu_here()) GTEST_SKIP() << "a GPU answers here";
  const std::string model = test::model_path("stories260K.gguf");
  for (const std::string cmd : {"run -p hi -n 1", "perplexity -f /dev/null"}) {
    std::string out, err;
    int rc = test::run_command(std::string(HORIZON_BINARY) + " " + cmd + " -m " + model + " --device cuda", &out, &err);
    EXPECT_NE(rc, 0) << cmd;
    EXPECT_NE(err.find("--device cuda: "), std::string::npos) << cmd << ": " << err;
    EXPECT_EQ(err.find("Abort"), std::string::npos) << err;
  }
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " run -p hi -n 1 -m " + model + " --device tpu", &out, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--device 'tpu' is not one of cpu, cuda"), std::string::npos) << err;
}

TEST(DeviceFlagTest, DoctorReportsTheGpuOrItsAbsence) {
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " doctor --port 0", &out, &err);
  (void)rc;  // the port check may fail on port 0; the gpu line is what matters here
  const size_t at = out.find("  gpu ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string line = out.substr(out.rfind('\n', at) + 1, out.find('\n', at) - out.rfind('\n', at) - 1);
  if (gpu_here()) {
    EXPECT_EQ(line.rfind("PASS", 0), 0u) << line;
    EXPECT_NE(line.find("driver"), std::string::npos) << line;
  } else {
    EXPECT_EQ(line.rfind("PASS", 0), 0u) << line;
    EXPECT_NE(line.find("no GPU"), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace hz
