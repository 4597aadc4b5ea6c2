#include "cclab/trainer/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>

#include <fmt/format.h>

#include "cclab/collectives/error.h"
#include "cclab/trainer/rng.h"

namespace cclab::train {
namespace fs = std::filesystem;
namespace {

constexpr char kRecordMagic[8] = {'C', 'C', 'L', 'A', 'B', 'R', 'E', 'C'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 4 + 8;

struct RecordHeader {
  std::uint32_t dim = 0, classes = 0;
  std::uint64_t count = 0;
};

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Reads and checks a record file's header; `bytes` is the file's size.
RecordHeader read_header(const fs::path& file, std::ifstream& in, std::uintmax_t bytes) {
  char h[kHeaderBytes];
  if (!in.read(h, sizeof h))
    throw IoError(
        fmt::format("{}: too short for a record file header ({} bytes)", file.string(), bytes));
  if (std::memcmp(h, kRecordMagic, sizeof kRecordMagic) != 0)
    throw IoError(fmt::format("{}: not a cclab record file (bad magic)", file.string()));
  if (const auto v = get<std::uint32_t>(h + 8); v != kVersion)
    throw IoError(
        fmt::format("{}: record file version {} (supported: {})", file.string(), v, kVersion));
  RecordHeader r{get<std::uint32_t>(h + 12), get<std::uint32_t>(h + 16),
                 get<std::uint64_t>(h + 20)};
  if (r.dim == 0 || r.classes < 2)
    throw IoError(
        fmt::format("{}: bad header (features {}, classes {})", file.string(), r.dim, r.classes));
  const std::uintmax_t want = kHeaderBytes + r.count * (4 + 4ull * r.dim);
  if (bytes != want)
    throw IoError(fmt::format("{}: size {} bytes, header says {} records of {} features ({} bytes)",
                              file.string(), bytes, r.count, r.dim, want));
  return r;
}

RecordHeader header_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError(fmt::format("{}: cannot open", file.string()));
  return read_header(file, in, fs::file_size(file));
}

// A sample of the generated distribution: a class centre plus noise, then a
// fixed non-linear distortion shared by all classes.
void sample(const std::vector<float>& centres, int dim, int label, Rng& rng, float* x) {
  for (int j = 0; j < dim; ++j)
    x[j] = centres[static_cast<std::size_t>(label) * dim + j] + 1.5f * float(rng.normal());
  for (int j = 0; j < dim; ++j) x[j] += 0.75f * std::tanh(x[(j + 1) % dim] * x[(j + 2) % dim]);
}

Dataset generate(const std::vector<float>& centres, const GenerateOptions& o, std::int64_t n,
                 Rng& rng) {
  Dataset d{o.dim, o.classes, std::vector<float>(static_cast<std::size_t>(n) * o.dim),
            std::vector<std::int32_t>(static_cast<std::size_t>(n))};
  for (std::int64_t i = 0; i < n; ++i) {
    d.labels[i] = static_cast<std::int32_t>(rng.below(o.classes));
    sample(centres, o.dim, d.labels[i], rng, &d.features[static_cast<std::size_t>(i) * o.dim]);
  }
  return d;
}

// Rows [begin, end) of d.
Dataset slice(const Dataset& d, std::int64_t begin, std::int64_t end) {
  Dataset s{d.dim, d.classes, {}, {}};
  s.features.assign(d.features.begin() + begin * d.dim, d.features.begin() + end * d.dim);
  s.labels.assign(d.labels.begin() + begin, d.labels.begin() + end);
  return s;
}

std::uint32_t big_endian_u32(const unsigned char* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

std::vector<unsigned char> read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError(fmt::format("{}: cannot open", file.string()));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void shuffle(std::vector<std::int64_t>& v, Rng& rng) {
  // Fisher-Yates with our own generator, so the order is the same everywhere.
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

}  // namespace

void write_record_file(const fs::path& file, const Dataset& d) {
  std::string out;
  out.append(kRecordMagic, sizeof kRecordMagic);
  put(out, kVersion);
  put(out, static_cast<std::uint32_t>(d.dim));
  put(out, static_cast<std::uint32_t>(d.classes));
  put(out, static_cast<std::uint64_t>(d.size()));
  for (std::int64_t i = 0; i < d.size(); ++i) {
    put(out, d.labels[i]);
    out.append(reinterpret_cast<const char*>(&d.features[static_cast<std::size_t>(i) * d.dim]),
               sizeof(float) * d.dim);
  }
  std::ofstream f(file, std::ios::binary | std::ios::trunc);
  if (!f.write(out.data(), static_cast<std::streamsize>(out.size())) || !f.flush())
    throw IoError(fmt::format("{}: cannot write", file.string()));
}

void read_record_file(const fs::path& file, Dataset& out) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError(fmt::format("{}: cannot open", file.string()));
  const RecordHeader h = read_header(file, in, fs::file_size(file));
  if (out.dim == 0) {
    out.dim = static_cast<int>(h.dim);
    out.classes = static_cast<int>(h.classes);
  } else if (out.dim != int(h.dim) || out.classes != int(h.classes)) {
    throw IoError(fmt::format("{}: {} features and {} classes, other files have {} and {}",
                              file.string(), h.dim, h.classes, out.dim, out.classes));
  }
  std::vector<char> buf(4 + 4ull * h.dim);
  for (std::uint64_t i = 0; i < h.count; ++i) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto label = get<std::int32_t>(buf.data());
    if (label < 0 || label >= int(h.classes))
      throw IoError(fmt::format("{}: record {} has label {} (classes: {})", file.string(), i, label,
                                h.classes));
    out.labels.push_back(label);
    const auto* f = reinterpret_cast<const float*>(buf.data() + 4);
    out.features.insert(out.features.end(), f, f + h.dim);
  }
}

void make_dataset(const fs::path& dir, const GenerateOptions& o) {
  if (o.files < 1 || o.examples < o.files || o.dim < 3 || o.classes < 2)
    throw InvalidArgument(fmt::format(
        "--make-data: need files >= 1, examples >= files, dim >= 3, classes >= 2 (got {}, {}, {}, "
        "{})",
        o.files, o.examples, o.dim, o.classes));
  fs::create_directories(dir);
  Rng rng(derive_seed(o.seed, kSeedGenerate, 0));
  std::vector<float> centres(static_cast<std::size_t>(o.classes) * o.dim);
  for (auto& c : centres) c = float(rng.normal());
  const Dataset train = generate(centres, o, o.examples, rng);
  for (int f = 0; f < o.files; ++f) {
    const auto name = fmt::format("train-{:05d}-of-{:05d}.rec", f, o.files);
    write_record_file(dir / name,
                      slice(train, train.size() * f / o.files, train.size() * (f + 1) / o.files));
  }
  if (o.eval_examples > 0)
    write_record_file(dir / "eval.rec", generate(centres, o, o.eval_examples, rng));
}

Dataset read_idx(const fs::path& images, const fs::path& labels) {
  const auto img = read_all(images), lab = read_all(labels);
  if (img.size() < 16 || big_endian_u32(img.data()) != 0x803)
    throw IoError(fmt::format("{}: not an IDX image file (magic 0x00000803)", images.string()));
  if (lab.size() < 8 || big_endian_u32(lab.data()) != 0x801)
    throw IoError(fmt::format("{}: not an IDX label file (magic 0x00000801)", labels.string()));
  const std::uint64_t n = big_endian_u32(img.data() + 4);
  const std::uint64_t dim =
      std::uint64_t(big_endian_u32(img.data() + 8)) * big_endian_u32(img.data() + 12);
  if (img.size() != 16 + n * dim)
    throw IoError(fmt::format("{}: size {} bytes, header says {} images of {} pixels",
                              images.string(), img.size(), n, dim));
  if (big_endian_u32(lab.data() + 4) != n || lab.size() != 8 + n)
    throw IoError(fmt::format("{}: {} labels for {} images in {}", labels.string(),
                              big_endian_u32(lab.data() + 4), n, images.string()));
  Dataset d{static_cast<int>(dim), 10, std::vector<float>(n * dim), std::vector<std::int32_t>(n)};
  for (std::uint64_t i = 0; i < n * dim; ++i) d.features[i] = img[16 + i] / 255.0f;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (lab[8 + i] > 9)
      throw IoError(
          fmt::format("{}: label {} at {} (allowed 0-9)", labels.string(), lab[8 + i], i));
    d.labels[i] = lab[8 + i];
  }
  return d;
}

