// Weighted reciprocal rank fusion (RRF) of several ranked id lists, chunk by chunk or with
// each document counted once per ranking.
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

// One ranked list with the document of each entry: documents[pos] is ids[pos]'s document id
// (>= 0), or -1 when the chunk is a document of its own (its document id is then its own id).
// Non-owning view; documents has size entries; an id -1 entry is padding, its document ignored.
struct DocumentRankingView {
  const id_t* ids = nullptr;
  const id_t* documents = nullptr;
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

// Weighted RRF with each document counted once per ranking:
//   S(D)  = sum over rankings i listing a chunk of D of weights[i] / (k + drank_i(D)), with
//           drank_i(D) the 1-based rank of D among the distinct documents of ranking i in order
//           of first appearance (the ranking's padding, if any, takes one such rank, at its
//           first -1, as though it were one document that scores nothing);
//   s(c)  = rrf_fuse's chunk-level score of chunk c;
//   score(c) = S(doc(c)) * (s(c) / max over the fused chunks c' of doc(c) of s(c'))  (0 when that max is 0).
// Every fused chunk is returned (at most limit), by score descending, ties in rrf_fuse's order
// (chunk-level score descending, then the smaller id). A chunk's document must be the same
// wherever it is listed. Throws std::invalid_argument for bad arguments (as rrf_fuse, and a
// document id < -1 or a chunk given two different documents). Deterministic; pure function.
FusedRanking rrf_fuse_documents(const std::vector<DocumentRankingView>& rankings,
                                const std::vector<double>& weights, double k, std::size_t limit);

}  // namespace kira
