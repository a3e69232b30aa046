// The default pixel descriptor, image by image; see pixel_descriptor.hpp. Each step keeps
// the numpy reference's float32 arithmetic (histogram counts accumulate in double, as
// numpy.bincount does), so rows agree with it to float32 rounding.
#if defined(__GNUC__) && !defined(__clang__)
// Lets GCC turn the float comparisons of the gradient loop into vector selects (no FP
// exceptions are inspected anywhere); it changes no rounding, so parity is unaffected.
#pragma GCC optimize("no-trapping-math")
#endif
#include "kira/pixel_descriptor.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kira/pyramid_histogram.hpp"

namespace kira {
namespace {

using pixel::add_weighted_votes;
using pixel::cell_map;
using pixel::count_votes;
using pixel::mirror_mix;
using pixel::pyramid;

constexpr double kPi = 3.14159265358979323846;

// atan2 in float32 to within ~1e-7 rad (numpy's float32 arctan2 is within an ulp or so of the
// exact value; orientation votes are continuous in the angle, so this is far inside the parity
// tolerance), branch-free so that the gradient loop vectorises, which libm's atan2f does not.
inline float atan2_approx(float y, float x) {
  const float ax = std::fabs(x), ay = std::fabs(y);
  const float hi = std::max(ax, ay), lo = std::min(ax, ay);
  const float a = lo / std::max(hi, 1e-30f);  // 0 / tiny = 0 for x = y = 0; no branch
  const float s = a * a;
  float r = 2.456721114e-03f;  // odd minimax-fitted polynomial for atan on [0, 1]
  r = r * s - 1.440134797e-02f;
  r = r * s + 3.978121613e-02f;
  r = r * s - 7.234857808e-02f;
  r = r * s + 1.049894706e-01f;
  r = r * s - 1.416122979e-01f;
  r = r * s + 1.998590693e-01f;
  r = r * s - 3.333259705e-01f;
  r = r * s + 9.999998864e-01f;
  r *= a;
  r = ay > ax ? 1.57079632679489662f - r : r;
  r = x < 0.0f ? 3.14159265358979324f - r : r;
  return std::copysign(r, y);  // the sign of y, -0 included
}

std::size_t cells(const std::vector<int>& levels) {
  std::size_t total = 0;
  for (int c : levels) total += static_cast<std::size_t>(c) * static_cast<std::size_t>(c);
  return total;
}

int finest_level(const std::vector<int>& levels, const char* what) {
  if (levels.empty()) throw std::invalid_argument(std::string(what) + " must name at least one level");
  const int finest = *std::max_element(levels.begin(), levels.end());
  for (int c : levels) {
    if (c < 1 || finest % c != 0) {
      throw std::invalid_argument(std::string(what) + " levels must be >= 1 and divide the finest level " +
                                  std::to_string(finest));
    }
  }
  return finest;
}

// Rotation-invariant uniform LBP code (0..9) of every pixel at distance >= r from the border.
void lbp_riu2(const std::vector<std::int16_t>& q, std::size_t s, int r, std::vector<std::int32_t>& codes) {
  const std::size_t m = s - 2 * r;
  codes.resize(m * m);
  const auto row = static_cast<std::ptrdiff_t>(s), d = static_cast<std::ptrdiff_t>(r);
  for (std::size_t y = 0; y < m; ++y) {
    const std::int16_t* c = q.data() + (y + r) * s + r;
    // the 8 neighbours on the square of side 2r + 1, in circular order
    const std::int16_t *n0 = c - d * row - d, *n1 = c - d * row, *n2 = c - d * row + d, *n3 = c + d;
    const std::int16_t *n4 = c + d * row + d, *n5 = c + d * row, *n6 = c + d * row - d, *n7 = c - d;
    std::int32_t* out = codes.data() + y * m;
    for (std::size_t x = 0; x < m; ++x) {  // integer and branch-free: vectorised
      const int v = c[x];
      const int b0 = n0[x] >= v, b1 = n1[x] >= v, b2 = n2[x] >= v, b3 = n3[x] >= v;
      const int b4 = n4[x] >= v, b5 = n5[x] >= v, b6 = n6[x] >= v, b7 = n7[x] >= v;
      const int ones = b0 + b1 + b2 + b3 + b4 + b5 + b6 + b7;
      const int transitions = (b0 ^ b1) + (b1 ^ b2) + (b2 ^ b3) + (b3 ^ b4) + (b4 ^ b5) + (b5 ^ b6) +
                              (b6 ^ b7) + (b7 ^ b0);
      out[x] = transitions <= 2 ? ones : 9;
    }
  }
}

// Block means of a side x side map over a g x g grid, float32 sums as numpy's mean.
void block_means(const float* map, std::size_t side, int g, float* out) {
  const std::size_t k = side / g;
  const float count = static_cast<float>(k * k);
  for (int gy = 0; gy < g; ++gy) {
    for (int gx = 0; gx < g; ++gx) {
      float sum = 0.0f;
      for (std::size_t y = gy * k; y < (gy + 1) * k; ++y) {
        for (std::size_t x = gx * k; x < (gx + 1) * k; ++x) sum += map[y * side + x];
      }
      out[gy * g + gx] = sum / count;
    }
  }
}

// x - mean(x); the mean in double, exact for equal values (a uniform image's layout stays 0).
void subtract_mean(float* x, std::size_t n) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  for (std::size_t i = 0; i < n; ++i) x[i] -= mean;
}

// x / max(|x|, 1e-12) * weight, in place.
void normalise(float* x, std::size_t n, float weight) {
  double sq = 0.0;
  for (std::size_t i = 0; i < n; ++i) sq += static_cast<double>(x[i]) * x[i];
  const float norm = std::max(static_cast<float>(std::sqrt(sq)), 1e-12f);
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] / norm * weight;
}

