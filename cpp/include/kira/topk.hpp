// Bounded top-k selection with a heap: keeps the k best (score, id) pairs seen, ordered
// by score descending and, for equal scores, by id ascending (so results are
// deterministic whatever order candidates arrive in).
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "kira/index.hpp"

namespace kira {

class TopK {
 public:
  explicit TopK(std::size_t k) : k_(k) { heap_.reserve(k); }

  // Score a candidate must beat to enter (-inf until k are held).
  float threshold() const {
    return heap_.size() < k_ ? -std::numeric_limits<float>::infinity() : heap_.front().first;
  }

  void push(float score, id_t id) {
    if (k_ == 0) return;
    if (heap_.size() < k_) {
      heap_.emplace_back(score, id);
      std::push_heap(heap_.begin(), heap_.end(), worse_on_top);
    } else if (better(score, id, heap_.front().first, heap_.front().second)) {
      std::pop_heap(heap_.begin(), heap_.end(), worse_on_top);
      heap_.back() = {score, id};
      std::push_heap(heap_.begin(), heap_.end(), worse_on_top);
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

  void merge(const TopK& other) {
    for (const auto& e : other.heap_) push(e.first, e.second);
  }

  // Writes k results best first, padded with id -1 and score -inf.
  void write(id_t* ids, float* scores) {
    std::sort_heap(heap_.begin(), heap_.end(), worse_on_top);  // best first
    std::size_t i = 0;
    for (; i < heap_.size(); ++i) {
      ids[i] = heap_[i].second;
      scores[i] = heap_[i].first;
    }
    for (; i < k_; ++i) {
      ids[i] = -1;
      scores[i] = -std::numeric_limits<float>::infinity();
    }
  }

  std::size_t size() const { return heap_.size(); }

 private:
  static bool better(float sa, id_t ia, float sb, id_t ib) { return sa > sb || (sa == sb && ia < ib); }
  // Heap comparator: "a is better than b" puts the worst element on top.
  static bool worse_on_top(const std::pair<float, id_t>& a, const std::pair<float, id_t>& b) {
    return better(a.first, a.second, b.first, b.second);
  }

  std::size_t k_;
  std::vector<std::pair<float, id_t>> heap_;
};

}  // namespace kira
