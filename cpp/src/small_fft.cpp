// Mixed radix-2/4 passes (FFTPACK's layout, in the factor order pocketfft uses in numpy.fft)
// and a direct DFT for other lengths. See small_fft.hpp for why the rounding of each step
// matters; keep the order of every addition and product in the float32 (inverse) path.
#include "kira/small_fft.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

namespace kira {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

template <class C>
inline C add(C a, C b) { return {a.r + b.r, a.i + b.i}; }
template <class C>
inline C sub(C a, C b) { return {a.r - b.r, a.i - b.i}; }

// a * w (backward) or a * conj(w) (forward).
template <class C>
inline C twiddle_mul(C a, C w, bool backward) {
  return backward ? C{a.r * w.r - a.i * w.i, a.r * w.i + a.i * w.r}
                  : C{a.r * w.r + a.i * w.i, a.i * w.r - a.r * w.i};
}

bool is_power_of_two(std::size_t n) { return n > 0 && (n & (n - 1)) == 0; }

// (cos, sin) of 2 pi m / n for a power of two n >= 4, from the first octant by exact
// symmetries, so that quarter turns give exact zeros and ones.
Complex64 unit_root(std::size_t m, std::size_t n) {
  const std::size_t quarter = n / 4;
  m %= n;
  const std::size_t quadrant = m / quarter, r = m % quarter;
  double c, s;
  if (2 * r <= quarter) {
    c = std::cos(kTwoPi * static_cast<double>(r) / static_cast<double>(n));
    s = std::sin(kTwoPi * static_cast<double>(r) / static_cast<double>(n));
    if (2 * r == quarter) c = s = 0.707106781186547524400844362104849;
  } else {
    const double a = kTwoPi * static_cast<double>(quarter - r) / static_cast<double>(n);
    c = std::sin(a);
    s = std::cos(a);
  }
  switch (quadrant) {
    case 1: std::swap(c, s); c = -c; break;
    case 2: c = -c; s = -s; break;
    case 3: std::swap(c, s); s = -s; break;
    default: break;
  }
  return {c, s};
}

template <class C>
void radix2(std::size_t ido, std::size_t l1, const C* in, C* out, const C* tw, bool backward) {
  for (std::size_t k = 0; k < l1; ++k) {
    for (std::size_t i = 0; i < ido; ++i) {
      const C a = in[i + ido * (2 * k)], b = in[i + ido * (1 + 2 * k)];
      out[i + ido * k] = add(a, b);
      const C d = sub(a, b);
      out[i + ido * (k + l1)] = i == 0 ? d : twiddle_mul(d, tw[i - 1], backward);
    }
  }
}

template <class C>
void radix4(std::size_t ido, std::size_t l1, const C* in, C* out, const C* tw, bool backward) {
  for (std::size_t k = 0; k < l1; ++k) {
    for (std::size_t i = 0; i < ido; ++i) {
      const C* x = in + i + ido * (4 * k);
      const C sum02 = add(x[0], x[2 * ido]), dif02 = sub(x[0], x[2 * ido]);
      const C sum13 = add(x[ido], x[3 * ido]);
      C dif13 = sub(x[ido], x[3 * ido]);
      dif13 = backward ? C{-dif13.i, dif13.r} : C{dif13.i, -dif13.r};  // * +-i
      C y[4] = {add(sum02, sum13), add(dif02, dif13), sub(sum02, sum13),
                        sub(dif02, dif13)};
      if (i != 0) {
        for (std::size_t j = 1; j < 4; ++j) {
          y[j] = twiddle_mul(y[j], tw[(i - 1) + (j - 1) * (ido - 1)], backward);
        }
      }
      for (std::size_t j = 0; j < 4; ++j) out[i + ido * (k + l1 * j)] = y[j];
    }
  }
}

}  // namespace

SmallFFT::SmallFFT(std::size_t n) : n_(n) {
  if (n == 0) throw std::invalid_argument("FFT length must be >= 1");
  radix_2_4_ = is_power_of_two(n) && n >= 2;
  if (!radix_2_4_) {
    cos_.resize(n);
    sin_.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      cos_[k] = std::cos(kTwoPi * static_cast<double>(k) / static_cast<double>(n));
      sin_[k] = std::sin(kTwoPi * static_cast<double>(k) / static_cast<double>(n));
    }
    return;
  }
  // pocketfft's factor order: fours, and a remaining two moved to the front.
  std::vector<std::size_t> radices;
  std::size_t rest = n;
  while (rest % 4 == 0) {
    radices.push_back(4);
    rest /= 4;
  }
  if (rest == 2) {
    radices.push_back(2);
    std::swap(radices.front(), radices.back());
  }
  std::size_t l1 = 1;
  for (std::size_t radix : radices) {
    Pass pass{radix, l1, n / (l1 * radix), twiddles64_.size()};
    for (std::size_t j = 1; j < radix; ++j) {
      for (std::size_t i = 1; i < pass.ido; ++i) {
        const Complex64 w = unit_root(j * l1 * i, n);
        twiddles64_.push_back(w);
        twiddles32_.push_back({static_cast<float>(w.r), static_cast<float>(w.i)});
      }
    }
    passes_.push_back(pass);
    l1 *= radix;
  }
}

