// The distance kernels: one table of function pointers per instruction set. Every
// kernel computes inner products (cosine similarity of unit vectors); callers never
// see which instruction set runs them (see dispatch.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kira {

struct Kernels {
  const char* level;  // "avx512" | "avx2" | "scalar"
  // <a, b> over d floats.
  float (*dot_f32)(const float* a, const float* b, std::size_t d);
  // <q, x> where x holds d IEEE half floats (bit patterns).
  float (*dot_f16)(const float* q, const std::uint16_t* x, std::size_t d);
  // Exact signed <a, b> over d int8 values in [-127, 127].
  std::int32_t (*dot_i8)(const std::int8_t* a, const std::int8_t* b, std::size_t d);
  // out[r] = <q, rows[r]> for r < n; rows are row-major n x d.
  void (*scan_f32)(const float* q, const float* rows, std::size_t n, std::size_t d, float* out);
  void (*scan_f16)(const float* q, const std::uint16_t* rows, std::size_t n, std::size_t d,
                   float* out);
  void (*scan_i8)(const std::int8_t* q, const std::int8_t* rows, std::size_t n, std::size_t d,
                  std::int32_t* out);
  // out[j * ld + r] = <queries[j], rows[r]> for j < m, r < n: several queries per pass
  // over the rows (register tiling), for batch search.
  void (*scan_f32_multi)(const float* queries, std::size_t m, const float* rows, std::size_t n,
                         std::size_t d, float* out, std::size_t ld);
  // out[j] = <q, x[j]> for four rows anywhere in memory (graph search scores neighbours
  // four at a time: one query load serves four rows, four loads are in flight).
  void (*dot4_f32)(const float* q, const float* const* x, std::size_t d, float* out);
  // out[i] = float(half[i]) for i < n.
  void (*f16_to_f32)(const std::uint16_t* half, float* out, std::size_t n);
};

namespace detail {
// Each returns null when this build has no kernels for that instruction set.
const Kernels& scalar_kernels();
const Kernels* avx2_kernels();
const Kernels* avx512_kernels();
const Kernels* avx512_vnni_kernels();  // avx512 with the VNNI int8 dot
}  // namespace detail

}  // namespace kira
