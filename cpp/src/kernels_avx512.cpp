// AVX-512 (F, BW, DQ, VL) kernels with F16C half conversion; the int8 dot has a second
// variant using VNNI (vpdpbusd), compiled with a function-level target attribute and
// selected only when the CPU reports avx512vnni. CMake gives this file alone its flags.
#include "kira/distance.hpp"

#if defined(KIRA_X86)
#include <immintrin.h>

#include <memory>
#include <vector>

namespace kira::detail {
namespace {

inline __mmask16 mask16(std::size_t r) { return static_cast<__mmask16>((1u << r) - 1u); }

inline float dot_f32_inline(const float* a, const float* b, std::size_t d) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  std::size_t i = 0;
  for (; i + 64 <= d; i += 64) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
    s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
  }
  for (; i + 16 <= d; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
  if (i < d) {
    const __mmask16 m = mask16(d - i);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

inline __m512 load_half(const std::uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline float dot_f16_inline(const float* q, const std::uint16_t* x, std::size_t d) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  std::size_t i = 0;
  for (; i + 32 <= d; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), load_half(x + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 16), load_half(x + i + 16), s1);
  }
  for (; i + 16 <= d; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), load_half(x + i), s0);
  if (i < d) {
    const __mmask16 m = mask16(d - i);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i),
                         _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)), s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

// Without VNNI: widen to int16 and multiply-add pairs into int32.
inline std::int32_t dot_i8_inline(const std::int8_t* a, const std::int8_t* b, std::size_t d) {
  __m512i acc = _mm512_setzero_si512();
  std::size_t i = 0;
  for (; i + 32 <= d; i += 32) {
    const __m512i va = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i)));
    const __m512i vb = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(va, vb));
  }
  if (i < d) {
    const __mmask32 m = static_cast<__mmask32>((std::uint64_t{1} << (d - i)) - 1u);
    const __m512i va = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, a + i));
    const __m512i vb = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, b + i));
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(va, vb));
  }
  return _mm512_reduce_add_epi32(acc);
}

// VNNI: vpdpbusd multiplies unsigned by signed bytes, so feed |a| and b with a's sign
// (values are in [-127, 127], so neither step overflows).
__attribute__((target("avx512vnni"))) inline std::int32_t dot_i8_vnni_inline(
    const std::int8_t* a, const std::int8_t* b, std::size_t d) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i acc0 = zero, acc1 = zero;
  std::size_t i = 0;
  for (; i + 128 <= d; i += 128) {
    const __m512i va0 = _mm512_loadu_si512(a + i), vb0 = _mm512_loadu_si512(b + i);
    const __m512i va1 = _mm512_loadu_si512(a + i + 64), vb1 = _mm512_loadu_si512(b + i + 64);
    acc0 = _mm512_dpbusd_epi32(acc0, _mm512_abs_epi8(va0),
                               _mm512_mask_sub_epi8(vb0, _mm512_movepi8_mask(va0), zero, vb0));
    acc1 = _mm512_dpbusd_epi32(acc1, _mm512_abs_epi8(va1),
                               _mm512_mask_sub_epi8(vb1, _mm512_movepi8_mask(va1), zero, vb1));
  }
  for (; i + 64 <= d; i += 64) {
    const __m512i va = _mm512_loadu_si512(a + i), vb = _mm512_loadu_si512(b + i);
    acc0 = _mm512_dpbusd_epi32(acc0, _mm512_abs_epi8(va),
                               _mm512_mask_sub_epi8(vb, _mm512_movepi8_mask(va), zero, vb));
  }
  if (i < d) {  // masked loads only for the tail: they are slow on some cores (Zen 4)
    const __mmask64 m = (__mmask64{1} << (d - i)) - 1u;
    const __m512i va = _mm512_maskz_loadu_epi8(m, a + i), vb = _mm512_maskz_loadu_epi8(m, b + i);
    acc0 = _mm512_dpbusd_epi32(acc0, _mm512_abs_epi8(va),
                               _mm512_mask_sub_epi8(vb, _mm512_movepi8_mask(va), zero, vb));
  }
  return _mm512_reduce_add_epi32(_mm512_add_epi32(acc0, acc1));
}

float dot_f32(const float* a, const float* b, std::size_t d) { return dot_f32_inline(a, b, d); }
float dot_f16(const float* q, const std::uint16_t* x, std::size_t d) { return dot_f16_inline(q, x, d); }
std::int32_t dot_i8(const std::int8_t* a, const std::int8_t* b, std::size_t d) {
  return dot_i8_inline(a, b, d);
}
__attribute__((target("avx512vnni"))) std::int32_t dot_i8_vnni(const std::int8_t* a,
                                                                const std::int8_t* b, std::size_t d) {
  return dot_i8_vnni_inline(a, b, d);
}

