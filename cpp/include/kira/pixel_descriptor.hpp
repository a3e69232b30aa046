// The default pixel descriptor (kira.models.default.pixel_encoder): colour, texture,
// gradient, layout and salience blocks of a batch of prepared size x size RGB images, each
// block L2-normalised and weighted, the concatenation L2-normalised. The numpy
// implementation in tests/models/pixel_reference.py is the specification.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kira/saliency_map.hpp"

namespace kira {

struct PixelDescriptorOptions {
  std::vector<std::int32_t> colour_table;  // 32768 colour bins, indexed by 5-bit r << 10 | g << 5 | b
  int colour_bins = 56;                    // every table entry must be in [0, colour_bins)
  std::vector<int> colour_levels{1, 2};    // spatial pyramids: cells per side at each level
  std::vector<int> lbp_radii{1, 2};
  std::vector<int> texture_levels{1, 2};
  int orientation_bins = 9;
  std::vector<int> gradient_levels{1, 2, 4};
  int layout_grid = 8;
  int salience_grid = 8;
  double mirror_weight = 0.35;  // weight of the left-right antisymmetric part (1 = none mixed)
  double salience_mirror_weight = 1.0;
  double colour_weight = 0.8, texture_weight = 0.8, gradient_weight = 1.0, layout_weight = 0.7,
         salience_weight = 0.5;
  SaliencyOptions saliency;  // for the half-size map; its grid must be size / 2
};

// Length of one descriptor row for these options.
std::size_t pixel_descriptor_dim(const PixelDescriptorOptions& options);

// rgb: n images of size x size x 3 uint8, row-major; out: n * pixel_descriptor_dim floats.
// Throws std::invalid_argument for options that do not fit size (a pyramid level or grid
// that does not divide it, a table of the wrong length or with a bin out of range, ...).
// Thread safety: pure function.
void pixel_descriptors(const std::uint8_t* rgb, std::size_t n, std::size_t size,
                       const PixelDescriptorOptions& options, float* out);

}  // namespace kira
