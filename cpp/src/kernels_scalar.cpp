// Portable kernels: the reference every SIMD kernel is tested against, and the fallback
// on CPUs without AVX2.
#include "kira/distance.hpp"
#include "kira/half.hpp"

namespace kira::detail {
namespace {

float dot_f32(const float* a, const float* b, std::size_t d) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::size_t i = 0;
  for (; i + 4 <= d; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < d; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

float dot_f16(const float* q, const std::uint16_t* x, std::size_t d) {
  float s = 0;
  for (std::size_t i = 0; i < d; ++i) s += q[i] * half_to_float(x[i]);
  return s;
}

std::int32_t dot_i8(const std::int8_t* a, const std::int8_t* b, std::size_t d) {
  std::int32_t s = 0;
  for (std::size_t i = 0; i < d; ++i) s += static_cast<std::int32_t>(a[i]) * b[i];
  return s;
}

void scan_f32(const float* q, const float* rows, std::size_t n, std::size_t d, float* out) {
  for (std::size_t r = 0; r < n; ++r) out[r] = dot_f32(q, rows + r * d, d);
}

void scan_f16(const float* q, const std::uint16_t* rows, std::size_t n, std::size_t d, float* out) {
  for (std::size_t r = 0; r < n; ++r) out[r] = dot_f16(q, rows + r * d, d);
}

void scan_i8(const std::int8_t* q, const std::int8_t* rows, std::size_t n, std::size_t d,
             std::int32_t* out) {
  for (std::size_t r = 0; r < n; ++r) out[r] = dot_i8(q, rows + r * d, d);
}

void scan_f32_multi(const float* queries, std::size_t m, const float* rows, std::size_t n,
                    std::size_t d, float* out, std::size_t ld) {
  for (std::size_t j = 0; j < m; ++j) scan_f32(queries + j * d, rows, n, d, out + j * ld);
}

void dot4_f32(const float* q, const float* const* x, std::size_t d, float* out) {
  for (int j = 0; j < 4; ++j) out[j] = dot_f32(q, x[j], d);
}

void f16_to_f32(const std::uint16_t* h, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = half_to_float(h[i]);
}

const Kernels table{"scalar", dot_f32, dot_f16, dot_i8, scan_f32, scan_f16, scan_i8, scan_f32_multi, dot4_f32, f16_to_f32};

}  // namespace

const Kernels& scalar_kernels() { return table; }

}  // namespace kira::detail