// One row after the other, front to back. Scoring four rows per pass (sharing each query
// load) was 25-30% faster while the rows sat in cache, but it reads four streams 4*d bytes
// apart: at d = 256 each pass is one 4 KiB page, and the L2 stream prefetcher, which stops
// at page boundaries, never got ahead of four short interleaved streams. On an AMD EPYC
// (Zen 4) a 100k x 256 scan that no longer fits L3 read 10 GB/s that way and 27 GB/s
// row by row (faiss's speed); see the size sweep of benchmarks/peers/compare_indexes.py.
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
// The query side is prepared once per scan: |q| as the unsigned operand and q's sign as a
// mask that negates the matching row bytes; two rows share each query load.
__attribute__((target("avx512vnni"))) void scan_i8_vnni(const std::int8_t* q, const std::int8_t* rows,
                                                        std::size_t n, std::size_t d, std::int32_t* out) {
  const std::size_t chunks = (d + 63) / 64, full = d / 64;
  constexpr std::size_t kStack = 64;  // d <= 4096 on the stack
  __m512i abs_stack[kStack];
  __mmask64 neg_stack[kStack], load_stack[kStack];
  std::unique_ptr<__m512i[]> abs_heap;  // C++17 aligned new for the 64-byte type
  std::vector<__mmask64> neg_heap, load_heap;
  __m512i* absq = abs_stack;
  __mmask64* neg = neg_stack;
  __mmask64* load = load_stack;
  if (chunks > kStack) {
    abs_heap.reset(new __m512i[chunks]);
    neg_heap.resize(chunks);
    load_heap.resize(chunks);
    absq = abs_heap.get();
    neg = neg_heap.data();
    load = load_heap.data();
  }
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t left = d - c * 64;
    load[c] = left >= 64 ? ~__mmask64{0} : ((__mmask64{1} << left) - 1u);
    const __m512i v = _mm512_maskz_loadu_epi8(load[c], q + c * 64);
    absq[c] = _mm512_abs_epi8(v);
    neg[c] = _mm512_movepi8_mask(v);
  }
  const __m512i zero = _mm512_setzero_si512();
  std::size_t r = 0;
  for (; r + 2 <= n; r += 2) {
    const std::int8_t* x0 = rows + r * d;
    const std::int8_t* x1 = x0 + d;
    __m512i a0 = zero, a1 = zero;
    std::size_t c = 0;
    for (; c < full; ++c) {  // unmasked loads: masked ones are slow on some cores (Zen 4)
      const __m512i v0 = _mm512_loadu_si512(x0 + c * 64);
      const __m512i v1 = _mm512_loadu_si512(x1 + c * 64);
      a0 = _mm512_dpbusd_epi32(a0, absq[c], _mm512_mask_sub_epi8(v0, neg[c], zero, v0));
      a1 = _mm512_dpbusd_epi32(a1, absq[c], _mm512_mask_sub_epi8(v1, neg[c], zero, v1));
    }
    if (c < chunks) {
      const __m512i v0 = _mm512_maskz_loadu_epi8(load[c], x0 + c * 64);
      const __m512i v1 = _mm512_maskz_loadu_epi8(load[c], x1 + c * 64);
      a0 = _mm512_dpbusd_epi32(a0, absq[c], _mm512_mask_sub_epi8(v0, neg[c], zero, v0));
      a1 = _mm512_dpbusd_epi32(a1, absq[c], _mm512_mask_sub_epi8(v1, neg[c], zero, v1));
    }
    out[r] = _mm512_reduce_add_epi32(a0);
    out[r + 1] = _mm512_reduce_add_epi32(a1);
  }
  for (; r < n; ++r) out[r] = dot_i8_vnni_inline(q, rows + r * d, d);
}

