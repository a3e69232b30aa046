#include "kira/compound.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace kira {
namespace {

const char* kind_name(GroupKind kind) {
  return kind == GroupKind::temporal ? "temporal sequence" : "multiview set";
}

}  // namespace

std::size_t CompoundGroups::add(GroupKind kind, const std::vector<id_t>& members) {
  if (members.empty()) {
    throw std::invalid_argument(std::string("a ") + kind_name(kind) +
                                " needs at least one member id");
  }
  std::unordered_set<id_t> seen;
  seen.reserve(members.size());
  for (id_t id : members) {
    if (id == -1) {
      throw std::invalid_argument("id -1 is the padding id and cannot be a group member");
    }
    if (!seen.insert(id).second) {
      throw std::invalid_argument("id " + std::to_string(id) + " appears twice in this " +
                                  kind_name(kind) + "; list each member once");
    }
  }
  std::unique_lock lock(mutex_);
  Kind& k = kinds_[static_cast<int>(kind)];
  for (id_t id : members) {
    auto it = k.group_of.find(id);
    if (it != k.group_of.end()) {
      throw std::invalid_argument("id " + std::to_string(id) + " is already in " +
                                  kind_name(kind) + " " + std::to_string(it->second) +
                                  "; an id belongs to at most one " + kind_name(kind) +
                                  " (merge the groups into one call)");
    }
  }
  const auto number = static_cast<std::uint32_t>(k.groups.size());
  k.groups.push_back(members);
  for (id_t id : members) k.group_of.emplace(id, number);
  return number;
}

std::vector<id_t> CompoundGroups::members_of(GroupKind kind, id_t id) const {
  std::shared_lock lock(mutex_);
  const Kind& k = this->kind(kind);
  auto it = k.group_of.find(id);
  if (it == k.group_of.end()) return {};
  return k.groups[it->second];
}

std::size_t CompoundGroups::count(GroupKind kind) const {
  std::shared_lock lock(mutex_);
  return this->kind(kind).groups.size();
}

bool CompoundGroups::contains(id_t id) const {
  std::shared_lock lock(mutex_);
  return kinds_[0].group_of.count(id) > 0 || kinds_[1].group_of.count(id) > 0;
}

CompoundGroups::Expanded CompoundGroups::expand(const id_t* ids, const float* scores,
                                                std::size_t n, float temporal_decay,
                                                float multiview_decay) const {
  for (float d : {temporal_decay, multiview_decay}) {
    if (!std::isfinite(d) || d < 0.0f || d > 1.0f) {
      throw std::invalid_argument("decays must lie in [0, 1] (the paper uses 0.8 and 0.7)");
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (ids[i] != -1 && !std::isfinite(scores[i])) {
      throw std::invalid_argument("scores[" + std::to_string(i) +
                                  "] is NaN or inf; pass finite scores (id -1 may carry -inf)");
    }
  }
  struct Entry {
    float score;
    id_t origin;
    bool retrieved;
  };
  std::unordered_map<id_t, std::size_t> slot;
  std::vector<id_t> out_ids;
  std::vector<Entry> entries;
  auto offer = [&](id_t id, float score, id_t origin, bool retrieved) {
    auto [it, inserted] = slot.try_emplace(id, out_ids.size());
    if (inserted) {
      out_ids.push_back(id);
      entries.push_back(Entry{score, origin, retrieved});
      return;
    }
    Entry& e = entries[it->second];
    if (e.retrieved && !retrieved) return;  // retrieved ids keep their own score
    if (retrieved && !e.retrieved) { e = Entry{score, origin, true}; return; }
    if (score > e.score || (score == e.score && origin < e.origin)) e = Entry{score, origin, retrieved};
  };
  // Retrieved ids first (so their scores are final), then what they pull in.
  for (std::size_t i = 0; i < n; ++i) {
    if (ids[i] != -1) offer(ids[i], scores[i], ids[i], true);
  }
  std::shared_lock lock(mutex_);
  const std::size_t retrieved = out_ids.size();
  for (std::size_t j = 0; j < retrieved; ++j) {
    const id_t id = out_ids[j];
    const float score = entries[j].score;
    for (int kind = 0; kind < 2; ++kind) {
      const Kind& k = kinds_[kind];
      auto it = k.group_of.find(id);
      if (it == k.group_of.end()) continue;
      const float decayed = score * (kind == 0 ? temporal_decay : multiview_decay);
      for (id_t member : k.groups[it->second]) {
        if (member != id) offer(member, decayed, id, false);
      }
    }
  }
  lock.unlock();

  std::vector<std::size_t> order(out_ids.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (entries[a].score != entries[b].score) return entries[a].score > entries[b].score;
    return out_ids[a] < out_ids[b];
  });
  Expanded out;
  out.ids.resize(order.size());
  out.scores.resize(order.size());
  out.origin.resize(order.size());
  for (std::size_t j = 0; j < order.size(); ++j) {
    out.ids[j] = out_ids[order[j]];
    out.scores[j] = entries[order[j]].score;
    out.origin[j] = entries[order[j]].origin;
  }
  return out;
}

}  // namespace kira
