// SHA-256 through OpenSSL's EVP interface (no hand-written hashing).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>

namespace cclab::train {

using Digest = std::array<unsigned char, 32>;

Digest sha256(std::span<const std::byte> data);
template <class T>
Digest sha256_of(std::span<const T> values) {
  return sha256(std::as_bytes(values));
}
std::string to_hex(const Digest& d);

}  // namespace cclab::train
