#include "kira/residual_hops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace kira {
namespace {

// Scales v to unit length in place; returns the norm it had (computed in double).
double normalize(std::vector<float>& v) {
  double sq = 0.0;
  for (float x : v) sq += static_cast<double>(x) * x;
  const double norm = std::sqrt(sq);
  if (norm > 0.0) {
    for (float& x : v) x = static_cast<float>(x / norm);
  }
  return norm;
}

}  // namespace

HopTrace residual_hops(const CosineIndex& index, const float* query, std::size_t k,
                       const HopOptions& options, const IdFilter* allow) {
  const std::size_t dim = index.dim();
  if (k < 1) throw std::invalid_argument("k must be >= 1");
  if (options.max_hops < 1) throw std::invalid_argument("max_hops must be >= 1");
  if (!std::isfinite(options.beta) || options.beta < 0.0) {
    throw std::invalid_argument("beta must be finite and >= 0 (the paper uses 0.3)");
  }
  if (std::isnan(options.confidence)) {
    throw std::invalid_argument("confidence must be a number (the paper uses 0.85)");
  }
  std::vector<float> q(query, query + dim);
  for (float x : q) {
    if (!std::isfinite(x)) {
      throw std::invalid_argument("query has a NaN or inf; pass a finite vector");
    }
  }
  if (normalize(q) == 0.0) {
    throw std::invalid_argument("query is the zero vector; pass a non-zero query");
  }

  HopTrace trace;
  std::unordered_map<id_t, std::size_t> merged;  // id -> slot in trace.ids
  std::vector<id_t> ids(k);
  std::vector<float> scores(k);
  std::vector<float> vec(dim);
  std::vector<double> mean(dim);

  for (std::size_t h = 0; h < options.max_hops; ++h) {
    index.search_one(q.data(), k, allow, ids.data(), scores.data(), options.ef);
    Hop hop;
    hop.query = q;
    double sum = 0.0;
    for (std::size_t j = 0; j < k; ++j) {
      if (ids[j] == -1) continue;
      hop.ids.push_back(ids[j]);
      hop.scores.push_back(scores[j]);
      sum += scores[j];
      auto [it, inserted] = merged.try_emplace(ids[j], trace.ids.size());
      if (inserted) {
        ++hop.new_ids;
        trace.ids.push_back(ids[j]);
        trace.scores.push_back(scores[j]);
        trace.first_hop.push_back(static_cast<std::int32_t>(h));
      } else if (scores[j] > trace.scores[it->second]) {
        trace.scores[it->second] = scores[j];
      }
    }
    const std::size_t found = hop.ids.size();
    hop.confidence = found ? static_cast<float>(sum / static_cast<double>(found)) : 0.0f;
    const bool confident = found > 0 && static_cast<double>(hop.confidence) >= options.confidence;
    const bool nothing_new = hop.new_ids == 0;
    trace.hops.push_back(std::move(hop));
    if (confident) { trace.stop_reason = "confidence"; break; }
    if (nothing_new) { trace.stop_reason = "no_new"; break; }
    if (h + 1 == options.max_hops) { trace.stop_reason = "max_hops"; break; }

    // q <- normalize(q - beta * mean(unit vectors of this hop's results)).
    std::fill(mean.begin(), mean.end(), 0.0);
    for (id_t id : trace.hops.back().ids) {
      if (!index.reconstruct(id, vec.data())) {
        throw std::runtime_error("index returned id " + std::to_string(id) +
                                 " but cannot reconstruct it (was it removed concurrently?)");
      }
      for (std::size_t d = 0; d < dim; ++d) mean[d] += vec[d];
    }
    const double scale = options.beta / static_cast<double>(found);
    for (std::size_t d = 0; d < dim; ++d) {
      q[d] = static_cast<float>(static_cast<double>(q[d]) - scale * mean[d]);
    }
    // Relative to |q| = 1 before the update: below this the direction is noise.
    if (normalize(q) <= 1e-6) {
      trace.stop_reason = "zero_residual";
      break;
    }
  }

  // Merged: best score per id, score descending, ties to the smaller id.
  std::vector<std::size_t> order(trace.ids.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (trace.scores[a] != trace.scores[b]) return trace.scores[a] > trace.scores[b];
    return trace.ids[a] < trace.ids[b];
  });
  std::vector<id_t> sorted_ids(order.size());
  std::vector<float> sorted_scores(order.size());
  std::vector<std::int32_t> sorted_first(order.size());
  for (std::size_t j = 0; j < order.size(); ++j) {
    sorted_ids[j] = trace.ids[order[j]];
    sorted_scores[j] = trace.scores[order[j]];
    sorted_first[j] = trace.first_hop[order[j]];
  }
  trace.ids = std::move(sorted_ids);
  trace.scores = std::move(sorted_scores);
  trace.first_hop = std::move(sorted_first);
  return trace;
}

}  // namespace kira
