#include "cclab/trainer/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "cclab/collectives/error.h"
#include "cclab/trainer/sha256.h"

namespace cclab::train {
namespace fs = std::filesystem;
namespace {

constexpr char kCheckpointMagic[8] = {'C', 'C', 'L', 'A', 'B', 'C', 'K', 'P'};
constexpr std::size_t kDigestBytes = 32;

void put_u64(std::string& out, std::uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), 8);
}
void put_floats(std::string& out, const std::vector<float>& v) {
  put_u64(out, v.size());
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// A cursor over a verified payload; every read is bounds-checked.
struct Reader {
  const fs::path& file;
  std::string_view data;
  std::size_t pos = 0;

  std::string_view take(std::uint64_t n, const char* what) {
    if (n > data.size() - pos)
      throw IoError(
          fmt::format("checkpoint {}: {} runs past the end of the file", file.string(), what));
    const auto s = data.substr(pos, n);
    pos += n;
    return s;
  }
  std::uint64_t u64(const char* what) {
    std::uint64_t v;
    std::memcpy(&v, take(8, what).data(), 8);
    return v;
  }
  std::vector<float> floats(const char* what) {
    const std::uint64_t n = u64(what);
    if (n > (data.size() - pos) / sizeof(float))
      throw IoError(
          fmt::format("checkpoint {}: {} runs past the end of the file", file.string(), what));
    std::vector<float> v(n);
    std::memcpy(v.data(), take(n * sizeof(float), what).data(), n * sizeof(float));
    return v;
  }
};

void fsync_path(const fs::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags);
  if (fd < 0) throw IoError(fmt::format("{}: open: {}", p.string(), std::strerror(errno)));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw IoError(fmt::format("{}: fsync: {}", p.string(), std::strerror(errno)));
}

std::string encode(const CheckpointState& s) {
  nlohmann::json meta = {{"step", s.step},
                         {"epoch", s.epoch},
                         {"step_in_epoch", s.step_in_epoch},
                         {"shuffle_rng_state", s.shuffle_rng_state},
                         {"optimizer_iterations", s.optimizer.iterations},
                         {"config", s.config}};
  const std::string m = meta.dump();
  std::string out(kCheckpointMagic, sizeof kCheckpointMagic);
  put_u64(out, m.size());
  out += m;
  put_floats(out, s.weights);
  put_floats(out, s.optimizer.m);
  put_floats(out, s.optimizer.v);
  const Digest d = sha256(std::as_bytes(std::span(out.data(), out.size())));
  out.append(reinterpret_cast<const char*>(d.data()), d.size());
  return out;
}

std::int64_t step_of(const fs::path& p) {
  // ckpt-<step>.cclab
  const std::string stem = p.stem().string();
  return std::stoll(stem.substr(5));
}

}  // namespace

void write_checkpoint(const fs::path& file, const CheckpointState& state) {
  const std::string bytes = encode(state);
  const fs::path tmp =
      file.parent_path() / fmt::format(".{}.tmp-{}", file.filename().string(), ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) || !out.flush())
      throw IoError(fmt::format("{}: cannot write", tmp.string()));
  }
  fsync_path(tmp, O_RDONLY);
  fs::rename(tmp, file);
  fsync_path(file.parent_path().empty() ? fs::path(".") : file.parent_path(),
             O_RDONLY | O_DIRECTORY);
}

CheckpointState read_checkpoint(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError(fmt::format("checkpoint {}: cannot open", file.string()));
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (bytes.size() < sizeof kCheckpointMagic + 8 + kDigestBytes)
    throw IoError(fmt::format("checkpoint {}: truncated ({} bytes)", file.string(), bytes.size()));
  if (std::memcmp(bytes.data(), kCheckpointMagic, sizeof kCheckpointMagic) != 0)
    throw IoError(fmt::format("checkpoint {}: not a cclab checkpoint (bad magic)", file.string()));
  const std::size_t body = bytes.size() - kDigestBytes;
  const Digest want = sha256(std::as_bytes(std::span(bytes.data(), body)));
  if (std::memcmp(want.data(), bytes.data() + body, kDigestBytes) != 0)
    throw IoError(
        fmt::format("checkpoint {}: SHA-256 mismatch (corrupted or truncated)", file.string()));
  Reader r{file, std::string_view(bytes).substr(0, body), sizeof kCheckpointMagic};
  CheckpointState s;
  try {
    const auto meta = nlohmann::json::parse(r.take(r.u64("metadata length"), "metadata"));
    s.step = meta.at("step");
    s.epoch = meta.at("epoch");
    s.step_in_epoch = meta.at("step_in_epoch");
    s.shuffle_rng_state = meta.at("shuffle_rng_state");
    s.optimizer.iterations = meta.at("optimizer_iterations");
    s.config = meta.at("config");
  } catch (const nlohmann::json::exception& e) {
    throw IoError(fmt::format("checkpoint {}: malformed metadata: {}", file.string(), e.what()));
  }
  s.weights = r.floats("weights");
  s.optimizer.m = r.floats("optimizer m");
  s.optimizer.v = r.floats("optimizer v");
  if (r.pos != body)
    throw IoError(fmt::format("checkpoint {}: {} unexpected bytes after the data", file.string(),
                              body - r.pos));
  return s;
}

CheckpointStore::CheckpointStore(fs::path dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  if (keep_ < 1) throw InvalidArgument(fmt::format("--keep: must be at least 1 (got {})", keep_));
}

fs::path CheckpointStore::save(const CheckpointState& state) {
  fs::create_directories(dir_);
  const fs::path file = dir_ / fmt::format("ckpt-{:010d}.cclab", state.step);
  write_checkpoint(file, state);
  auto all = list();
  for (std::size_t i = 0; i + keep_ < all.size(); ++i) fs::remove(all[i]);
  return file;
}

std::vector<fs::path> CheckpointStore::list() const {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir_)) return files;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    if (name.size() == 21 && name.starts_with("ckpt-") && name.ends_with(".cclab") &&
        std::all_of(name.begin() + 5, name.begin() + 15,
                    [](char c) { return c >= '0' && c <= '9'; }))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return step_of(a) < step_of(b); });
  return files;
}

std::optional<CheckpointState> CheckpointStore::load_latest(
    const std::function<void(const std::string&)>& warn) const {
  const auto files = list();
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      return read_checkpoint(*it);
    } catch (const IoError& e) {
      warn(fmt::format("{}; trying the previous checkpoint", e.what()));
    }
  }
  return std::nullopt;
}

}  // namespace cclab::train
