// The KV fingerprint: each input (weights, tokenizer, RoPE, KV type, block size, identity) changes
// it; the weights digest tells different model files apart (full and sampled modes) and is stable.
#include <gtest/gtest.h>

#include "kvstore/fingerprint.h"
#include "support/test_support.h"

namespace hz::kvstore {
namespace {

TEST(Fingerprint, EveryInputCounts) {
  FingerprintInputs base;
  base.weights.digest = {1, 2};
  base.tokenizer = "vocab 512";
  base.rope = "base 10000";
  base.kv_type = "f16";
  base.block_tokens = 16;
  base.identity = "llama|L2";
  const Fingerprint f0 = make_fingerprint(base);
  EXPECT_EQ(make_fingerprint(base), f0);  // deterministic, no per-process seed
  std::vector<FingerprintInputs> variants(6, base);
  variants[0].weights.digest.lo = 3;
  variants[1].tokenizer = "vocab 513";
  variants[2].rope = "base 500000";
  variants[3].kv_type = "int8";
  variants[4].block_tokens = 32;
  variants[5].identity = "llama|L3";
  for (size_t i = 0; i < variants.size(); ++i) EXPECT_NE(make_fingerprint(variants[i]), f0) << i;
  // Length-prefixed fields: moving bytes between two fields changes the digest.
  FingerprintInputs shifted = base;
  shifted.tokenizer = "vocab 512b";
  shifted.rope = "ase 10000";
  EXPECT_NE(make_fingerprint(shifted), f0);
}

TEST(Fingerprint, WeightsDigestSeparatesModelsAndIsStable) {
  auto a = GgufFile::open(test::model_path("synth-tiny-f16.gguf"));
  auto b = GgufFile::open(test::model_path("synth-tiny-q8_0.gguf"));
  auto c = GgufFile::open(test::model_path("stories260K.gguf"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const WeightsDigest da = digest_weights(*a), db = digest_weights(*b), dc = digest_weights(*c);
  EXPECT_TRUE(da.full);
  EXPECT_NE(da.digest, db.digest);
  EXPECT_NE(da.digest, dc.digest);
  auto a2 = GgufFile::open(test::model_path("synth-tiny-f16.gguf"));
  EXPECT_EQ(digest_weights(*a2).digest, da.digest);
  // Sampled mode (what a file beyond the full-hash limit gets) still separates them and differs
  // from the full digest.
  const WeightsDigest sa = digest_weights(*a, 0), sb = digest_weights(*b, 0);
  EXPECT_FALSE(sa.full);
  EXPECT_NE(sa.digest, sb.digest);
  EXPECT_NE(sa.digest, da.digest);
  EXPECT_EQ(digest_weights(*a2, 0).digest, sa.digest);
}

}  // namespace
}  // namespace hz::kvstore