DataSource open_source(const fs::path& dir, std::string_view what) {
  if (!fs::is_directory(dir))
    throw InvalidArgument(fmt::format(
        "{}: '{}' is not a directory (create the built-in set with `cclab train --make-data DIR`)",
        what, dir.string()));
  DataSource s;
  s.dir = dir;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".rec" && e.path().filename() != "eval.rec")
      s.files.push_back(e.path());
  std::sort(s.files.begin(), s.files.end());
  if (!s.files.empty()) {
    for (const auto& f : s.files) {
      const auto h = header_of(f);
      if (s.dim != 0 && (s.dim != int(h.dim) || s.classes != int(h.classes)))
        throw IoError(fmt::format("{}: {} features and {} classes, {} has {} and {}", f.string(),
                                  h.dim, h.classes, s.files[0].string(), s.dim, s.classes));
      s.dim = int(h.dim), s.classes = int(h.classes);
      s.file_counts.push_back(static_cast<std::int64_t>(h.count));
    }
    if (fs::exists(dir / "eval.rec")) s.eval_file = dir / "eval.rec";
    return s;
  }
  const auto images = dir / "train-images-idx3-ubyte", labels = dir / "train-labels-idx1-ubyte";
  if (!fs::exists(images) || !fs::exists(labels))
    throw InvalidArgument(fmt::format(
        "{}: '{}' holds neither record files (*.rec) nor MNIST's train-images-idx3-ubyte and "
        "train-labels-idx1-ubyte (create the built-in set with `cclab train --make-data DIR`)",
        what, dir.string()));
  const Dataset d = read_idx(images, labels);
  s.file_based = false;
  s.dim = d.dim, s.classes = d.classes;
  s.files = {images};
  s.file_counts = {d.size()};
  if (fs::exists(dir / "t10k-images-idx3-ubyte")) s.eval_file = dir / "t10k-images-idx3-ubyte";
  return s;
}

