// 2-D FFTs of a small square image as numpy.fft computes them over axes (1, 2) of a float32
// batch: the saliency map takes the log of spectral amplitudes that are zero in exact
// arithmetic, so its result depends on the transform's rounding, not only on its value.
// numpy (2.x) runs fft2 of float32 input as two 1-D passes in double, each rounded to
// complex64 (last axis first), and ifft2 of complex64 in float32 arithmetic (pocketfft's
// radix-2/4 passes, scaled by float32(1/n)). SmallFFT reproduces both.
#pragma once

#include <cstddef>
#include <vector>

namespace kira {

struct Complex32 {
  float r, i;
};
struct Complex64 {
  double r, i;
};

// A plan for n x n images, n >= 1. Power-of-two n run radix-2/4 passes in pocketfft's factor
// order; any other n a direct DFT in double (exact to double precision, so the forward
// transform still rounds as numpy's does; the inverse may differ in the last bit).
// Thread safety: immutable after construction; the transforms may run in several threads.
class SmallFFT {
 public:
  explicit SmallFFT(std::size_t n);
  std::size_t size() const { return n_; }
  // numpy.fft.fft2 of a real n x n row-major image: spectrum gets n * n values.
  void forward_2d(const float* image, Complex32* spectrum) const;
  // numpy.fft.ifft2 of an n x n complex64 image, in place.
  void backward_2d(Complex32* image) const;

 private:
  struct Pass {
    std::size_t radix, l1, ido;
    std::size_t twiddle_offset;  // into twiddles32_ / twiddles64_: (radix - 1) * (ido - 1) values
  };
  std::size_t n_;
  bool radix_2_4_ = false;
  std::vector<Pass> passes_;
  std::vector<Complex32> twiddles32_;
  std::vector<Complex64> twiddles64_;
  std::vector<double> cos_, sin_;  // direct DFT: cos / sin of 2 pi k / n, k < n

  void forward_line(Complex64* line, Complex64* scratch) const;
  void backward_line(Complex32* line, Complex32* scratch) const;
};

}  // namespace kira
