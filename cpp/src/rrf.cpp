#include "kira/rrf.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>

namespace kira {

FusedRanking rrf_fuse(const std::vector<RankingView>& rankings,
                      const std::vector<double>& weights, double k, std::size_t limit) {
  if (weights.size() != rankings.size()) {
    throw std::invalid_argument("weights has " + std::to_string(weights.size()) +
                                " entries for " + std::to_string(rankings.size()) +
                                " rankings; pass one weight per ranking");
  }
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0.0) {
      throw std::invalid_argument("weights[" + std::to_string(i) + "] = " +
                                  std::to_string(weights[i]) +
                                  "; weights must be finite and >= 0");
    }
  }
  if (!std::isfinite(k) || k <= 0.0) {
    throw std::invalid_argument("k must be a finite number > 0 (the paper uses k = 60)");
  }

  std::size_t total = 0;
  for (const auto& r : rankings) total += r.size;

  // Open-addressing hash table id -> slot (linear probing, power-of-two capacity, load
  // <= 1/2). The empty key is -1, which is the padding id and never stored.
  unsigned bits = 4;
  while ((std::size_t{1} << bits) < 2 * total) ++bits;
  const std::size_t capacity = std::size_t{1} << bits;
  const unsigned shift = 64 - bits;  // Fibonacci hashing keeps the top bits
  std::vector<id_t> keys(capacity, -1);
  std::vector<std::uint32_t> slot_of(capacity);
  struct Fused {
    double score;
    id_t id;
    std::uint32_t last_ranking;  // ranking (1-based) that last scored this id: dedupe
  };
  std::vector<Fused> fused;
  fused.reserve(total);

  for (std::size_t i = 0; i < rankings.size(); ++i) {
    const RankingView& r = rankings[i];
    const double w = weights[i];
    const auto tag = static_cast<std::uint32_t>(i + 1);
    for (std::size_t pos = 0; pos < r.size; ++pos) {
      const id_t id = r.ids[pos];
      if (id == -1) continue;
      std::size_t h = static_cast<std::size_t>(
          (static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> shift);
      while (keys[h] != -1 && keys[h] != id) h = (h + 1) & (capacity - 1);
      if (keys[h] == -1) {
        keys[h] = id;
        slot_of[h] = static_cast<std::uint32_t>(fused.size());
        fused.push_back(Fused{0.0, id, 0});
      }
      Fused& f = fused[slot_of[h]];
      if (f.last_ranking == tag) continue;  // already counted at a better rank
      f.last_ranking = tag;
      f.score += w / (k + static_cast<double>(pos + 1));
    }
  }

  auto better = [](const Fused& a, const Fused& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.id < b.id;
  };
  const std::size_t n = std::min(limit, fused.size());
  if (n < fused.size()) {
    std::partial_sort(fused.begin(), fused.begin() + static_cast<std::ptrdiff_t>(n), fused.end(),
                      better);
  } else {
    std::sort(fused.begin(), fused.end(), better);
  }
  FusedRanking out;
  out.ids.resize(n);
  out.scores.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    out.ids[j] = fused[j].id;
    out.scores[j] = fused[j].score;
  }
  return out;
}

}  // namespace kira
