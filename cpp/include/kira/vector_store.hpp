// Row storage for unit vectors in one of three encodings, shared by FlatIndex and
// HNSWIndex, and the query encoding that scores a query against stored rows.
//
//   f32: the unit vector as is (4 bytes per value).
//   f16: IEEE half per value (2 bytes); scores use the f32 query against decoded rows.
//   i8 : per-vector symmetric quantisation of the unit vector: scale = max|x_i| / 127,
//        q_i = round(x_i / scale) in [-127, 127] (1 byte per value + a 4-byte scale).
//        The query is quantised the same way and the score is
//        scale_q * scale_x * sum_i q_i x_i, an exact int32 dot rescaled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "kira/distance.hpp"

namespace kira {

// Cache-line (64-byte) aligned storage: a 64-byte vector load that straddles two lines
// costs two L1 accesses, and the scans issue nothing but such loads.
template <class T>
struct CacheAligned {
  using value_type = T;
  CacheAligned() = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheAligned<U>&) const { return false; }
};
template <class T>
using aligned_vector = std::vector<T, CacheAligned<T>>;

enum class Dtype : std::uint8_t { f32 = 0, f16 = 1, i8 = 2 };

const char* dtype_name(Dtype dtype);
// Throws std::invalid_argument naming the accepted values.
Dtype parse_dtype(const std::string& name);
std::size_t bytes_per_value(Dtype dtype);

// Checks that n rows of d floats are finite and non-zero, then writes their unit
// versions to out (may alias in). Throws std::invalid_argument naming the first bad row;
// `what` names the argument in the message ("vectors", "queries").
void normalize_rows(const float* in, std::size_t n, std::size_t d, float* out, const char* what);

class VectorStore {
 public:
  VectorStore(std::size_t dim, Dtype dtype);

  std::size_t dim() const { return dim_; }
  Dtype dtype() const { return dtype_; }
  std::size_t size() const { return size_; }
  std::size_t row_bytes() const { return dim_ * bytes_per_value(dtype_); }

  void reserve(std::size_t n);
  void resize(std::size_t n);
  // Encodes the unit vector into row `slot` (< size()).
  void set(std::size_t slot, const float* unit);
  void append(const float* unit);
  // Decodes row `slot` into out[dim()].
  void decode(std::size_t slot, float* out) const;
  // Copies row `from` over row `to` (for swap-with-last removal).
  void move_row(std::size_t from, std::size_t to);

  const float* f32_row(std::size_t slot) const { return f32_.data() + slot * dim_; }
  const std::uint16_t* f16_row(std::size_t slot) const { return f16_.data() + slot * dim_; }
  const std::int8_t* i8_row(std::size_t slot) const { return i8_.data() + slot * dim_; }
  float scale(std::size_t slot) const { return scales_[slot]; }

  // Raw payload for the file format: the encoded rows, then (i8 only) the scales.
  const void* raw_rows() const;
  void* raw_rows_mut();
  const std::vector<float>& scales() const { return scales_; }
  std::vector<float>& scales_mut() { return scales_; }
  std::size_t memory_bytes() const;

 private:
  std::size_t dim_;
  Dtype dtype_;
  std::size_t size_ = 0;
  aligned_vector<float> f32_;
  aligned_vector<std::uint16_t> f16_;
  aligned_vector<std::int8_t> i8_;
  std::vector<float> scales_;  // i8 only
};

// A unit query encoded for one store. Holds a pointer to `unit` for f32/f16 (the
// caller keeps it alive); quantises it for i8.
class QueryCode {
 public:
  QueryCode(const VectorStore& store, const float* unit);
  // Encodes stored row `slot` as the query (for graph construction).
  QueryCode(const VectorStore& store, std::size_t slot, std::vector<float>& scratch);

  float score(std::size_t slot) const;
  // out[j] = score(slots[j]) for j < 4.
  void score4(const std::uint32_t* slots, float* out) const;
  // out[r - begin] = score(r) for r in [begin, end).
  void scan(std::size_t begin, std::size_t end, float* out, std::vector<std::int32_t>& scratch) const;
  // Hint the row into cache ahead of score().
  void prefetch(std::size_t slot) const {
    const char* p = rows_ + slot * row_bytes_;
    __builtin_prefetch(p);
    if (row_bytes_ > 64) __builtin_prefetch(p + 64);
  }

 private:
  const VectorStore& store_;
  const Kernels& k_;
  const float* f_ = nullptr;
  std::vector<std::int8_t> q8_;
  const std::int8_t* q8p_ = nullptr;
  float qscale_ = 1.0f;
  const char* rows_;
  std::size_t row_bytes_;
};

}  // namespace kira