void check(const PixelDescriptorOptions& o, std::size_t size) {
  const auto fits = [size](int d) { return d >= 1 && size % static_cast<std::size_t>(d) == 0; };
  if (o.colour_table.size() != 32768) {
    throw std::invalid_argument("colour_table must have 32768 entries, got " +
                                std::to_string(o.colour_table.size()));
  }
  for (std::int32_t b : o.colour_table) {
    if (b < 0 || b >= o.colour_bins) {
      throw std::invalid_argument("colour_table has a bin outside [0, colour_bins)");
    }
  }
  for (const auto* levels : {&o.colour_levels, &o.texture_levels, &o.gradient_levels}) {
    for (int c : *levels) {
      if (!fits(c)) {
        throw std::invalid_argument("size " + std::to_string(size) +
                                    " must be divisible by every pyramid level");
      }
    }
  }
  finest_level(o.colour_levels, "colour");
  finest_level(o.texture_levels, "texture");
  finest_level(o.gradient_levels, "gradient");
  for (int r : o.lbp_radii) {
    if (r < 1 || 2 * static_cast<std::size_t>(r) >= size) {
      throw std::invalid_argument("lbp radii must be in [1, size / 2)");
    }
  }
  if (o.orientation_bins < 1) throw std::invalid_argument("orientation_bins must be >= 1");
  if (!fits(o.layout_grid)) throw std::invalid_argument("size must be divisible by layout_grid");
  if (size % 2 != 0 || o.saliency.grid < 1 || (size / 2) % static_cast<std::size_t>(o.saliency.grid) != 0 ||
      o.salience_grid < 1 || o.saliency.grid % o.salience_grid != 0) {
    throw std::invalid_argument(
        "size / 2 must be a multiple of the saliency grid, and that of salience_grid");
  }
}

}  // namespace

std::size_t pixel_descriptor_dim(const PixelDescriptorOptions& o) {
  return static_cast<std::size_t>(o.colour_bins) * cells(o.colour_levels) +
         10 * o.lbp_radii.size() * cells(o.texture_levels) +
         static_cast<std::size_t>(o.orientation_bins) * cells(o.gradient_levels) +
         static_cast<std::size_t>(o.layout_grid) * o.layout_grid +
         static_cast<std::size_t>(o.salience_grid) * o.salience_grid;
}

