// Bounded top-k selection with a heap: keeps the k best (score, id) pairs seen, ordered
// by score descending and, for equal scores, by id ascending (so results are
// deterministic whatever order candidates arrive in).
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "kira/groups.hpp"
#include "kira/index.hpp"

namespace kira {

class TopK {
 public:
  // limit: optional per-group cap. The result is then the best k candidates of which no
  // group holds more than limit->per_group (a candidate counts only when fewer than
  // per_group better candidates of its group were pushed). The map must outlive the TopK.
  explicit TopK(std::size_t k, const GroupLimit* limit = nullptr) : k_(k), limit_(limit) { heap_.reserve(k); }

  // Score a candidate must beat to enter (-inf until k are held).
  float threshold() const {
    return heap_.size() < k_ ? -std::numeric_limits<float>::infinity() : heap_.front().score;
  }

  void push(float score, id_t id) {
    if (k_ == 0) return;
    const bool full = heap_.size() >= k_;
    if (full && !better(score, id, heap_.front().score, heap_.front().id)) return;
    if (!limit_) {
      insert({score, id, 0}, full);
      return;
    }
    const id_t group = limit_->map->group(id);
    std::size_t members = 0, worst = 0;
    for (std::size_t i = 0; i < heap_.size(); ++i) {
      if (heap_[i].group != group) continue;
      if (members++ == 0 || worse_on_top(heap_[worst], heap_[i])) worst = i;
    }
    if (members < limit_->per_group) {
      insert({score, id, group}, full);
    } else if (better(score, id, heap_[worst].score, heap_[worst].id)) {
      // The group is at its cap: the candidate can only take its worst member's place.
      heap_[worst] = {score, id, group};
      std::make_heap(heap_.begin(), heap_.end(), worse_on_top);
    }
  }

  // Scores for rows, with ids looked up lazily: the common case (below threshold) costs
  // one comparison.
  template <class IdOf>
  void push_block(const float* scores, std::size_t n, IdOf id_of) {
    float t = threshold();
    for (std::size_t r = 0; r < n; ++r) {
      if (scores[r] >= t) {
        push(scores[r], id_of(r));
        t = threshold();
      }
    }
  }

  // Adds another TopK's results (same k and limit): top-k of the union of both inputs.
  void merge(const TopK& other) {
    for (const auto& e : other.heap_) push(e.score, e.id);
  }

  // Writes k results best first, padded with id -1 and score -inf.
  void write(id_t* ids, float* scores) {
    std::sort_heap(heap_.begin(), heap_.end(), worse_on_top);  // best first
    std::size_t i = 0;
    for (; i < heap_.size(); ++i) {
      ids[i] = heap_[i].id;
      scores[i] = heap_[i].score;
    }
    for (; i < k_; ++i) {
      ids[i] = -1;
      scores[i] = -std::numeric_limits<float>::infinity();
    }
  }

  std::size_t size() const { return heap_.size(); }

 private:
  struct Entry {
    float score;
    id_t id;
    id_t group;  // with a limit only
  };
  static bool better(float sa, id_t ia, float sb, id_t ib) { return sa > sb || (sa == sb && ia < ib); }
  // Heap comparator: "a is better than b" puts the worst element on top.
  static bool worse_on_top(const Entry& a, const Entry& b) { return better(a.score, a.id, b.score, b.id); }

  void insert(const Entry& e, bool full) {
    if (full) {
      std::pop_heap(heap_.begin(), heap_.end(), worse_on_top);
      heap_.back() = e;
    } else {
      heap_.push_back(e);
    }
    std::push_heap(heap_.begin(), heap_.end(), worse_on_top);
  }

  std::size_t k_;
  const GroupLimit* limit_;
  std::vector<Entry> heap_;
};

}  // namespace kira
