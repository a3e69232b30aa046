#include "kira/vector_store.hpp"

#include "kira/growth.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kira/dispatch.hpp"
#include "kira/half.hpp"

namespace kira {

const char* dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::f32: return "f32";
    case Dtype::f16: return "f16";
    case Dtype::i8: return "i8";
  }
  return "?";
}

Dtype parse_dtype(const std::string& name) {
  if (name == "f32") return Dtype::f32;
  if (name == "f16") return Dtype::f16;
  if (name == "i8") return Dtype::i8;
  throw std::invalid_argument("dtype must be \"f32\", \"f16\" or \"i8\", got \"" + name + "\"");
}

std::size_t bytes_per_value(Dtype dtype) {
  switch (dtype) {
    case Dtype::f32: return 4;
    case Dtype::f16: return 2;
    case Dtype::i8: return 1;
  }
  return 4;
}

void normalize_rows(const float* in, std::size_t n, std::size_t d, float* out, const char* what) {
  for (std::size_t r = 0; r < n; ++r) {
    const float* v = in + r * d;
    double ss = 0;
    for (std::size_t i = 0; i < d; ++i) {
      if (!std::isfinite(v[i])) {
        throw std::invalid_argument(std::string(what) + " row " + std::to_string(r) +
                                    " contains NaN or inf; drop or repair it before adding");
      }
      ss += static_cast<double>(v[i]) * v[i];
    }
    if (!(ss > 0) || !std::isfinite(ss)) {
      throw std::invalid_argument(std::string(what) + " row " + std::to_string(r) +
                                  " is all zeros; cosine similarity needs a non-zero vector");
    }
    const double inv = 1.0 / std::sqrt(ss);
    float* o = out + r * d;
    for (std::size_t i = 0; i < d; ++i) o[i] = static_cast<float>(v[i] * inv);
  }
}

VectorStore::VectorStore(std::size_t dim, Dtype dtype) : dim_(dim), dtype_(dtype) {
  if (dim == 0) throw std::invalid_argument("dim must be positive");
}

void VectorStore::reserve(std::size_t n) {
  switch (dtype_) {
    case Dtype::f32: reserve_growing(f32_, n * dim_); break;
    case Dtype::f16: reserve_growing(f16_, n * dim_); break;
    case Dtype::i8:
      reserve_growing(i8_, n * dim_);
      reserve_growing(scales_, n);
      break;
  }
}

void VectorStore::resize(std::size_t n) {
  switch (dtype_) {
    case Dtype::f32: f32_.resize(n * dim_); break;
    case Dtype::f16: f16_.resize(n * dim_); break;
    case Dtype::i8:
      i8_.resize(n * dim_);
      scales_.resize(n);
      break;
  }
  size_ = n;
}

void VectorStore::set(std::size_t slot, const float* unit) {
  switch (dtype_) {
    case Dtype::f32: std::memcpy(f32_.data() + slot * dim_, unit, dim_ * sizeof(float)); break;
    case Dtype::f16: {
      std::uint16_t* o = f16_.data() + slot * dim_;
      for (std::size_t i = 0; i < dim_; ++i) o[i] = float_to_half(unit[i]);
      break;
    }
    case Dtype::i8: {
      float amax = 0;
      for (std::size_t i = 0; i < dim_; ++i) amax = std::max(amax, std::fabs(unit[i]));
      const float scale = amax > 0 ? amax / 127.0f : 1.0f;
      const float inv = 1.0f / scale;
      std::int8_t* o = i8_.data() + slot * dim_;
      for (std::size_t i = 0; i < dim_; ++i) {
        const float q = std::nearbyint(unit[i] * inv);
        o[i] = static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f));
      }
      scales_[slot] = scale;
      break;
    }
  }
}

void VectorStore::append(const float* unit) {
  resize(size_ + 1);
  set(size_ - 1, unit);
}

void VectorStore::decode(std::size_t slot, float* out) const {
  switch (dtype_) {
    case Dtype::f32: std::memcpy(out, f32_row(slot), dim_ * sizeof(float)); break;
    case Dtype::f16: {
      const std::uint16_t* x = f16_row(slot);
      for (std::size_t i = 0; i < dim_; ++i) out[i] = half_to_float(x[i]);
      break;
    }
    case Dtype::i8: {
      const std::int8_t* x = i8_row(slot);
      const float s = scales_[slot];
      for (std::size_t i = 0; i < dim_; ++i) out[i] = s * x[i];
      break;
    }
  }
}

