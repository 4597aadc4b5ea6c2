#include "cclab/trainer/sha256.h"

#include <memory>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "cclab/collectives/error.h"

namespace cclab::train {

Digest sha256(std::span<const std::byte> data) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  Digest d{};
  unsigned int len = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), d.data(), &len) != 1 || len != d.size())
    throw Error("OpenSSL SHA-256 failed");
  return d;
}

std::string to_hex(const Digest& d) {
  std::string s;
  for (unsigned char c : d) s += fmt::format("{:02x}", c);
  return s;
}

}  // namespace cclab::train
