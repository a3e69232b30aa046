#include "kira/groups.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kira {

GroupMap::GroupMap(const id_t* ids, const id_t* groups, std::size_t n) : size_(n) {
  id_t max_id = -1;
  for (std::size_t i = 0; i < n; ++i) {
    if (ids[i] < 0) throw std::invalid_argument("ids must be non-negative; got " + std::to_string(ids[i]) +
                                                " at position " + std::to_string(i));
    if (groups[i] < 0) throw std::invalid_argument("groups must be non-negative; got " +
                                                   std::to_string(groups[i]) + " at position " + std::to_string(i));
    max_id = std::max(max_id, ids[i]);
  }
  // An array when it is at most about twice the size of a hash map of the same ids.
  const bool dense = max_id < 0 || static_cast<std::size_t>(max_id) <= 4 * n + 1024;
  if (dense) dense_.assign(static_cast<std::size_t>(max_id + 1), -1);
  else sparse_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    bool fresh;
    if (dense) {
      id_t& slot = dense_[static_cast<std::size_t>(ids[i])];
      fresh = slot < 0;
      slot = groups[i];
    } else {
      fresh = sparse_.emplace(ids[i], groups[i]).second;
    }
    if (!fresh) throw std::invalid_argument("id " + std::to_string(ids[i]) + " appears twice in ids; label each id once");
  }
}

}  // namespace kira
