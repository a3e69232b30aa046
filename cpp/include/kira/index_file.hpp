// kira's versioned, checksummed index file, written atomically.
//
// Layout (little-endian):
//   0  8 bytes  magic "KIRAIDX\0"
//   8  u32      format version (kFormatVersion)
//  12  u32      index kind (1 = FlatIndex, 2 = HNSWIndex)
//  16  u64      payload length in bytes
//  24  u32      CRC-32 (IEEE) of the payload
//  28  u32      CRC-32 of bytes 0..27 (the header)
//  32  payload  written by the index: dtype, dim, count, parameters, ids, graph, rows
//
// Saving writes "<path>.tmp-<pid>-<n>" in the same directory, fsyncs it, renames it over
// <path> and fsyncs the directory, so a reader sees the old file or the new one, never a
// torn one. Reading checks, in order, magic, version, header checksum, kind, length and
// payload checksum, and throws std::invalid_argument naming the first problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace kira {

constexpr std::uint32_t kFormatVersion = 1;
enum class IndexKind : std::uint32_t { flat = 1, hnsw = 2 };

std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc = 0);

// The operating system refused a read or write (missing file, permissions, disk full);
// errno_value is the errno at the time. Content problems are std::invalid_argument.
class FileError : public std::runtime_error {
 public:
  FileError(const std::string& what, int errno_value) : std::runtime_error(what), errno_value(errno_value) {}
  int errno_value;
};

// Accumulates a payload in memory, then saves it atomically.
class PayloadWriter {
 public:
  template <class T>
  void put(const T& v) {
    put_bytes(&v, sizeof v);
  }
  void put_bytes(const void* p, std::size_t n) {
    const auto* c = static_cast<const char*>(p);
    buf_.insert(buf_.end(), c, c + n);
  }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    put_bytes(v.data(), v.size() * sizeof(T));
  }
  // Throws FileError when the file cannot be written.
  void save(const std::string& path, IndexKind kind) const;

 private:
  std::vector<char> buf_;
};

// Reads and verifies a whole file; then hands out the payload in order.
class PayloadReader {
 public:
  PayloadReader(const std::string& path, IndexKind expected);

  template <class T>
  T get() {
    T v;
    get_bytes(&v, sizeof v);
    return v;
  }
  void get_bytes(void* p, std::size_t n) {
    need(n);
    std::memcpy(p, buf_.data() + pos_, n);
    pos_ += n;
  }
  template <class T>
  void get_vector(std::vector<T>& v, std::size_t count) {
    need_items(count, sizeof(T));
    v.resize(count);
    get_bytes(v.data(), count * sizeof(T));
  }
  // The payload must be consumed exactly.
  void finish() const;
  // Throws invalid_argument("<path>: corrupted index file: <what>").
  [[noreturn]] void corrupt(const std::string& what) const;
  std::size_t remaining() const { return buf_.size() - pos_; }

 private:
  void need(std::size_t n) const {
    if (n > buf_.size() - pos_) corrupt("payload ends early");
  }
  void need_items(std::size_t count, std::size_t size) const {
    if (size != 0 && count > (buf_.size() - pos_) / size) corrupt("payload ends early");
  }
  std::string path_;
  std::vector<char> buf_;
  std::size_t pos_ = 0;
};

}  // namespace kira
