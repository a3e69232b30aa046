// Weighted reciprocal rank fusion (RRF) of several ranked id lists.
#pragma once

#include <cstddef>
#include <vector>

#include "kira/index.hpp"

namespace kira {

// One ranked list, best first. Non-owning view; id -1 (search padding) is skipped.
struct RankingView {
  const id_t* ids = nullptr;
  std::size_t size = 0;
};

struct FusedRanking {
  std::vector<id_t> ids;        // fused order: score descending, ties to the smaller id
  std::vector<double> scores;   // sum_i w_i / (k + rank_i), ranks counted from 1
};

// score(id) = sum over rankings i containing id of weights[i] / (k + rank_i(id)), with
// rank_i the 1-based position of id's first (best) occurrence in ranking i; a repeat of
// an id inside one ranking adds nothing. Positions of skipped -1 entries still count.
// weights.size() == rankings.size(); weights >= 0 and finite; k > 0 and finite.
// At most limit results (SIZE_MAX: all). Throws std::invalid_argument for bad arguments.
// Deterministic: each id's terms are summed in ranking order.
// Thread safety: pure function, safe to call from any number of threads.
FusedRanking rrf_fuse(const std::vector<RankingView>& rankings,
                      const std::vector<double>& weights, double k, std::size_t limit);

}  // namespace kira
