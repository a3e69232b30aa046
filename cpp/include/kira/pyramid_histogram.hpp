// Spatial-pyramid histograms of the pixel descriptor (cpp/src/pixel_descriptor.cpp): per-pixel
// votes into finest-grid cells, coarser levels as sums of finest cells, the Hellinger map
// and the left-right mirror mix. Internal to the core (no binding); pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kira::pixel {

// ((1 + w) x + (1 - w) mirror(x)) / 2 over a c x c grid of `bins` values per cell; mirror()
// reverses the columns (and the bins when reverse_bins). In place; weight >= 1 leaves x.
void mirror_mix(float* x, int c, int bins, double weight, bool reverse_bins, std::vector<float>& tmp);

// out[y * w + x] = finest-grid cell of pixel (y, x) of an h x w map: (y * f / h, x * f / w).
void cell_map(std::size_t h, std::size_t w, int f, std::vector<std::int32_t>& out);

// Adds one vote per slot (cell * bins + bin) to counts, or weights[p] for slots[p].
void count_votes(const std::int32_t* slots, std::size_t n, std::vector<double>& counts,
                 std::vector<double>& partial);
void add_weighted_votes(const std::int32_t* slots, const float* weights, std::size_t n,
                        std::vector<double>& counts, std::vector<double>& partial);

// The pyramid of finest-cell counts (finest^2 x bins, row-major) written level after level
// to out (returns the end): each level's cells are sums of finest cells, optionally
// Hellinger-mapped per cell and scaled to 1/c, then mirror-mixed.
float* pyramid(const std::vector<double>& counts, int finest, int bins, const std::vector<int>& levels,
               bool per_cell, double mirror, bool reverse_bins, float* out, std::vector<float>& tmp);

}  // namespace kira::pixel
