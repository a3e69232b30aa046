// Compound documents: temporal sequences and multiview sets, and the expansion of a
// retrieved list so that each retrieved member pulls in the rest of its groups.
#pragma once

#include <cstddef>
#include <cstdint>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "kira/index.hpp"

namespace kira {

enum class GroupKind { temporal = 0, multiview = 1 };

// Registry of groups. Rule: an id may belong to at most one temporal sequence and at most
// one multiview set (one of each is fine). Thread safety: every method may be called from
// any number of threads at once (reads share a lock, registration takes it exclusively).
class CompoundGroups {
 public:
  // Registers a group; returns its 0-based number among groups of that kind. Throws
  // std::invalid_argument (and changes nothing) when members is empty, holds -1 or a
  // repeated id, or an id already in a group of this kind.
  std::size_t add(GroupKind kind, const std::vector<id_t>& members);
  // Members (registration order) of the group of that kind holding id; empty if none.
  std::vector<id_t> members_of(GroupKind kind, id_t id) const;
  std::size_t count(GroupKind kind) const;
  bool contains(id_t id) const;  // in any group

  struct Expanded {
    std::vector<id_t> ids;      // score desc, ties to the smaller id
    std::vector<float> scores;
    std::vector<id_t> origin;   // the retrieved id that pulled each one in (itself if retrieved)
  };
  // Each retrieved (ids[i], scores[i]) (id -1 skipped; other scores must be finite; a repeated
  // id keeps its best score)
  // keeps its score; every other member of its temporal sequence gets temporal_decay *
  // score and of its multiview set multiview_decay * score; a pulled id keeps the best
  // offer (equal offers: the smaller origin id). One level only: pulled ids pull nothing.
  Expanded expand(const id_t* ids, const float* scores, std::size_t n, float temporal_decay,
                  float multiview_decay) const;

 private:
  struct Kind {
    std::vector<std::vector<id_t>> groups;
    std::unordered_map<id_t, std::uint32_t> group_of;
  };
  const Kind& kind(GroupKind k) const { return kinds_[static_cast<int>(k)]; }
  Kind kinds_[2];
  mutable std::shared_mutex mutex_;
};

}  // namespace kira
