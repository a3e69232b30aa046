#include "kira/regions.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace kira {
namespace {

std::uint32_t find_root(std::vector<std::uint32_t>& parent, std::uint32_t x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];  // path halving
    x = parent[x];
  }
  return x;
}

void unite(std::vector<std::uint32_t>& parent, std::uint32_t a, std::uint32_t b) {
  a = find_root(parent, a);
  b = find_root(parent, b);
  if (a == b) return;
  if (a < b) parent[b] = a; else parent[a] = b;  // the root stays the earliest cell
}

struct Component {
  std::size_t cells = 0;
  double sum = 0.0;
  std::size_t r0, r1, c0, c1;
};

}  // namespace

Regions extract_regions(const float* attention, std::size_t h, std::size_t w,
                        std::int64_t image_width, std::int64_t image_height,
                        const RegionOptions& options) {
  if (h == 0 || w == 0) {
    throw std::invalid_argument("attention grid is empty (shape " + std::to_string(h) + " x " +
                                std::to_string(w) + "); pass a grid with at least one cell");
  }
  constexpr std::int64_t kMaxSide = std::numeric_limits<std::int32_t>::max();
  if (image_width < 1 || image_height < 1 || image_width > kMaxSide || image_height > kMaxSide) {
    throw std::invalid_argument("image_size must be (width, height) with 1 <= each <= 2**31 - 1");
  }
  if (options.connectivity != 4 && options.connectivity != 8) {
    throw std::invalid_argument("connectivity must be 4 or 8, got " +
                                std::to_string(options.connectivity));
  }
  if (!std::isfinite(options.k_sigma)) {
    throw std::invalid_argument("k_sigma must be finite (the paper uses 0.5)");
  }
  if (options.min_cells < 1) {
    throw std::invalid_argument("min_cells must be >= 1");
  }
  const std::size_t n = h * w;
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = attention[i];
    if (!std::isfinite(v)) {
      throw std::invalid_argument("attention has a NaN or inf at row " + std::to_string(i / w) +
                                  ", column " + std::to_string(i % w) +
                                  "; clean it first, e.g. np.nan_to_num(attention)");
    }
    sum += v;
  }
  const double mean = sum / static_cast<double>(n);
  double sq = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(attention[i]) - mean;
    sq += d * d;
  }
  const double threshold = mean + options.k_sigma * std::sqrt(sq / static_cast<double>(n));

  // Union-find over cell indices; kNone marks background.
  constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> parent(n, kNone);
  const bool eight = options.connectivity == 8;
  for (std::size_t r = 0; r < h; ++r) {
    const float* row = attention + r * w;
    for (std::size_t c = 0; c < w; ++c) {
      if (!(static_cast<double>(row[c]) > threshold)) continue;
      const auto i = static_cast<std::uint32_t>(r * w + c);
      parent[i] = i;
      if (c > 0 && parent[i - 1] != kNone) unite(parent, i, i - 1);
      if (r > 0) {
        const auto up = static_cast<std::uint32_t>(i - w);
        if (parent[up] != kNone) unite(parent, i, up);
        if (eight) {
          if (c > 0 && parent[up - 1] != kNone) unite(parent, i, up - 1);
          if (c + 1 < w && parent[up + 1] != kNone) unite(parent, i, up + 1);
        }
      }
    }
  }

  // Components in order of their first cell (row-major); comp_of maps root -> component.
  std::vector<std::int32_t> comp_of(n, -1);
  std::vector<Component> comps;
  std::vector<std::int32_t> cell_comp(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (parent[i] == kNone) continue;
    const std::uint32_t root = find_root(parent, static_cast<std::uint32_t>(i));
    std::int32_t cidx = comp_of[root];
    const std::size_t r = i / w, c = i % w;
    if (cidx < 0) {
      cidx = static_cast<std::int32_t>(comps.size());
      comp_of[root] = cidx;
      comps.push_back(Component{0, 0.0, r, r, c, c});
    }
    Component& comp = comps[static_cast<std::size_t>(cidx)];
    comp.cells += 1;
    comp.sum += attention[i];
    comp.r1 = std::max(comp.r1, r);  // r only grows in a row-major scan
    comp.c0 = std::min(comp.c0, c);
    comp.c1 = std::max(comp.c1, c);
    cell_comp[i] = cidx;
  }

  std::vector<std::int32_t> kept;
  std::vector<float> mean_of(comps.size());
  for (std::size_t j = 0; j < comps.size(); ++j) {
    mean_of[j] = static_cast<float>(comps[j].sum / static_cast<double>(comps[j].cells));
    if (comps[j].cells >= options.min_cells) kept.push_back(static_cast<std::int32_t>(j));
  }
  std::stable_sort(kept.begin(), kept.end(), [&](std::int32_t a, std::int32_t b) {
    return mean_of[static_cast<std::size_t>(a)] > mean_of[static_cast<std::size_t>(b)];
  });
  std::vector<std::int32_t> new_label(comps.size(), 0);

  Regions out;
  out.threshold = threshold;
  out.boxes.reserve(kept.size() * 4);
  out.scores.reserve(kept.size());
  const auto H = image_height, W = image_width;
  const auto hh = static_cast<std::int64_t>(h), ww = static_cast<std::int64_t>(w);
  for (std::size_t j = 0; j < kept.size(); ++j) {
    const Component& comp = comps[static_cast<std::size_t>(kept[j])];
    new_label[static_cast<std::size_t>(kept[j])] = static_cast<std::int32_t>(j + 1);
    const auto c0 = static_cast<std::int64_t>(comp.c0), c1 = static_cast<std::int64_t>(comp.c1);
    const auto r0 = static_cast<std::int64_t>(comp.r0), r1 = static_cast<std::int64_t>(comp.r1);
    out.boxes.push_back(static_cast<std::int32_t>(c0 * W / ww));                   // floor
    out.boxes.push_back(static_cast<std::int32_t>(r0 * H / hh));
    out.boxes.push_back(static_cast<std::int32_t>(((c1 + 1) * W + ww - 1) / ww));  // ceil
    out.boxes.push_back(static_cast<std::int32_t>(((r1 + 1) * H + hh - 1) / hh));
    out.scores.push_back(mean_of[static_cast<std::size_t>(kept[j])]);
  }
  out.labels.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t cidx = cell_comp[i];
    out.labels[i] = cidx < 0 ? 0 : new_label[static_cast<std::size_t>(cidx)];
  }
  return out;
}

}  // namespace kira