template <class C>
C* SmallFFT::run_passes(C* line, C* scratch, const std::vector<C>& twiddles, bool backward) const {
  C *from = line, *to = scratch;
  for (const Pass& pass : passes_) {
    const C* tw = twiddles.data() + pass.twiddle_offset;
    if (pass.radix == 4) {
      radix4(pass.ido, pass.l1, from, to, tw, backward);
    } else {
      radix2(pass.ido, pass.l1, from, to, tw, backward);
    }
    std::swap(from, to);
  }
  return from;
}

template <class C>
Complex64 SmallFFT::direct_term(const C* line, std::size_t k, double sign) const {
  double re = 0.0, im = 0.0;
  for (std::size_t j = 0; j < n_; ++j) {
    const std::size_t m = (j * k) % n_;
    const double c = cos_[m], s = sign * sin_[m];
    re += line[j].r * c - line[j].i * s;
    im += line[j].i * c + line[j].r * s;
  }
  return {re, im};
}

void SmallFFT::forward_line(Complex64* line, Complex64* scratch) const {
  if (n_ == 1) return;
  if (!radix_2_4_) {
    for (std::size_t k = 0; k < n_; ++k) scratch[k] = direct_term(line, k, -1.0);
    std::copy(scratch, scratch + n_, line);
    return;
  }
  const Complex64* result = run_passes(line, scratch, twiddles64_, false);
  if (result != line) std::copy(result, result + n_, line);
}

void SmallFFT::backward_line(Complex32* line, Complex32* scratch) const {
  const float scale = 1.0f / static_cast<float>(n_);  // numpy's fct: float32(1 / n)
  if (n_ == 1) {
    line[0] = {line[0].r * scale, line[0].i * scale};
    return;
  }
  if (!radix_2_4_) {
    for (std::size_t k = 0; k < n_; ++k) {
      const Complex64 z = direct_term(line, k, 1.0);
      scratch[k] = {static_cast<float>(z.r) * scale, static_cast<float>(z.i) * scale};
    }
    std::copy(scratch, scratch + n_, line);
    return;
  }
  const Complex32* result = run_passes(line, scratch, twiddles32_, true);
  for (std::size_t k = 0; k < n_; ++k) line[k] = {result[k].r * scale, result[k].i * scale};
}

void SmallFFT::forward_2d(const float* image, Complex32* spectrum) const {
  const std::size_t n = n_;
  std::vector<Complex64> line(n), scratch(n);
  for (std::size_t row = 0; row < n; ++row) {  // last axis first, rounded to complex64
    for (std::size_t col = 0; col < n; ++col) line[col] = {image[row * n + col], 0.0};
    forward_line(line.data(), scratch.data());
    for (std::size_t col = 0; col < n; ++col) {
      spectrum[row * n + col] = {static_cast<float>(line[col].r), static_cast<float>(line[col].i)};
    }
  }
  for (std::size_t col = 0; col < n; ++col) {
    for (std::size_t row = 0; row < n; ++row) {
      line[row] = {spectrum[row * n + col].r, spectrum[row * n + col].i};
    }
    forward_line(line.data(), scratch.data());
    for (std::size_t row = 0; row < n; ++row) {
      spectrum[row * n + col] = {static_cast<float>(line[row].r), static_cast<float>(line[row].i)};
    }
  }
}

void SmallFFT::backward_2d(Complex32* image) const {
  const std::size_t n = n_;
  std::vector<Complex32> column(n), scratch(n);
  for (std::size_t row = 0; row < n; ++row) backward_line(image + row * n, scratch.data());
  for (std::size_t col = 0; col < n; ++col) {
    for (std::size_t row = 0; row < n; ++row) column[row] = image[row * n + col];
    backward_line(column.data(), scratch.data());
    for (std::size_t row = 0; row < n; ++row) image[row * n + col] = column[row];
  }
}

}  // namespace kira
