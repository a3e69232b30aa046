// HNSWIndex: approximate cosine search over a hierarchical navigable small-world graph
// (Malkov & Yashunin), with the neighbour-selection heuristic, f32/f16/i8 storage and
// tombstone removal.
//
// Thread safety: search, search_one, reconstruct, contains, ids, get_vectors, size and
// save take a shared lock and run concurrently with each other; add and remove take it
// exclusively. Inside one add, `threads` workers insert in parallel under per-node
// locks; with threads = 1 the graph is a deterministic function of (seed, insertion
// order). ef_search is an atomic setting and may change at any time.
//
// Removal marks the node as a tombstone: it still routes searches through the graph but
// is never returned, and its id may be added again as a new node. Tombstones are kept in
// saved files.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kira/groups.hpp"
#include "kira/index.hpp"
#include "kira/vector_store.hpp"

namespace kira {

class VisitedList;

class HNSWIndex final : public CosineIndex {
 public:
  struct Params {
    std::size_t M = 16;                // links per node on upper layers (2M on layer 0)
    std::size_t ef_construction = 200;  // candidate list size while inserting
    std::uint64_t seed = 0;            // seeds the layer assignment
  };

  HNSWIndex(std::size_t dim, Params params, Dtype dtype = Dtype::f32);
  ~HNSWIndex() override;

  std::size_t dim() const override { return dim_; }
  std::size_t size() const override;  // live (not removed) vectors
  Dtype dtype() const { return dtype_; }
  const Params& params() const { return params_; }
  std::size_t ef_search() const { return ef_search_.load(std::memory_order_relaxed); }
  // Throws std::invalid_argument for ef < 1.
  void set_ef_search(std::size_t ef);

  // As FlatIndex::add; threads: insertion workers (0 = all cores).
  void add(const id_t* ids, const float* vectors, std::size_t n, std::size_t threads);
  void remove(const id_t* ids, std::size_t n);
  // Top-k with candidate list max(ef, k), where ef = 0 means the index's ef_search (a
  // per-call ef leaves the shared setting alone, so concurrent callers may each use their
  // own). With allow, an allow set of at most max(1024, size / 10) live ids is searched
  // exactly; a larger one filters the graph search (only allowed ids enter the result
  // list). With groups, at most per_group results of one group enter the candidate list,
  // so k results from k / per_group groups or more come back without raising ef.
  void search(const float* queries, std::size_t m, std::size_t k, const IdFilter* allow,
              const GroupLimit* groups, std::size_t threads, id_t* out_ids, float* out_scores,
              std::size_t ef = 0) const;

  void search_one(const float* query, std::size_t k, const IdFilter* allow, id_t* ids,
                  float* scores, std::size_t ef) const override;
  bool reconstruct(id_t id, float* out) const override;
  bool contains(id_t id) const;
  std::vector<id_t> ids() const;
  void get_vectors(const id_t* ids, std::size_t n, float* out) const;
  std::size_t memory_bytes() const;

  void save(const std::string& path) const;
  static std::shared_ptr<HNSWIndex> load(const std::string& path);

 private:
  using Scored = std::pair<float, std::uint32_t>;  // (similarity, node)
  class VisitedPool;

  std::size_t max_links(int level) const { return level == 0 ? m0_ : params_.M; }
  std::uint32_t* links(std::uint32_t node, int level);
  const std::uint32_t* links(std::uint32_t node, int level) const;
  int random_level();

  template <bool Locked>
  std::uint32_t greedy(const QueryCode& q, std::uint32_t ep, float& ep_score, int from, int to) const;
  template <bool Locked>
  void search_layer(const QueryCode& q, std::uint32_t ep, float ep_score, std::size_t ef, int level,
                    const std::uint8_t* allowed, const GroupLimit* groups, VisitedList& visited,
                    std::vector<Scored>& out) const;
  // Keeps at most m of candidates (sorted best first) by the HNSW heuristic.
  void select_neighbors(std::vector<Scored>& candidates, std::size_t m, std::vector<float>& scratch) const;
  void insert(std::uint32_t node, const float* unit, VisitedList& visited);
  void write_links(std::uint32_t node, int level, std::vector<Scored>& chosen, std::vector<float>& scratch);
  void search_locked(const float* unit, std::size_t k, std::size_t ef, const std::uint8_t* allowed,
                     const GroupLimit* groups, VisitedList& visited, id_t* out_ids, float* out_scores) const;

  std::size_t dim_;
  Dtype dtype_;
  Params params_;
  std::size_t m0_;
  double level_mult_;
  std::atomic<std::size_t> ef_search_{64};

  mutable std::shared_mutex mutex_;
  VectorStore store_;
  std::vector<std::uint32_t> links0_;               // node * (m0 + 1): [count, links...]
  std::vector<std::vector<std::uint32_t>> upper_;   // node -> levels 1..L, each [count, M links]
  std::vector<std::uint8_t> level_;
  std::vector<std::uint8_t> deleted_;
  std::vector<id_t> node_ids_;
  std::unordered_map<id_t, std::size_t> node_of_;  // live ids only
  int max_level_ = -1;
  std::uint32_t entry_ = 0;
  std::uint64_t rng_state_;

  // Only during add: one lock per node and one for (entry_, max_level_).
  std::unique_ptr<std::mutex[]> node_locks_;
  bool parallel_insert_ = false;  // whether insert must take node_locks_
  std::unique_lock<std::mutex> lock_node(std::uint32_t node) const;
  std::mutex entry_mutex_;
  std::unique_ptr<VisitedPool> visited_;
};

}  // namespace kira