void pixel_descriptors(const std::uint8_t* rgb, std::size_t n, std::size_t size,
                       const PixelDescriptorOptions& o, float* out) {
  check(o, size);
  const std::size_t s = size, pixels = s * s, dim = pixel_descriptor_dim(o), half = s / 2;
  const int nb = o.orientation_bins;
  const std::size_t colour_len = static_cast<std::size_t>(o.colour_bins) * cells(o.colour_levels);
  const std::size_t texture_len = 10 * o.lbp_radii.size() * cells(o.texture_levels);
  const std::size_t gradient_len = static_cast<std::size_t>(nb) * cells(o.gradient_levels);
  const std::size_t layout_len = static_cast<std::size_t>(o.layout_grid) * o.layout_grid;
  const std::size_t salience_len = static_cast<std::size_t>(o.salience_grid) * o.salience_grid;

  // The salience maps of the whole batch first: 2 x 2 rounded box means, then the saliency map.
  std::vector<std::uint8_t> halves(n * half * half * 3);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* src = rgb + i * pixels * 3;
    std::uint8_t* dst = halves.data() + i * half * half * 3;
    for (std::size_t y = 0; y < half; ++y) {
      for (std::size_t x = 0; x < half; ++x) {
        for (std::size_t ch = 0; ch < 3; ++ch) {
          const std::uint8_t* top = src + ((2 * y) * s + 2 * x) * 3 + ch;
          const std::uint8_t* bottom = top + s * 3;
          const unsigned sum = top[0] + bottom[0] + top[3] + bottom[3];  // numpy's order; exact anyway
          dst[(y * half + x) * 3 + ch] = static_cast<std::uint8_t>((sum + 2) >> 2);
        }
      }
    }
  }
  const std::size_t map_side = static_cast<std::size_t>(o.saliency.grid);
  std::vector<float> maps(n * map_side * map_side);
  saliency_maps(halves.data(), n, half, o.saliency, maps.data());

  // A byte table (32 KB, cache-resident) when the bins fit in a byte, which the default's 56 do.
  std::vector<std::uint8_t> byte_table;
  if (o.colour_bins <= 256) {
    byte_table.assign(o.colour_table.begin(), o.colour_table.end());
  }
  const auto colour_table = [&](int idx) -> std::int32_t {
    return byte_table.empty() ? o.colour_table[idx] : byte_table[idx];
  };
  const float luma_r = 0.299f / 255.0f, luma_g = 0.587f / 255.0f, luma_b = 0.114f / 255.0f;
  const float orientation_scale = static_cast<float>(nb / kPi);
  const int colour_finest = finest_level(o.colour_levels, "colour");
  const int texture_finest = finest_level(o.texture_levels, "texture");
  const int gradient_finest = finest_level(o.gradient_levels, "gradient");
  std::vector<float> grey(pixels), tmp, mag(pixels), upper(pixels), lower(pixels), dx(pixels), dy(pixels);
  std::vector<std::int16_t> q(pixels);
  std::vector<std::int32_t> codes, lo(pixels), hi(pixels), slots(pixels);
  std::vector<double> counts, partial;
  std::vector<std::int32_t> colour_cells, gradient_cells;
  cell_map(s, s, colour_finest, colour_cells);
  cell_map(s, s, gradient_finest, gradient_cells);
  std::vector<std::vector<std::int32_t>> texture_cells(o.lbp_radii.size());
  for (std::size_t ri = 0; ri < o.lbp_radii.size(); ++ri) {
    const std::size_t m = s - 2 * static_cast<std::size_t>(o.lbp_radii[ri]);
    cell_map(m, m, texture_finest, texture_cells[ri]);
  }

  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* px = rgb + i * pixels * 3;
    float* row = out + i * dim;
    // luminance, and the colour table bin of each 5-bit-per-channel pixel, in one pass
    for (std::size_t p = 0; p < pixels; ++p) {
      const std::uint8_t red = px[3 * p], green = px[3 * p + 1], blue = px[3 * p + 2];
      grey[p] = luma_r * static_cast<float>(red) + luma_g * static_cast<float>(green) +
                luma_b * static_cast<float>(blue);
      slots[p] = ((red >> 3) << 10) | ((green >> 3) << 5) | (blue >> 3);
    }
    // colour: pyramid of per-cell distributions of the bins
    float* block = row;
    counts.assign(static_cast<std::size_t>(colour_finest) * colour_finest * o.colour_bins, 0.0);
    for (std::size_t p = 0; p < pixels; ++p) slots[p] = colour_cells[p] * o.colour_bins + colour_table(slots[p]);
    count_votes(slots.data(), pixels, counts, partial);
    pyramid(counts, colour_finest, o.colour_bins, o.colour_levels, true, o.mirror_weight, false, block, tmp);
    normalise(block, colour_len, static_cast<float>(o.colour_weight));
    // texture: LBP riu2 codes at each radius
    block += colour_len;
    for (std::size_t p = 0; p < pixels; ++p) {  // numpy.rint (half to even) of values in [0, 255]
      q[p] = static_cast<std::int16_t>((grey[p] * 255.0f + 8388608.0f) - 8388608.0f);
    }
    float* part = block;
    for (std::size_t ri = 0; ri < o.lbp_radii.size(); ++ri) {
      const int r = o.lbp_radii[ri];
      lbp_riu2(q, s, r, codes);
      const std::size_t m = s - 2 * r;
      counts.assign(static_cast<std::size_t>(texture_finest) * texture_finest * 10, 0.0);
      for (std::size_t p = 0; p < m * m; ++p) slots[p] = texture_cells[ri][p] * 10 + codes[p];
      count_votes(slots.data(), m * m, counts, partial);
      part = pyramid(counts, texture_finest, 10, o.texture_levels, true, o.mirror_weight, false, part, tmp);
    }
    normalise(block, texture_len, static_cast<float>(o.texture_weight));
    // gradient: magnitude-weighted unsigned orientations, soft-assigned to the two nearest bins
    block += texture_len;
    for (std::size_t y = 0; y < s; ++y) {  // central differences, zero on the border
      float* gx = dx.data() + y * s;
      float* gy = dy.data() + y * s;
      const float* g = grey.data() + y * s;
      gx[0] = gx[s - 1] = 0.0f;
      for (std::size_t x = 1; x + 1 < s; ++x) gx[x] = g[x + 1] - g[x - 1];
      if (y == 0 || y + 1 == s) {
        std::fill(gy, gy + s, 0.0f);
      } else {
        for (std::size_t x = 0; x < s; ++x) gy[x] = g[x + s] - g[x - s];
      }
    }
    for (std::size_t p = 0; p < pixels; ++p) {  // branch-free: the compiler vectorises this loop
      const float gx = dx[p], gy = dy[p];
      mag[p] = std::sqrt(gx * gx + gy * gy);
      float pos = atan2_approx(gy, gx) * orientation_scale;
      pos += pos < 0.0f ? static_cast<float>(nb) : 0.0f;
      pos -= 0.5f;
      int low = static_cast<int>(pos + static_cast<float>(nb)) - nb;
      const float frac = pos - static_cast<float>(low);
      low += low < 0 ? nb : 0;
      lo[p] = low;
      hi[p] = low + 1 >= nb ? 0 : low + 1;
      upper[p] = mag[p] * frac;
    }
    counts.assign(static_cast<std::size_t>(gradient_finest) * gradient_finest * nb, 0.0);
    for (std::size_t p = 0; p < pixels; ++p) {  // the lower votes, then the upper (numpy.bincount's order)
      slots[p] = gradient_cells[p] * nb + lo[p];
      lower[p] = mag[p] - upper[p];
    }
    add_weighted_votes(slots.data(), lower.data(), pixels, counts, partial);
    for (std::size_t p = 0; p < pixels; ++p) slots[p] = gradient_cells[p] * nb + hi[p];
    add_weighted_votes(slots.data(), upper.data(), pixels, counts, partial);
    pyramid(counts, gradient_finest, nb, o.gradient_levels, false, o.mirror_weight, true, block, tmp);
    float* level = block;
    for (int c : o.gradient_levels) {  // normalised by the image's mean energy per cell
      const std::size_t width = static_cast<std::size_t>(c) * c * nb;
      float total = 0.0f;
      for (std::size_t k = 0; k < width; ++k) total += level[k];
      total = total / static_cast<float>(c * c) + 1e-6f;
      for (std::size_t k = 0; k < width; ++k) level[k] = std::sqrt(level[k] / total) / static_cast<float>(c);
      level += width;
    }
    normalise(block, gradient_len, static_cast<float>(o.gradient_weight));
    // layout: zero-mean luminance thumbnail
    block += gradient_len;
    block_means(grey.data(), s, o.layout_grid, block);
    mirror_mix(block, o.layout_grid, 1, o.mirror_weight, false, tmp);
    subtract_mean(block, layout_len);
    normalise(block, layout_len, static_cast<float>(o.layout_weight));
    // salience: zero-mean grid of the saliency map
    block += layout_len;
    block_means(maps.data() + i * map_side * map_side, map_side, o.salience_grid, block);
    mirror_mix(block, o.salience_grid, 1, o.salience_mirror_weight, false, tmp);
    subtract_mean(block, salience_len);
    normalise(block, salience_len, static_cast<float>(o.salience_weight));
    normalise(row, dim, 1.0f);
  }
}

}  // namespace kira
