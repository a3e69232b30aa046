// Per-group result caps ("at most 2 chunks of one document"): GroupMap labels ids with a
// group, GroupLimit pairs a map with the cap a search applies. A capped search returns
// the best k results among which no group appears more than per_group times; it is what
// a search followed by a per-group cut would return had it fetched enough candidates,
// without having to guess how many that is.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "kira/index.hpp"

namespace kira {

// id -> group label (>= 0). Ids without a label are each a group of their own. Immutable
// after construction, so it is safe to share between threads. Dense ids (the usual case:
// database row ids) are looked up in an array, others in a hash map.
class GroupMap {
 public:
  // Throws std::invalid_argument for a negative id or group, or an id given twice.
  GroupMap(const id_t* ids, const id_t* groups, std::size_t n);

  id_t group(id_t id) const {
    if (id >= 0 && static_cast<std::size_t>(id) < dense_.size()) {
      const id_t g = dense_[static_cast<std::size_t>(id)];
      return g >= 0 ? g : -1 - id;
    }
    if (!sparse_.empty()) {
      const auto it = sparse_.find(id);
      if (it != sparse_.end()) return it->second;
    }
    return -1 - id;  // unlabelled: a group of its own (negative, so never a real label)
  }
  std::size_t size() const { return size_; }

 private:
  std::vector<id_t> dense_;  // id -> group, -1 = unlabelled
  std::unordered_map<id_t, id_t> sparse_;
  std::size_t size_ = 0;
};

struct GroupLimit {
  const GroupMap* map;
  std::size_t per_group;  // >= 1
};

}  // namespace kira