// 4 queries x 4 rows per register tile: 16 accumulators, 8 loads per 16 FMAs.
void scan_f32_multi(const float* Q, std::size_t m, const float* X, std::size_t n, std::size_t d,
                    float* out, std::size_t ld) {
  const std::size_t d16 = d & ~std::size_t{15};
  const __mmask16 tail = mask16(d - d16);
  std::size_t j = 0;
  for (; j + 4 <= m; j += 4) {
    const float* q0 = Q + j * d;
    const float* q1 = q0 + d;
    const float* q2 = q1 + d;
    const float* q3 = q2 + d;
    std::size_t r = 0;
    for (; r + 4 <= n; r += 4) {
      const float* x0 = X + r * d;
      const float* x1 = x0 + d;
      const float* x2 = x1 + d;
      const float* x3 = x2 + d;
      __m512 acc[16];
      for (auto& a : acc) a = _mm512_setzero_ps();
      auto step = [&](__m512 v0, __m512 v1, __m512 v2, __m512 v3, __m512 w0, __m512 w1, __m512 w2,
                      __m512 w3) {
        acc[0] = _mm512_fmadd_ps(w0, v0, acc[0]);
        acc[1] = _mm512_fmadd_ps(w0, v1, acc[1]);
        acc[2] = _mm512_fmadd_ps(w0, v2, acc[2]);
        acc[3] = _mm512_fmadd_ps(w0, v3, acc[3]);
        acc[4] = _mm512_fmadd_ps(w1, v0, acc[4]);
        acc[5] = _mm512_fmadd_ps(w1, v1, acc[5]);
        acc[6] = _mm512_fmadd_ps(w1, v2, acc[6]);
        acc[7] = _mm512_fmadd_ps(w1, v3, acc[7]);
        acc[8] = _mm512_fmadd_ps(w2, v0, acc[8]);
        acc[9] = _mm512_fmadd_ps(w2, v1, acc[9]);
        acc[10] = _mm512_fmadd_ps(w2, v2, acc[10]);
        acc[11] = _mm512_fmadd_ps(w2, v3, acc[11]);
        acc[12] = _mm512_fmadd_ps(w3, v0, acc[12]);
        acc[13] = _mm512_fmadd_ps(w3, v1, acc[13]);
        acc[14] = _mm512_fmadd_ps(w3, v2, acc[14]);
        acc[15] = _mm512_fmadd_ps(w3, v3, acc[15]);
      };
      for (std::size_t i = 0; i < d16; i += 16) {
        step(_mm512_loadu_ps(x0 + i), _mm512_loadu_ps(x1 + i), _mm512_loadu_ps(x2 + i),
             _mm512_loadu_ps(x3 + i), _mm512_loadu_ps(q0 + i), _mm512_loadu_ps(q1 + i),
             _mm512_loadu_ps(q2 + i), _mm512_loadu_ps(q3 + i));
      }
      if (tail) {
        const std::size_t i = d16;
        step(_mm512_maskz_loadu_ps(tail, x0 + i), _mm512_maskz_loadu_ps(tail, x1 + i),
             _mm512_maskz_loadu_ps(tail, x2 + i), _mm512_maskz_loadu_ps(tail, x3 + i),
             _mm512_maskz_loadu_ps(tail, q0 + i), _mm512_maskz_loadu_ps(tail, q1 + i),
             _mm512_maskz_loadu_ps(tail, q2 + i), _mm512_maskz_loadu_ps(tail, q3 + i));
      }
      for (std::size_t a = 0; a < 4; ++a)
        for (std::size_t b = 0; b < 4; ++b) out[(j + a) * ld + r + b] = _mm512_reduce_add_ps(acc[a * 4 + b]);
    }
    for (; r < n; ++r)
      for (std::size_t a = 0; a < 4; ++a) out[(j + a) * ld + r] = dot_f32_inline(Q + (j + a) * d, X + r * d, d);
  }
  for (; j < m; ++j) scan_f32(Q + j * d, X, n, d, out + j * ld);
}

void dot4_f32(const float* q, const float* const* x, std::size_t d, float* out) {
  const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16) {
    const __m512 qv = _mm512_loadu_ps(q + i);
    a0 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(x0 + i), a0);
    a1 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(x1 + i), a1);
    a2 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(x2 + i), a2);
    a3 = _mm512_fmadd_ps(qv, _mm512_loadu_ps(x3 + i), a3);
  }
  if (i < d) {
    const __mmask16 m = mask16(d - i);
    const __m512 qv = _mm512_maskz_loadu_ps(m, q + i);
    a0 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, x0 + i), a0);
    a1 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, x1 + i), a1);
    a2 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, x2 + i), a2);
    a3 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, x3 + i), a3);
  }
  out[0] = _mm512_reduce_add_ps(a0);
  out[1] = _mm512_reduce_add_ps(a1);
  out[2] = _mm512_reduce_add_ps(a2);
  out[3] = _mm512_reduce_add_ps(a3);
}

void f16_to_f32(const std::uint16_t* h, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, load_half(h + i));
  if (i < n) {
    const __mmask16 m = mask16(n - i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, h + i)));
  }
}

const Kernels table{"avx512", dot_f32,  dot_f16,        dot_i8,   scan_f32,
                    scan_f16, scan_i8, scan_f32_multi, dot4_f32, f16_to_f32};
const Kernels vnni_table{"avx512", dot_f32,      dot_f16,        dot_i8_vnni, scan_f32,
                         scan_f16, scan_i8_vnni, scan_f32_multi, dot4_f32,    f16_to_f32};

}  // namespace

const Kernels* avx512_kernels() { return &table; }
const Kernels* avx512_vnni_kernels() { return &vnni_table; }

}  // namespace kira::detail

#else
namespace kira::detail {
const Kernels* avx512_kernels() { return nullptr; }
const Kernels* avx512_vnni_kernels() { return nullptr; }
}  // namespace kira::detail
#endif