void VectorStore::move_row(std::size_t from, std::size_t to) {
  if (from == to) return;
  switch (dtype_) {
    case Dtype::f32: std::memcpy(f32_.data() + to * dim_, f32_row(from), dim_ * sizeof(float)); break;
    case Dtype::f16: std::memcpy(f16_.data() + to * dim_, f16_row(from), dim_ * 2); break;
    case Dtype::i8:
      std::memcpy(i8_.data() + to * dim_, i8_row(from), dim_);
      scales_[to] = scales_[from];
      break;
  }
}

const void* VectorStore::raw_rows() const {
  switch (dtype_) {
    case Dtype::f32: return f32_.data();
    case Dtype::f16: return f16_.data();
    case Dtype::i8: return i8_.data();
  }
  return nullptr;
}

void* VectorStore::raw_rows_mut() { return const_cast<void*>(raw_rows()); }

std::size_t VectorStore::memory_bytes() const {
  return f32_.capacity() * 4 + f16_.capacity() * 2 + i8_.capacity() + scales_.capacity() * 4;
}

QueryCode::QueryCode(const VectorStore& store, const float* unit)
    : store_(store), k_(kernels()), f_(unit), rows_(static_cast<const char*>(store.raw_rows())),
      row_bytes_(store.row_bytes()) {
  if (store.dtype() == Dtype::i8) {
    const std::size_t d = store.dim();
    float amax = 0;
    for (std::size_t i = 0; i < d; ++i) amax = std::max(amax, std::fabs(unit[i]));
    qscale_ = amax > 0 ? amax / 127.0f : 1.0f;
    const float inv = 1.0f / qscale_;
    q8_.resize(d);
    for (std::size_t i = 0; i < d; ++i)
      q8_[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(unit[i] * inv), -127.0f, 127.0f));
    q8p_ = q8_.data();
  }
}

QueryCode::QueryCode(const VectorStore& store, std::size_t slot, std::vector<float>& scratch)
    : store_(store), k_(kernels()), rows_(static_cast<const char*>(store.raw_rows())), row_bytes_(store.row_bytes()) {
  switch (store.dtype()) {
    case Dtype::f32: f_ = store.f32_row(slot); break;
    case Dtype::f16:
      scratch.resize(store.dim());
      store.decode(slot, scratch.data());
      f_ = scratch.data();
      break;
    case Dtype::i8:
      q8p_ = store.i8_row(slot);
      qscale_ = store.scale(slot);
      break;
  }
}

float QueryCode::score(std::size_t slot) const {
  const std::size_t d = store_.dim();
  switch (store_.dtype()) {
    case Dtype::f32: return k_.dot_f32(f_, store_.f32_row(slot), d);
    case Dtype::f16: return k_.dot_f16(f_, store_.f16_row(slot), d);
    case Dtype::i8:
      return static_cast<float>(k_.dot_i8(q8p_, store_.i8_row(slot), d)) * (qscale_ * store_.scale(slot));
  }
  return 0;
}

void QueryCode::score4(const std::uint32_t* slots, float* out) const {
  if (store_.dtype() == Dtype::f32) {
    const float* rows[4] = {store_.f32_row(slots[0]), store_.f32_row(slots[1]), store_.f32_row(slots[2]),
                            store_.f32_row(slots[3])};
    k_.dot4_f32(f_, rows, store_.dim(), out);
    return;
  }
  for (int j = 0; j < 4; ++j) out[j] = score(slots[j]);
}

void QueryCode::scan(std::size_t begin, std::size_t end, float* out, std::vector<std::int32_t>& scratch) const {
  const std::size_t d = store_.dim();
  const std::size_t n = end - begin;
  switch (store_.dtype()) {
    case Dtype::f32: k_.scan_f32(f_, store_.f32_row(begin), n, d, out); break;
    case Dtype::f16: k_.scan_f16(f_, store_.f16_row(begin), n, d, out); break;
    case Dtype::i8: {
      scratch.resize(n);
      k_.scan_i8(q8p_, store_.i8_row(begin), n, d, scratch.data());
      const float* s = store_.scales().data() + begin;
      for (std::size_t r = 0; r < n; ++r) out[r] = static_cast<float>(scratch[r]) * (qscale_ * s[r]);
      break;
    }
  }
}

}  // namespace kira
