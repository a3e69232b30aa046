// Capacity growth for containers that indexes append to.
//
// An add reserves room for everything it will append before changing anything, so a
// failed allocation leaves the index as it was. Reserving exactly size + n would make
// every add reallocate and copy the whole container (a one-vector add to a 100k-row
// index copied 100 MB); these reserve at least 1.5x the current capacity instead, so
// n single-row adds cost O(n) copies in total, as push_back's growth would.
#pragma once

#include <algorithm>
#include <cstddef>

namespace kira {

// Ensures v.capacity() >= needed, growing geometrically.
template <class Vector>
void reserve_growing(Vector& v, std::size_t needed) {
  if (needed <= v.capacity()) return;
  v.reserve(std::max(needed, v.capacity() + v.capacity() / 2));
}

// Ensures an unordered map can hold `needed` elements without a rehash, growing geometrically.
template <class Map>
void reserve_growing_map(Map& m, std::size_t needed) {
  if (static_cast<double>(needed) <= static_cast<double>(m.bucket_count()) * m.max_load_factor()) return;
  m.reserve(std::max(needed, m.size() + m.size() / 2));
}

}  // namespace kira
