// The default saliency map (kira.models.default.saliency): spectral residual plus
// centre-surround opponent-colour contrast, pooled to a grid. The numpy implementation in
// tests/models/pixel_reference.py is the specification; this follows its float32 / float64
// steps (scipy's filters accumulate in double and store float32 after each axis).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kira {

struct SaliencyOptions {
  int grid = 32;                // output grid side; work size must be a multiple of it
  int residual_filter = 3;      // box filter (wrap) over the log amplitude spectrum
  double residual_sigma = 3.0;  // Gaussian blurs (scipy's kernel, radius int(4 sigma + 0.5), mode 'nearest')
  double centre_sigma = 1.0;
  double surround_sigma = 8.0;
  double residual_weight = 0.35;  // mix of the two cues; colour contrast gets 1 - this
};

// small: n images of size x size x 3 uint8, row-major; out: n * grid * grid floats in [0, 1]
// (all zeros for an image whose bytes are all equal). Throws std::invalid_argument for bad
// options (size not a multiple of grid, a filter < 1, a sigma that is not finite, a weight
// outside [0, 1]). A sigma <= 1e-15 leaves that blur out, as scipy does.
// Thread safety: pure function.
void saliency_maps(const std::uint8_t* small, std::size_t n, std::size_t size,
                   const SaliencyOptions& options, float* out);

// scipy.ndimage.gaussian_filter1d's weights for sigma (truncate 4): 2 * radius + 1 doubles;
// {1} (no blur) for sigma <= 1e-15.
std::vector<double> gaussian_kernel(double sigma);

}  // namespace kira
