// 2-D FFTs of a small square image as numpy.fft computes them over axes (1, 2) of a float32
// batch. The saliency map takes the log of spectral amplitudes, some of which are zero in
// exact arithmetic, so its result depends on the forward transform's rounding, not only on
// its value: numpy (2.x) runs fft2 of float32 input as two 1-D passes in double, each
// rounded to complex64 (last axis first), and forward_2d reproduces that bit for bit for
// power-of-two sizes (tests/models/test_models_pixel_core.py has a CT slice where another
// rounding moves the descriptor by 3e-4). The inverse's rounding does not matter that way:
// backward_2d runs float32 radix-2/4 passes scaled by float32(1/n), as numpy's ifft2 of
// complex64 does, and agrees with it to ~2e-7.
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
// order; any other n a direct DFT in double (numpy's forward result then differs by up to
// ~1e-6 of the spectrum's scale, which the parity tests at size 48 stay well within).
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
  // The radix passes from line through scratch; returns whichever holds the result.
  template <class C>
  C* run_passes(C* line, C* scratch, const std::vector<C>& twiddles, bool backward) const;
  // exp(-+2 pi i j k / n) sums in double (sign -1 forward, +1 backward).
  template <class C>
  Complex64 direct_term(const C* line, std::size_t k, double sign) const;
};

}  // namespace kira
