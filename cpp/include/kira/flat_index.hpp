// FlatIndex: exact cosine search by scanning every stored vector.
//
// Thread safety: every const method (search, search_one, reconstruct, contains, ids,
// get_vectors, size, save) takes a shared lock and may run concurrently with other
// const calls; add and remove take the lock exclusively, so they wait for running
// searches and block new ones until they finish.
#pragma once

#include <cstddef>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kira/groups.hpp"
#include "kira/index.hpp"
#include "kira/vector_store.hpp"

namespace kira {

class FlatIndex final : public CosineIndex {
 public:
  explicit FlatIndex(std::size_t dim, Dtype dtype = Dtype::f32);

  std::size_t dim() const override { return dim_; }
  std::size_t size() const override;
  Dtype dtype() const { return dtype_; }

  // Adds n row-major vectors (n x dim), each normalised to unit length. Throws
  // std::invalid_argument, leaving the index unchanged, when an id is already present or
  // repeated in ids, or a row is zero or not finite.
  void add(const id_t* ids, const float* vectors, std::size_t n);
  // Removes ids; throws std::invalid_argument (index unchanged) for an unknown or
  // repeated id.
  void remove(const id_t* ids, std::size_t n);
  // Top-k for m row-major queries (normalised here): out_ids / out_scores are m x k,
  // best first, padded with -1 / -inf. allow and groups (a per-group cap) may be null.
  // threads: 0 = all cores.
  void search(const float* queries, std::size_t m, std::size_t k, const IdFilter* allow,
              const GroupLimit* groups, std::size_t threads, id_t* out_ids, float* out_scores) const;

  void search_one(const float* query, std::size_t k, const IdFilter* allow, id_t* ids,
                  float* scores, std::size_t ef) const override;  // exact: ef is ignored
  bool reconstruct(id_t id, float* out) const override;

  bool contains(id_t id) const;
  std::vector<id_t> ids() const;
  // Decoded unit vectors of ids into out (n x dim); throws for an unknown id.
  void get_vectors(const id_t* ids, std::size_t n, float* out) const;
  std::size_t memory_bytes() const;

  void save(const std::string& path) const;
  static std::shared_ptr<FlatIndex> load(const std::string& path);

 private:
  void search_locked(const float* units, std::size_t m, std::size_t k, const IdFilter* allow,
                     const GroupLimit* groups, std::size_t threads, id_t* out_ids, float* out_scores) const;

  std::size_t dim_;
  Dtype dtype_;
  mutable std::shared_mutex mutex_;
  VectorStore store_;
  std::vector<id_t> slot_ids_;                  // slot -> id
  std::unordered_map<id_t, std::size_t> slot_of_;  // id -> slot
};

// Shared validation used by both indexes (throw std::invalid_argument).
void check_new_ids(const id_t* ids, std::size_t n, const std::unordered_map<id_t, std::size_t>& present);
void check_known_ids(const id_t* ids, std::size_t n, const std::unordered_map<id_t, std::size_t>& present,
                     bool reject_repeats);

}  // namespace kira
