// AVX2 + FMA + F16C kernels. CMake compiles this file alone with -mavx2 -mfma -mf16c;
// dispatch.cpp calls into it only after checking the CPU supports all three.
#include "kira/distance.hpp"

#if defined(KIRA_X86)
#include <immintrin.h>

#include "kira/half.hpp"

namespace kira::detail {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline std::int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline float dot_f32_inline(const float* a, const float* b, std::size_t d) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  std::size_t i = 0;
  for (; i + 32 <= d; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= d; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < d; ++i) s += a[i] * b[i];
  return s;
}

inline float dot_f16_inline(const float* q, const std::uint16_t* x, std::size_t d) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i),
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8),
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8))), s1);
  }
  for (; i + 8 <= d; i += 8)
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i),
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))), s0);
  float s = hsum(_mm256_add_ps(s0, s1));
  for (; i < d; ++i) s += q[i] * half_to_float(x[i]);
  return s;
}

// Signed int8 dot via |a| (unsigned) x sign(b, a) (signed): maddubs gives int16 pairs
// (at most 2 * 127 * 127, no saturation), madd with ones widens to int32.
inline std::int32_t dot_i8_inline(const std::int8_t* a, const std::int8_t* b, std::size_t d) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 32 <= d; i += 32) {
    const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(va), _mm256_sign_epi8(vb, va));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p16, ones));
  }
  std::int32_t s = hsum_epi32(acc);
  for (; i < d; ++i) s += static_cast<std::int32_t>(a[i]) * b[i];
  return s;
}

float dot_f32(const float* a, const float* b, std::size_t d) { return dot_f32_inline(a, b, d); }
float dot_f16(const float* q, const std::uint16_t* x, std::size_t d) { return dot_f16_inline(q, x, d); }
std::int32_t dot_i8(const std::int8_t* a, const std::int8_t* b, std::size_t d) {
  return dot_i8_inline(a, b, d);
}

void scan_f32(const float* q, const float* rows, std::size_t n, std::size_t d, float* out) {
  for (std::size_t r = 0; r < n; ++r) out[r] = dot_f32_inline(q, rows + r * d, d);
}
void scan_f16(const float* q, const std::uint16_t* rows, std::size_t n, std::size_t d, float* out) {
  for (std::size_t r = 0; r < n; ++r) out[r] = dot_f16_inline(q, rows + r * d, d);
}
void scan_i8(const std::int8_t* q, const std::int8_t* rows, std::size_t n, std::size_t d,
             std::int32_t* out) {
  for (std::size_t r = 0; r < n; ++r) out[r] = dot_i8_inline(q, rows + r * d, d);
}

// 4 queries x 2 rows per register tile (8 accumulators of 16 ymm registers).
void scan_f32_multi(const float* Q, std::size_t m, const float* X, std::size_t n, std::size_t d,
                    float* out, std::size_t ld) {
  const std::size_t d8 = d & ~std::size_t{7};
  std::size_t j = 0;
  for (; j + 4 <= m; j += 4) {
    const float* q0 = Q + j * d;
    const float* q1 = q0 + d;
    const float* q2 = q1 + d;
    const float* q3 = q2 + d;
    std::size_t r = 0;
    for (; r + 2 <= n; r += 2) {
      const float* x0 = X + r * d;
      const float* x1 = x0 + d;
      __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
             a30 = a00, a31 = a00;
      for (std::size_t i = 0; i < d8; i += 8) {
        const __m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i);
        __m256 q = _mm256_loadu_ps(q0 + i);
        a00 = _mm256_fmadd_ps(q, v0, a00);
        a01 = _mm256_fmadd_ps(q, v1, a01);
        q = _mm256_loadu_ps(q1 + i);
        a10 = _mm256_fmadd_ps(q, v0, a10);
        a11 = _mm256_fmadd_ps(q, v1, a11);
        q = _mm256_loadu_ps(q2 + i);
        a20 = _mm256_fmadd_ps(q, v0, a20);
        a21 = _mm256_fmadd_ps(q, v1, a21);
        q = _mm256_loadu_ps(q3 + i);
        a30 = _mm256_fmadd_ps(q, v0, a30);
        a31 = _mm256_fmadd_ps(q, v1, a31);
      }
      float s[8] = {hsum(a00), hsum(a01), hsum(a10), hsum(a11), hsum(a20), hsum(a21), hsum(a30), hsum(a31)};
      for (std::size_t i = d8; i < d; ++i) {
        s[0] += q0[i] * x0[i]; s[1] += q0[i] * x1[i];
        s[2] += q1[i] * x0[i]; s[3] += q1[i] * x1[i];
        s[4] += q2[i] * x0[i]; s[5] += q2[i] * x1[i];
        s[6] += q3[i] * x0[i]; s[7] += q3[i] * x1[i];
      }
      for (std::size_t a = 0; a < 4; ++a) {
        out[(j + a) * ld + r] = s[2 * a];
        out[(j + a) * ld + r + 1] = s[2 * a + 1];
      }
    }
    for (; r < n; ++r)
      for (std::size_t a = 0; a < 4; ++a) out[(j + a) * ld + r] = dot_f32_inline(Q + (j + a) * d, X + r * d, d);
  }
  for (; j < m; ++j) scan_f32(Q + j * d, X, n, d, out + j * ld);
}

void dot4_f32(const float* q, const float* const* x, std::size_t d, float* out) {
  const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 8 <= d; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(x0 + i), a0);
    a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(x1 + i), a1);
    a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(x2 + i), a2);
    a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(x3 + i), a3);
  }
  float s[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
  for (; i < d; ++i) {
    s[0] += q[i] * x0[i];
    s[1] += q[i] * x1[i];
    s[2] += q[i] * x2[i];
    s[3] += q[i] * x3[i];
  }
  for (int j = 0; j < 4; ++j) out[j] = s[j];
}

void f16_to_f32(const std::uint16_t* h, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) out[i] = half_to_float(h[i]);
}

const Kernels table{"avx2", dot_f32, dot_f16, dot_i8, scan_f32, scan_f16, scan_i8, scan_f32_multi, dot4_f32, f16_to_f32};

}  // namespace

const Kernels* avx2_kernels() { return &table; }

}  // namespace kira::detail

#else
namespace kira::detail {
const Kernels* avx2_kernels() { return nullptr; }
}  // namespace kira::detail
#endif
