#include "kira/rrf.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_map>

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
  std::unordered_map<id_t, std::uint32_t> slot;  // id -> index into the dense arrays
  slot.reserve(total);
  std::vector<id_t> ids;
  std::vector<double> scores;
  std::vector<std::uint32_t> last_ranking;  // ranking that last scored this id (dedupe)
  ids.reserve(total);
  scores.reserve(total);
  last_ranking.reserve(total);

  for (std::size_t i = 0; i < rankings.size(); ++i) {
    const RankingView& r = rankings[i];
    const double w = weights[i];
    const auto tag = static_cast<std::uint32_t>(i + 1);
    for (std::size_t pos = 0; pos < r.size; ++pos) {
      const id_t id = r.ids[pos];
      if (id == -1) continue;
      auto [it, inserted] = slot.try_emplace(id, static_cast<std::uint32_t>(ids.size()));
      if (inserted) {
        ids.push_back(id);
        scores.push_back(0.0);
        last_ranking.push_back(0);
      }
      const std::uint32_t s = it->second;
      if (last_ranking[s] == tag) continue;  // already counted at a better rank
      last_ranking[s] = tag;
      scores[s] += w / (k + static_cast<double>(pos + 1));
    }
  }

  std::vector<std::uint32_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0u);
  auto better = [&](std::uint32_t a, std::uint32_t b) {
    if (scores[a] != scores[b]) return scores[a] > scores[b];
    return ids[a] < ids[b];
  };
  const std::size_t n = std::min(limit, order.size());
  if (n < order.size()) {
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                      better);
  } else {
    std::sort(order.begin(), order.end(), better);
  }
  FusedRanking out;
  out.ids.resize(n);
  out.scores.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    out.ids[j] = ids[order[j]];
    out.scores[j] = scores[order[j]];
  }
  return out;
}

}  // namespace kira
