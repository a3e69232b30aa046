// Spatial-pyramid histograms; see pyramid_histogram.hpp. The float32 steps follow the numpy
// reference (tests/models/pixel_reference.py, _pyramid_histogram and _mirror_mix).
#include "kira/pyramid_histogram.hpp"

#include <algorithm>
#include <cmath>

namespace kira::pixel {

// ((1 + w) x + (1 - w) mirror(x)) / 2 over a c x c grid of `bins` values per cell; mirror()
// reverses the columns (and the bins when reverse_bins). In place; weight >= 1 leaves x.
void mirror_mix(float* x, int c, int bins, double weight, bool reverse_bins, std::vector<float>& tmp) {
  if (weight >= 1.0) return;
  const float a = static_cast<float>((1.0 + weight) / 2.0), b = static_cast<float>((1.0 - weight) / 2.0);
  const std::size_t n = static_cast<std::size_t>(c) * c * bins;
  tmp.assign(x, x + n);
  for (int cy = 0; cy < c; ++cy) {
    for (int cx = 0; cx < c; ++cx) {
      for (int k = 0; k < bins; ++k) {
        const std::size_t here = (static_cast<std::size_t>(cy) * c + cx) * bins + k;
        const std::size_t there = (static_cast<std::size_t>(cy) * c + (c - 1 - cx)) * bins +
                                  (reverse_bins ? bins - 1 - k : k);
        x[here] = a * tmp[here] + b * tmp[there];
      }
    }
  }
}

// Pixel (y, x) of an h x w map falls into finest-grid cell (y * f / h, x * f / w).
void cell_map(std::size_t h, std::size_t w, int f, std::vector<std::int32_t>& out) {
  out.resize(h * w);
  for (std::size_t y = 0; y < h; ++y) {
    const auto cy = std::min<std::size_t>(y * f / h, f - 1);
    for (std::size_t x = 0; x < w; ++x) {
      out[y * w + x] = static_cast<std::int32_t>(cy * f + std::min<std::size_t>(x * f / w, f - 1));
    }
  }
}

// Votes per slot (cell * bins + bin), unweighted or weighted, into counts (which must be
// zeroed). Four interleaved partial histograms break the read-modify-write chains of
// consecutive pixels voting for the same slot; integer counts stay exact, weighted sums
// differ from numpy.bincount's sequential double sums by double rounding only.
void count_votes(const std::int32_t* slots, std::size_t n, std::vector<double>& counts,
                 std::vector<double>& partial) {
  const std::size_t total = counts.size();
  partial.assign(4 * total, 0.0);
  std::size_t p = 0;
  for (; p + 4 <= n; p += 4) {
    partial[slots[p]] += 1.0;
    partial[total + slots[p + 1]] += 1.0;
    partial[2 * total + slots[p + 2]] += 1.0;
    partial[3 * total + slots[p + 3]] += 1.0;
  }
  for (; p < n; ++p) partial[slots[p]] += 1.0;
  for (std::size_t k = 0; k < total; ++k) {
    counts[k] += (partial[k] + partial[total + k]) + (partial[2 * total + k] + partial[3 * total + k]);
  }
}

void add_weighted_votes(const std::int32_t* slots, const float* weights, std::size_t n,
                        std::vector<double>& counts, std::vector<double>& partial) {
  const std::size_t total = counts.size();
  partial.assign(4 * total, 0.0);
  std::size_t p = 0;
  for (; p + 4 <= n; p += 4) {
    partial[slots[p]] += weights[p];
    partial[total + slots[p + 1]] += weights[p + 1];
    partial[2 * total + slots[p + 2]] += weights[p + 2];
    partial[3 * total + slots[p + 3]] += weights[p + 3];
  }
  for (; p < n; ++p) partial[slots[p]] += weights[p];
  for (std::size_t k = 0; k < total; ++k) {
    counts[k] += (partial[k] + partial[total + k]) + (partial[2 * total + k] + partial[3 * total + k]);
  }
}

// The pyramid of finest-cell counts (finest^2 x bins, row-major): each level's cells are
// sums of finest cells, optionally Hellinger-mapped per cell and scaled to 1/c, then
// mirror-mixed; written level after level to out.
float* pyramid(const std::vector<double>& counts, int finest, int bins, const std::vector<int>& levels,
               bool per_cell, double mirror, bool reverse_bins, float* out, std::vector<float>& tmp) {
  std::vector<float> fine(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) fine[i] = static_cast<float>(counts[i]);
  for (int c : levels) {
    const int f = finest / c;
    float* level = out;
    for (int cy = 0; cy < c; ++cy) {
      for (int cx = 0; cx < c; ++cx) {
        float* cell = level + (static_cast<std::size_t>(cy) * c + cx) * bins;
        std::fill(cell, cell + bins, 0.0f);
        for (int fy = cy * f; fy < (cy + 1) * f; ++fy) {
          for (int fx = cx * f; fx < (cx + 1) * f; ++fx) {
            const float* src = fine.data() + (static_cast<std::size_t>(fy) * finest + fx) * bins;
            for (int k = 0; k < bins; ++k) cell[k] += src[k];
          }
        }
        if (per_cell) {
          float total = 0.0f;
          for (int k = 0; k < bins; ++k) total += cell[k];
          total = std::max(total, 1e-6f);
          for (int k = 0; k < bins; ++k) cell[k] = std::sqrt(cell[k] / total) / static_cast<float>(c);
        }
      }
    }
    mirror_mix(level, c, bins, mirror, reverse_bins, tmp);
    out += static_cast<std::size_t>(c) * c * bins;
  }
  return out;
}

}  // namespace kira::pixel
