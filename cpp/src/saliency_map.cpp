// Spectral residual (Hou & Zhang 2007) + centre-surround contrast, as the numpy reference
// computes them; see saliency_map.hpp. Per image: FFT, log amplitude, box filter, inverse
// FFT with the original phase, blurs, unit ranges, block means.
#include "kira/saliency_map.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kira/small_fft.hpp"

namespace kira {
namespace {

// scipy.ndimage.correlate1d with a symmetric kernel, mode 'nearest', along one axis of a
// size x size float32 plane. Each output is x[i] w0 + sum over j = radius .. 1 of
// (x[i - j] + x[i + j]) w[j], in scipy's order; scipy accumulates in double, this in float32
// (about 1e-7 relative apart, far inside the parity tolerance) with 16 outputs kept in
// registers while the taps run, which the compiler vectorises: the surround blur is the
// largest cost of the saliency map.
constexpr std::size_t kBlock = 16;

// out[0 .. kBlock) from rows (or columns) at the given pointers: taps[j] -> (minus, plus).
inline void blur_block(const float* centre, const float* const* minus, const float* const* plus,
                       const float* w, std::size_t radius, float* out) {
  float acc[kBlock];
  for (std::size_t l = 0; l < kBlock; ++l) acc[l] = centre[l] * w[0];
  for (std::size_t j = radius; j >= 1; --j) {
    const float* a = minus[j];
    const float* b = plus[j];
    const float wj = w[j];
    for (std::size_t l = 0; l < kBlock; ++l) acc[l] += (a[l] + b[l]) * wj;
  }
  for (std::size_t l = 0; l < kBlock; ++l) out[l] = acc[l];
}

void gaussian_axis(float* plane, std::size_t size, bool along_rows, const std::vector<float>& kernel,
                   std::vector<float>& work) {
  const std::size_t radius = kernel.size() / 2, n = size;
  const float* w = kernel.data() + radius;  // w[0 .. radius]
  const std::size_t padded = (n + kBlock - 1) / kBlock * kBlock;
  std::vector<const float*> minus(radius + 1), plus(radius + 1);
  if (along_rows) {  // vertical: output row i from rows i - j and i + j (clamped)
    work.assign(padded * (n + 1), 0.0f);
    float* src = work.data();  // rows padded to a whole number of blocks
    float* out = work.data() + padded * n;
    for (std::size_t y = 0; y < n; ++y) std::copy(plane + y * n, plane + (y + 1) * n, src + y * padded);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t x = 0; x < padded; x += kBlock) {
        for (std::size_t j = 1; j <= radius; ++j) {
          minus[j] = src + (i >= j ? i - j : 0) * padded + x;
          plus[j] = src + std::min(i + j, n - 1) * padded + x;
        }
        blur_block(src + i * padded + x, minus.data(), plus.data(), w, radius, out + x);
      }
      std::copy(out, out + n, plane + i * n);
    }
    return;
  }
  work.assign(padded + 2 * radius + kBlock + padded, 0.0f);  // horizontal: a padded line per row
  float* line = work.data();
  float* out = line + padded + 2 * radius + kBlock;
  for (std::size_t row = 0; row < n; ++row) {
    float* p = plane + row * n;
    std::fill(line, line + radius, p[0]);
    std::copy(p, p + n, line + radius);
    std::fill(line + radius + n, line + 2 * radius + padded + kBlock, p[n - 1]);
    const float* centre = line + radius;
    for (std::size_t x = 0; x < padded; x += kBlock) {
      for (std::size_t j = 1; j <= radius; ++j) {
        minus[j] = centre + x - j;
        plus[j] = centre + x + j;
      }
      blur_block(centre + x, minus.data(), plus.data(), w, radius, out + x);
    }
    std::copy(out, out + n, p);
  }
}

void gaussian_2d(float* plane, std::size_t size, const std::vector<float>& kernel, std::vector<float>& work) {
  gaussian_axis(plane, size, true, kernel, work);   // axis 1 (rows) first, as scipy
  gaussian_axis(plane, size, false, kernel, work);  // then axis 2
}

