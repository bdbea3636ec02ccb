// HORIZON_VNNI=0 turns the VNNI matmuls off (for A/B runs). The variable is read once, on the first
// kernel call, so this executable sets it during static initialization, before any test runs.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/kernels.h"
#include "kernels/vnni_dispatch.h"

namespace hz::kernels {
namespace {

const bool kEnvSet = [] { return setenv("HORIZON_VNNI", "0", 1) == 0; }();

TEST(VnniEnvTest, HorizonVnniZeroTurnsTheVariantsOff) {
  ASSERT_TRUE(kEnvSet);
  EXPECT_FALSE(vnni_enabled());
  if (isa_supported(Isa::kAvx2)) {
    EXPECT_STREQ(isa_name(active_isa()), "avx2");
  }
  if (vnni_supported()) {
    force_vnni(true);  // an explicit force still wins over the environment
    EXPECT_TRUE(vnni_enabled());
    EXPECT_STREQ(isa_name(active_isa()), "avx2");
    force_vnni(false);
  }
}

}  // namespace
}  // namespace hz::kernels
