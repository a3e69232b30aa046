// The cosine-index interface shared by FlatIndex and HNSWIndex, and used by the
// retrieval algorithms (residual hops) that only need to search and read vectors back.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kira {

using id_t = std::int64_t;

// Largest vector size an index accepts (at construction and in a file): 2^20 floats.
inline constexpr std::size_t kMaxDim = std::size_t{1} << 20;
// Largest HNSW candidate list (ef_construction, ef_search, a per-call ef): beyond it a
// graph search reserves memory for nothing a graph could use (a mutated file asked 2^60).
inline constexpr std::size_t kMaxEf = std::size_t{1} << 20;

// A set of ids a search may return ("allow"). Immutable after construction, so it is
// safe to share between threads.
class IdFilter {
 public:
  IdFilter() = default;
  explicit IdFilter(std::vector<id_t> ids) : ids_(std::move(ids)) {
    std::sort(ids_.begin(), ids_.end());
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  }
  bool contains(id_t id) const { return std::binary_search(ids_.begin(), ids_.end(), id); }
  const std::vector<id_t>& ids() const { return ids_; }
  std::size_t size() const { return ids_.size(); }

 private:
  std::vector<id_t> ids_;  // sorted, unique
};

// Cosine similarity over unit-normalised vectors. Implementations normalise on add.
class CosineIndex {
 public:
  virtual ~CosineIndex() = default;
  virtual std::size_t dim() const = 0;
  virtual std::size_t size() const = 0;
  // Top-k for one unit-norm query of dim() floats. Writes exactly k results into ids and
  // scores, best first, padding with id -1 and score -inf. allow may be null. ef: the
  // candidate list of an approximate index for this call (0 = its own setting); an exact
  // index ignores it.
  // Thread safety: may run concurrently with other searches.
  virtual void search_one(const float* query, std::size_t k, const IdFilter* allow,
                          id_t* ids, float* scores, std::size_t ef) const = 0;
  // Decodes the stored (unit-norm) vector of id into out[dim()]; false for an unknown id.
  virtual bool reconstruct(id_t id, float* out) const = 0;
};

}  // namespace kira