// scipy.ndimage.uniform_filter1d, mode 'wrap', origin 0: a running sum in double.
void uniform_axis(float* plane, std::size_t size, bool along_rows, std::size_t filter,
                  std::vector<double>& line, std::vector<std::size_t>& wrapped) {
  const std::size_t left = filter / 2, right = filter - left - 1, extended = size + left + right;
  const std::size_t stride = along_rows ? size : 1, step = along_rows ? 1 : size;
  line.resize(extended);
  wrapped.resize(extended);
  for (std::size_t i = 0; i < extended; ++i) {  // extended index i - left, wrapped into [0, size)
    wrapped[i] = ((i + size * (left / size + 1)) - left) % size;
  }
  const double f = static_cast<double>(filter);
  for (std::size_t l = 0; l < size; ++l) {
    float* p = plane + l * step;
    for (std::size_t i = 0; i < extended; ++i) line[i] = p[wrapped[i] * stride];
    double acc = 0.0;
    for (std::size_t j = 0; j < filter; ++j) acc += line[j];
    acc /= f;
    p[0] = static_cast<float>(acc);
    for (std::size_t i = 1; i < size; ++i) {
      acc += (line[i + filter - 1] - line[i - 1]) / f;
      p[i * stride] = static_cast<float>(acc);
    }
  }
}

// _unit_range: (x - min) / (max - min) in float32; a constant input becomes zeros.
void unit_range(float* x, std::size_t count) {
  float lo = x[0], hi = x[0];
  for (std::size_t i = 1; i < count; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float span = hi - lo;
  if (span < 1e-12f) {  // numpy compares the float32 span with 1e-12 (as float32)
    std::fill(x, x + count, 0.0f);
    return;
  }
  for (std::size_t i = 0; i < count; ++i) x[i] = (x[i] - lo) / span;
}

inline float magnitude(Complex32 z) {  // hypotf: exact in double, rounded once
  return static_cast<float>(std::sqrt(static_cast<double>(z.r) * z.r + static_cast<double>(z.i) * z.i));
}

}  // namespace

std::vector<double> gaussian_kernel(double sigma) {
  if (!(sigma > 1e-15)) return {1.0};  // scipy leaves such an axis unfiltered
  const auto radius = static_cast<std::ptrdiff_t>(4.0 * sigma + 0.5);
  std::vector<double> w(static_cast<std::size_t>(2 * radius + 1));
  const double c = -0.5 / (sigma * sigma);
  double total = 0.0;
  for (std::ptrdiff_t x = -radius; x <= radius; ++x) {
    w[static_cast<std::size_t>(x + radius)] = std::exp(c * static_cast<double>(x * x));
  }
  for (double v : w) total += v;
  for (double& v : w) v /= total;
  return w;
}

