#include "kvstore/record_mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <vector>

#include "base/check.h"

namespace hz::kvstore {

namespace {

// HMAC-SHA256 over the concatenation of `parts`.
std::array<uint8_t, 32> hmac_sha256(const std::array<uint8_t, 32>& key, std::initializer_list<std::string_view> parts) {
  // EVP_MAC (OpenSSL 3): incremental, so a record is authenticated without a copy.
  static EVP_MAC* const m = EVP_MAC_fetch(nullptr, "HMAC", nullptr);  // shared, thread-safe; never freed
  HZ_CHECK(m != nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(m);
  HZ_CHECK(ctx != nullptr);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
  HZ_CHECK(EVP_MAC_init(ctx, key.data(), key.size(), params) == 1);
  for (std::string_view p : parts) HZ_CHECK(EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(p.data()), p.size()) == 1);
  std::array<uint8_t, 32> out{};
  size_t n = 0;
  HZ_CHECK(EVP_MAC_final(ctx, out.data(), &n, out.size()) == 1 && n == out.size());
  EVP_MAC_CTX_free(ctx);
  return out;
}

std::string_view bytes(const void* p, size_t n) { return std::string_view(static_cast<const char*>(p), n); }

}  // namespace

RecordKeys::RecordKeys(std::string_view secret) {
  // Two independent keys from one secret (HMAC as a PRF with distinct labels), so a name can never
  // double as a MAC. The secret is hashed first: HMAC accepts keys of any length.
  std::array<uint8_t, 32> root{};
  unsigned int n = 0;
  HZ_CHECK(HMAC(EVP_sha256(), "horizon kv remote", 17, reinterpret_cast<const unsigned char*>(secret.data()), secret.size(),
                root.data(), &n) != nullptr);
  name_key_ = hmac_sha256(root, {"chain keys"});
  mac_key_ = hmac_sha256(root, {"record mac"});
  OPENSSL_cleanse(root.data(), root.size());
}

ChainKey RecordKeys::chain_key(const Fingerprint& fp, const ChainKey& parent, const int32_t* tokens,
                               uint32_t num_tokens) const {
  const auto full = hmac_sha256(name_key_, {bytes(&fp.lo, 8), bytes(&fp.hi, 8), bytes(parent.data(), parent.size()),
                                            bytes(tokens, 4 * static_cast<size_t>(num_tokens))});
  ChainKey k;
  std::memcpy(k.data(), full.data(), k.size());
  return k;
}

Mac RecordKeys::mac(std::string_view name, const uint8_t* record, size_t len) const {
  const uint64_t name_len = name.size();  // length-prefixed: (name, record) splits are unambiguous
  return hmac_sha256(mac_key_, {bytes(&name_len, 8), name, bytes(record, len)});
}

bool RecordKeys::verify(std::string_view name, const uint8_t* record, size_t len, const uint8_t* m) const {
  const Mac want = mac(name, record, len);
  return CRYPTO_memcmp(want.data(), m, kMacBytes) == 0;
}

uint64_t chain_key_u64(const ChainKey& k) {
  uint64_t v;
  std::memcpy(&v, k.data(), 8);
  return v;
}

std::string chain_key_hex(const ChainKey& k) {
  static const char* kHex = "0123456789abcdef";
  std::string s(32, '0');
  for (size_t i = 0; i < k.size(); ++i) {
    s[2 * i] = kHex[k[i] >> 4];
    s[2 * i + 1] = kHex[k[i] & 15];
  }
  return s;
}

}  // namespace hz::kvstore
