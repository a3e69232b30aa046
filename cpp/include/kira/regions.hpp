// Salient regions of an attention grid: threshold, connected components, pixel boxes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kira {

struct RegionOptions {
  double k_sigma = 0.5;       // threshold = mean + k_sigma * std (population std)
  int connectivity = 8;       // 4 or 8
  std::size_t min_cells = 1;  // components with fewer cells are dropped (label 0)
};

struct Regions {
  // Per region, in output order (score descending, ties to the component whose first
  // cell in row-major order comes first): x0, y0, x1, y1 in image pixels, x0/y0
  // inclusive, x1/y1 exclusive.
  std::vector<std::int32_t> boxes;   // 4 per region
  std::vector<float> scores;         // mean attention over the component's cells
  std::vector<std::int32_t> labels;  // h * w, row-major; 0 = background, r + 1 = region r
  double threshold = 0.0;            // the threshold that was applied (cells > threshold)
};

// attention: h * w floats, row-major, all finite; h, w >= 1; image_width/height >= 1.
// A cell is salient when attention > threshold (strictly; a constant grid has none).
// Grid cell (r, c) covers the continuous pixel square [c*W/w, (c+1)*W/w) x [r*H/h, ...);
// a box is the smallest integer pixel box covering its cells: x0 = floor(c0*W/w),
// x1 = ceil((c1+1)*W/w), likewise for y. Throws std::invalid_argument for bad input.
// Thread safety: pure function.
Regions extract_regions(const float* attention, std::size_t h, std::size_t w,
                        std::int64_t image_width, std::int64_t image_height,
                        const RegionOptions& options);

}  // namespace kira
