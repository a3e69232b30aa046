// Run-based connected components: each row is split into runs of salient cells, runs are
// joined with the overlapping runs of the row above by union-find, then every component's
// statistics are gathered per run. Work is one pass over the cells plus one per run.
#include "kira/regions.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#if defined(_MSC_VER)
#include <intrin.h>
#endif

namespace kira {
namespace {

// Index of the lowest set bit of a non-zero word.
inline std::size_t lowest_bit(std::uint64_t m) {
#if defined(_MSC_VER)
  unsigned long i;
  _BitScanForward64(&i, m);
  return i;
#else
  return static_cast<std::size_t>(__builtin_ctzll(m));
#endif
}

struct Run {
  std::uint32_t row, c0, c1;  // cells [c0, c1) of row
  std::uint32_t parent;       // union-find over run indices; the root is the earliest run
};

std::uint32_t find_root(std::vector<Run>& runs, std::uint32_t x) {
  while (runs[x].parent != x) {
    runs[x].parent = runs[runs[x].parent].parent;  // path halving
    x = runs[x].parent;
  }
  return x;
}

void unite(std::vector<Run>& runs, std::uint32_t a, std::uint32_t b) {
  a = find_root(runs, a);
  b = find_root(runs, b);
  if (a == b) return;
  if (a < b) runs[b].parent = a; else runs[a].parent = b;
}

struct Component {
  std::size_t cells = 0;
  double sum = 0.0;
  std::uint32_t r0, r1, c0, c1;  // inclusive cell bounds
};

// Sum with four independent accumulators (the compiler may not reorder FP additions).
template <class F>
double sum4(std::size_t n, F f) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += f(i);
    s1 += f(i + 1);
    s2 += f(i + 2);
    s3 += f(i + 3);
  }
  for (; i < n; ++i) s0 += f(i);
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

Regions extract_regions(const float* attention, std::size_t h, std::size_t w,
                        std::int64_t image_width, std::int64_t image_height,
                        const RegionOptions& options) {
  if (h == 0 || w == 0) {
    throw std::invalid_argument("attention grid is empty (shape " + std::to_string(h) + " x " +
                                std::to_string(w) + "); pass a grid with at least one cell");
  }
  if (h > std::numeric_limits<std::uint32_t>::max() / 2 ||
      w > std::numeric_limits<std::uint32_t>::max() / 2) {
    throw std::invalid_argument("attention grid is too large (a side over 2**31 cells)");
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
  const double sum = sum4(n, [&](std::size_t i) { return static_cast<double>(attention[i]); });
  if (!std::isfinite(sum)) {
    for (std::size_t i = 0; i < n; ++i) {
      if (!std::isfinite(attention[i])) {
        throw std::invalid_argument("attention has a NaN or inf at row " + std::to_string(i / w) +
                                    ", column " + std::to_string(i % w) +
                                    "; clean it first, e.g. np.nan_to_num(attention)");
      }
    }
  }
  const double mean = sum / static_cast<double>(n);
  const double sq = sum4(n, [&](std::size_t i) {
    const double d = static_cast<double>(attention[i]) - mean;
    return d * d;
  });
  const double threshold = mean + options.k_sigma * std::sqrt(sq / static_cast<double>(n));

  // For a float v, v > threshold (in double) exactly when v > float_threshold: the largest
  // float not above threshold. Comparing floats lets the mask loop vectorise.
  float float_threshold = static_cast<float>(threshold);
  if (static_cast<double>(float_threshold) > threshold) {
    float_threshold = std::nextafter(float_threshold, -std::numeric_limits<float>::infinity());
  }

  // Runs of salient cells, row by row, joined to the row above. Each row is turned into a
  // bitmask 64 cells at a time, and runs are read off the bitmask with count-trailing-zeros.
  const std::uint32_t reach = options.connectivity == 8 ? 1 : 0;  // diagonal overlap allowance
  std::vector<Run> runs;
  const std::size_t words = (w + 63) / 64;
  std::vector<std::uint64_t> bits(words);
  std::size_t prev_begin = 0, prev_end = 0;
  for (std::uint32_t r = 0; r < h; ++r) {
    const float* row = attention + static_cast<std::size_t>(r) * w;
    const std::size_t begin = runs.size();
    for (std::size_t word = 0; word < words; ++word) {
      const std::size_t base = word * 64, count = std::min<std::size_t>(64, w - base);
      std::uint64_t m = 0;
      for (std::size_t j = 0; j < count; ++j) {
        m |= static_cast<std::uint64_t>(row[base + j] > float_threshold) << j;
      }
      bits[word] = m;
    }
    // Walk the bitmask: a run starts at the next set bit and ends at the next clear bit.
    std::size_t c = 0;
    while (c < w) {
      std::size_t word = c >> 6;
      std::uint64_t m = bits[word] & (~std::uint64_t{0} << (c & 63));
      while (m == 0 && ++word < words) m = bits[word];
      if (m == 0) break;
      const std::size_t c0 = word * 64 + lowest_bit(m);
      std::uint64_t z = ~bits[word] & (~std::uint64_t{0} << (c0 & 63));
      while (z == 0 && ++word < words) z = ~bits[word];
      const std::size_t c1 =
          z == 0 ? w : std::min(w, word * 64 + lowest_bit(z));
      const auto idx = static_cast<std::uint32_t>(runs.size());
      runs.push_back(Run{r, static_cast<std::uint32_t>(c0), static_cast<std::uint32_t>(c1), idx});
      c = c1;
    }
    const std::size_t end = runs.size();
    // Two-pointer sweep: run a (this row) touches run b (row above) when their column
    // ranges overlap, widened by one column for 8-connectivity.
    std::size_t b = prev_begin;
    for (std::size_t a = begin; a < end && b < prev_end;) {
      const Run& ra = runs[a];
      const Run& rb = runs[b];
      if (rb.c1 + reach <= ra.c0) { ++b; continue; }
      if (ra.c1 + reach <= rb.c0) { ++a; continue; }
      unite(runs, static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b));
      if (rb.c1 < ra.c1) ++b; else ++a;  // advance whichever ends first
    }
    prev_begin = begin;
    prev_end = end;
  }

  // Components in order of their first run (= first cell in row-major order).
  std::vector<std::int32_t> comp_of_run(runs.size());
  std::vector<Component> comps;
  for (std::size_t j = 0; j < runs.size(); ++j) {
    const std::uint32_t root = find_root(runs, static_cast<std::uint32_t>(j));
    const Run& run = runs[j];
    std::int32_t cidx;
    if (root == j) {
      cidx = static_cast<std::int32_t>(comps.size());
      comps.push_back(Component{0, 0.0, run.row, run.row, run.c0, run.c1 - 1});
    } else {
      cidx = comp_of_run[root];
    }
    comp_of_run[j] = cidx;
    Component& comp = comps[static_cast<std::size_t>(cidx)];
    const float* row = attention + static_cast<std::size_t>(run.row) * w;
    double s = 0.0;
    for (std::uint32_t c = run.c0; c < run.c1; ++c) s += row[c];
    comp.sum += s;
    comp.cells += run.c1 - run.c0;
    comp.r1 = run.row;  // rows only grow in a row-major scan
    comp.c0 = std::min(comp.c0, run.c0);
    comp.c1 = std::max(comp.c1, run.c1 - 1);
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
  const std::int64_t H = image_height, W = image_width;
  const auto hh = static_cast<std::int64_t>(h), ww = static_cast<std::int64_t>(w);
  for (std::size_t j = 0; j < kept.size(); ++j) {
    const Component& comp = comps[static_cast<std::size_t>(kept[j])];
    new_label[static_cast<std::size_t>(kept[j])] = static_cast<std::int32_t>(j + 1);
    const std::int64_t c0 = comp.c0, c1 = comp.c1, r0 = comp.r0, r1 = comp.r1;
    out.boxes.push_back(static_cast<std::int32_t>(c0 * W / ww));                   // floor
    out.boxes.push_back(static_cast<std::int32_t>(r0 * H / hh));
    out.boxes.push_back(static_cast<std::int32_t>(((c1 + 1) * W + ww - 1) / ww));  // ceil
    out.boxes.push_back(static_cast<std::int32_t>(((r1 + 1) * H + hh - 1) / hh));
    out.scores.push_back(mean_of[static_cast<std::size_t>(kept[j])]);
  }
  out.labels.assign(n, 0);
  for (std::size_t j = 0; j < runs.size(); ++j) {
    const std::int32_t label = new_label[static_cast<std::size_t>(comp_of_run[j])];
    if (label == 0) continue;
    std::int32_t* row = out.labels.data() + static_cast<std::size_t>(runs[j].row) * w;
    std::fill(row + runs[j].c0, row + runs[j].c1, label);
  }
  return out;
}

}  // namespace kira
