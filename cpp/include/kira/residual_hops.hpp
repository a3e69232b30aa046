// Residual multi-hop retrieval: re-query with what the previous hop already explained
// subtracted out, until a hop is confident, brings nothing new, or the hop budget is spent.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kira/index.hpp"

namespace kira {

struct HopOptions {
  double beta = 0.3;         // q' = normalize(q - beta * mean(vectors of the hop's results))
  std::size_t max_hops = 3;  // >= 1
  double confidence = 0.85;  // stop once a hop's confidence >= this
  std::size_t ef = 0;        // an HNSW index's candidate list per hop (0 = its ef_search); exact indexes ignore it
};

struct Hop {
  std::vector<id_t> ids;      // the hop's valid results (no -1 padding), best first
  std::vector<float> scores;  // their cosine scores
  float confidence = 0.0f;    // mean of scores; 0 when the hop found nothing
  std::vector<float> query;   // the unit query this hop searched with (dim floats)
  std::size_t new_ids = 0;    // how many of ids no earlier hop had returned
};

struct HopTrace {
  std::vector<Hop> hops;
  // "confidence" | "no_new" | "max_hops" | "zero_residual" (checked in that order after
  // each hop; "zero_residual": q - beta * mean vanished, only possible with beta >= 1).
  std::string stop_reason;
  std::vector<id_t> ids;                 // merged: best score per id, score desc, ties smaller id
  std::vector<float> scores;
  std::vector<std::int32_t> first_hop;   // 0-based hop in which each merged id first appeared
};

// query: dim() finite floats, non-zero (normalised here). k >= 1. allow may be null.
// Throws std::invalid_argument for bad arguments.
// Thread safety: as safe as concurrent index.search_one / reconstruct calls (both indexes
// allow concurrent searches); must not run while the index is being modified.
HopTrace residual_hops(const CosineIndex& index, const float* query, std::size_t k,
                       const HopOptions& options, const IdFilter* allow);

}  // namespace kira