void saliency_maps(const std::uint8_t* small, std::size_t n, std::size_t size,
                   const SaliencyOptions& o, float* out) {
  if (o.grid < 1 || size == 0 || size % static_cast<std::size_t>(o.grid) != 0) {
    throw std::invalid_argument("work size " + std::to_string(size) + " must be a multiple of grid " +
                                std::to_string(o.grid));
  }
  if (o.residual_filter < 1) throw std::invalid_argument("residual_filter must be >= 1");
  for (double sigma : {o.residual_sigma, o.centre_sigma, o.surround_sigma}) {
    if (!std::isfinite(sigma)) throw std::invalid_argument("the saliency sigmas must be finite");
  }
  if (!(o.residual_weight >= 0.0 && o.residual_weight <= 1.0)) {
    throw std::invalid_argument("residual_weight must be in [0, 1]");
  }
  const std::size_t s = size, pixels = s * s, g = static_cast<std::size_t>(o.grid), k = s / g;
  const SmallFFT fft(s);
  const auto float_kernel = [](double sigma) {
    const auto w = gaussian_kernel(sigma);
    return std::vector<float>(w.begin(), w.end());
  };
  const auto residual_kernel = float_kernel(o.residual_sigma);
  const auto centre_kernel = float_kernel(o.centre_sigma);
  const auto surround_kernel = float_kernel(o.surround_sigma);
  const float w_residual = static_cast<float>(o.residual_weight);
  const float w_contrast = static_cast<float>(1.0 - o.residual_weight);
  const float cell_count = static_cast<float>(k * k);

  std::vector<float> grey(pixels), amp(pixels), log_amp(pixels), sr(pixels), cs(pixels);
  std::vector<float> centre(3 * pixels), surround(3 * pixels);
  std::vector<Complex32> spectrum(pixels);
  std::vector<double> line;
  std::vector<float> blur_work;
  std::vector<std::size_t> wrapped;
  for (std::size_t item = 0; item < n; ++item) {
    const std::uint8_t* rgb = small + item * pixels * 3;
    float* grid = out + item * g * g;
    const auto [mn, mx] = std::minmax_element(rgb, rgb + pixels * 3);
    if (*mn == *mx) {  // a uniform image: nothing stands out
      std::fill(grid, grid + g * g, 0.0f);
      continue;
    }
    // opponent colours: luminance, red-green, blue-yellow (float32, as numpy)
    for (std::size_t p = 0; p < pixels; ++p) {
      const float r = static_cast<float>(rgb[3 * p]) / 255.0f;
      const float gr = static_cast<float>(rgb[3 * p + 1]) / 255.0f;
      const float b = static_cast<float>(rgb[3 * p + 2]) / 255.0f;
      grey[p] = 0.299f * r + 0.587f * gr + 0.114f * b;
      centre[p] = grey[p];
      centre[pixels + p] = r - gr;
      centre[2 * pixels + p] = 0.5f * (r + gr) - b;
    }
    // spectral residual
    fft.forward_2d(grey.data(), spectrum.data());
    for (std::size_t p = 0; p < pixels; ++p) {
      amp[p] = magnitude(spectrum[p]);
      log_amp[p] = std::log(amp[p] + 1e-8f);
    }
    std::copy(log_amp.begin(), log_amp.end(), sr.begin());  // sr holds the box-filtered log amplitude
    const auto f = static_cast<std::size_t>(o.residual_filter);
    if (f > 1) {
      uniform_axis(sr.data(), s, true, f, line, wrapped);
      uniform_axis(sr.data(), s, false, f, line, wrapped);
    }
    for (std::size_t p = 0; p < pixels; ++p) {  // exp(residual) with the original phase
      const float amplitude = std::exp(log_amp[p] - sr[p]);
      // the unit phase z / |z| (numpy: exp(1j * angle(z)), equal to float32 rounding)
      if (amp[p] > 0.0f) {
        spectrum[p] = {amplitude * (spectrum[p].r / amp[p]), amplitude * (spectrum[p].i / amp[p])};
      } else {  // signed zeros: angle(-0 + 0j) is pi, and many coefficients of a strip image are zero
        const float angle = std::atan2(spectrum[p].i, spectrum[p].r);
        spectrum[p] = {amplitude * std::cos(angle), amplitude * std::sin(angle)};
      }
    }
    fft.backward_2d(spectrum.data());
    for (std::size_t p = 0; p < pixels; ++p) {
      const float m = magnitude(spectrum[p]);
      sr[p] = m * m;
    }
    gaussian_2d(sr.data(), s, residual_kernel, blur_work);
    // centre-surround contrast
    std::copy(centre.begin(), centre.end(), surround.begin());
    for (std::size_t c = 0; c < 3; ++c) {
      gaussian_2d(centre.data() + c * pixels, s, centre_kernel, blur_work);
      gaussian_2d(surround.data() + c * pixels, s, surround_kernel, blur_work);
    }
    for (std::size_t p = 0; p < pixels; ++p) {
      float sum = 0.0f;
      for (std::size_t c = 0; c < 3; ++c) {
        const float d = centre[c * pixels + p] - surround[c * pixels + p];
        sum += d * d;
      }
      cs[p] = std::sqrt(sum);
    }
    unit_range(sr.data(), pixels);
    unit_range(cs.data(), pixels);
    for (std::size_t p = 0; p < pixels; ++p) sr[p] = w_residual * sr[p] + w_contrast * cs[p];
    for (std::size_t gy = 0; gy < g; ++gy) {
      for (std::size_t gx = 0; gx < g; ++gx) {
        float sum = 0.0f;
        for (std::size_t y = gy * k; y < (gy + 1) * k; ++y) {
          for (std::size_t x = gx * k; x < (gx + 1) * k; ++x) sum += sr[y * s + x];
        }
        grid[gy * g + gx] = sum / cell_count;
      }
    }
    unit_range(grid, g * g);
  }
}

}  // namespace kira