Dataset load_eval_set(const DataSource& s) {
  Dataset d;
  if (!s.file_based) {
    const bool held_out = !s.eval_file.empty();
    return read_idx(held_out ? s.eval_file : s.files[0],
                    s.dir / (held_out ? "t10k-labels-idx1-ubyte" : "train-labels-idx1-ubyte"));
  }
  if (!s.eval_file.empty()) {
    read_record_file(s.eval_file, d);
    return d;
  }
  for (const auto& f : s.files) read_record_file(f, d);
  return d;
}

ShardPolicy parse_shard_policy(std::string_view name, std::string_view what) {
  for (auto p : {ShardPolicy::kOff, ShardPolicy::kFile, ShardPolicy::kData, ShardPolicy::kAuto})
    if (shard_policy_name(p) == name) return p;
  throw InvalidArgument(
      fmt::format("{}: unknown policy '{}' (allowed: off, file, data, auto)", what, name));
}

std::string_view shard_policy_name(ShardPolicy p) {
  switch (p) {
    case ShardPolicy::kOff:
      return "off";
    case ShardPolicy::kFile:
      return "file";
    case ShardPolicy::kData:
      return "data";
    case ShardPolicy::kAuto:
      return "auto";
  }
  return "?";
}

ShardedData::ShardedData(const DataSource& source, ShardPolicy policy, int worker, int workers,
                         std::uint64_t seed)
    : source_(source), policy_(policy), worker_(worker), workers_(workers), seed_(seed) {
  if (policy_ == ShardPolicy::kAuto)
    policy_ = source.file_based ? ShardPolicy::kFile : ShardPolicy::kData;
  if (policy_ == ShardPolicy::kFile && !source.file_based)
    throw InvalidArgument(fmt::format(
        "--shard-policy file: the source in '{}' is not file-based (MNIST IDX is read into "
        "memory as one tensor); use data or auto",
        source.dir.string()));
  if (policy_ == ShardPolicy::kFile && int(source.files.size()) < workers)
    throw InvalidArgument(fmt::format(
        "--shard-policy {}: {} files in '{}' but {} workers; FILE sharding needs at least one file "
        "per worker (use --shard-policy data, or write more files)",
        shard_policy_name(policy), source.files.size(), source.dir.string(), workers));
  if (!source.file_based) {
    data_ = read_idx(source.files[0], source.dir / "train-labels-idx1-ubyte");
    return;
  }
  for (int f : files_of(worker_)) read_record_file(source.files[f], data_);
}

std::vector<int> ShardedData::files_of(int w) const {
  std::vector<int> ids;
  const int step = policy_ == ShardPolicy::kFile ? workers_ : 1;
  for (int f = policy_ == ShardPolicy::kFile ? w : 0; f < int(source_.files.size()); f += step)
    ids.push_back(f);
  return ids;
}

std::int64_t ShardedData::shard_size(int w) const {
  std::int64_t n = 0;
  for (int f : files_of(w)) n += source_.file_counts[f];
  if (policy_ == ShardPolicy::kData) return n / workers_ + (w < n % workers_ ? 1 : 0);
  return n;
}

std::int64_t ShardedData::steps_per_epoch(int per_replica_batch) const {
  std::int64_t smallest = shard_size(0);
  for (int w = 1; w < workers_; ++w) smallest = std::min(smallest, shard_size(w));
  return smallest / per_replica_batch;
}

std::vector<std::int64_t> ShardedData::epoch_order(int epoch) const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(data_.size()));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(derive_seed(seed_, kSeedShuffle, static_cast<std::uint64_t>(epoch)));
  shuffle(order, rng);
  if (policy_ != ShardPolicy::kData) return order;
  // Every worker shuffled the same full stream; keep elements worker, worker+W, ...
  std::vector<std::int64_t> mine;
  for (std::size_t p = worker_; p < order.size(); p += workers_) mine.push_back(order[p]);
  return mine;
}

}  // namespace cclab::train
