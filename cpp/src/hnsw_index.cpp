#include "kira/hnsw_index.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kira/flat_index.hpp"  // check_new_ids, check_known_ids
#include "kira/growth.hpp"
#include "kira/index_file.hpp"
#include "kira/parallel.hpp"
#include "kira/topk.hpp"

namespace kira {

// Marks visited nodes with a generation tag, so clearing costs nothing per search.
class VisitedList {
 public:
  void reset(std::size_t n) {
    if (mark_.size() < n) {
      mark_.assign(n + n / 4 + 16, 0);
      tag_ = 0;
    }
    if (++tag_ == 0) {
      std::fill(mark_.begin(), mark_.end(), 0);
      tag_ = 1;
    }
  }
  // True the first time node is seen since reset.
  bool visit(std::uint32_t node) {
    if (mark_[node] == tag_) return false;
    mark_[node] = tag_;
    return true;
  }

 private:
  std::vector<std::uint16_t> mark_;
  std::uint16_t tag_ = 0;
};

class HNSWIndex::VisitedPool {
 public:
  std::unique_ptr<VisitedList> acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return std::make_unique<VisitedList>();
    auto v = std::move(free_.back());
    free_.pop_back();
    return v;
  }
  void release(std::unique_ptr<VisitedList> v) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(v));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<VisitedList>> free_;
};

namespace {

// Min-heap of (sim, node): the worst kept result on top.
using Scored = std::pair<float, std::uint32_t>;
struct WorstOnTop {
  bool operator()(const Scored& a, const Scored& b) const { return a.first > b.first; }
};
struct BestOnTop {
  bool operator()(const Scored& a, const Scored& b) const { return a.first < b.first; }
};

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct LinkCopy {
  std::uint32_t n = 0;
  std::uint32_t ids[513];
};

}  // namespace

HNSWIndex::HNSWIndex(std::size_t dim, Params params, Dtype dtype)
    : dim_(dim), dtype_(dtype), params_(params), store_(dim, dtype), rng_state_(params.seed),
      visited_(std::make_unique<VisitedPool>()) {
  if (params_.M < 2 || params_.M > 256) throw std::invalid_argument("M must be between 2 and 256");
  if (params_.ef_construction < 1 || params_.ef_construction > kMaxEf) {
    throw std::invalid_argument("ef_construction must be between 1 and " + std::to_string(kMaxEf));
  }
  m0_ = 2 * params_.M;
  level_mult_ = 1.0 / std::log(static_cast<double>(params_.M));
}

HNSWIndex::~HNSWIndex() = default;

std::size_t HNSWIndex::size() const {
  std::shared_lock lock(mutex_);
  return node_of_.size();
}

void HNSWIndex::set_ef_search(std::size_t ef) {
  if (ef < 1 || ef > kMaxEf) throw std::invalid_argument("ef_search must be between 1 and " + std::to_string(kMaxEf));
  ef_search_.store(ef, std::memory_order_relaxed);
}

std::unique_lock<std::mutex> HNSWIndex::lock_node(std::uint32_t node) const {
  return parallel_insert_ ? std::unique_lock<std::mutex>(node_locks_[node]) : std::unique_lock<std::mutex>();
}

std::uint32_t* HNSWIndex::links(std::uint32_t node, int level) {
  if (level == 0) return links0_.data() + static_cast<std::size_t>(node) * (m0_ + 1);
  return upper_[node].data() + static_cast<std::size_t>(level - 1) * (params_.M + 1);
}

const std::uint32_t* HNSWIndex::links(std::uint32_t node, int level) const {
  return const_cast<HNSWIndex*>(this)->links(node, level);
}

int HNSWIndex::random_level() {
  const double u = (static_cast<double>(splitmix64(rng_state_) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double level = -std::log(u) * level_mult_;
  return static_cast<int>(std::min(level, 30.0));
}

template <bool Locked>
std::uint32_t HNSWIndex::greedy(const QueryCode& q, std::uint32_t ep, float& ep_score, int from, int to) const {
  LinkCopy copy;
  for (int level = from; level > to; --level) {
    bool changed = true;
    while (changed) {
      changed = false;
      {
        std::unique_lock<std::mutex> lock;
        if (Locked) lock = std::unique_lock<std::mutex>(node_locks_[ep]);
        const std::uint32_t* l = links(ep, level);
        copy.n = l[0];
        std::copy(l + 1, l + 1 + copy.n, copy.ids);
      }
      for (std::uint32_t i = 0; i < copy.n; ++i) q.prefetch(copy.ids[i]);
      for (std::uint32_t i = 0; i < copy.n; ++i) {
        const float s = q.score(copy.ids[i]);
        if (s > ep_score) {
          ep_score = s;
          ep = copy.ids[i];
          changed = true;
        }
      }
    }
  }
  return ep;
}

template <bool Locked>
void HNSWIndex::search_layer(const QueryCode& q, std::uint32_t ep, float ep_score, std::size_t ef, int level,
                             const std::uint8_t* allowed, const GroupLimit* groups, VisitedList& visited,
                             std::vector<Scored>& out) const {
  // allowed: per node, 1 if it may enter the results (null = every node).
  // groups: at most groups->per_group results of one group (null = no cap).
  // Two binary heaps: candidates (best on top) and results (worst on top, at most ef).
  std::vector<Scored> candidates, results;
  candidates.reserve(4 * ef + 64);
  results.reserve(ef + 1);
  const BestOnTop best_on_top;
  const WorstOnTop worst_on_top;
  const bool filtered = allowed != nullptr || groups != nullptr;  // results may stay short of ef
  std::unordered_map<id_t, std::size_t> members;  // with groups: group -> results it holds
  auto group_of = [&](std::uint32_t node) { return groups->map->group(node_ids_[node]); };
  // Adds (s, node) to results, under the group cap: a candidate whose group is full may
  // only replace that group's worst result.
  auto admit = [&](float s, std::uint32_t node) {
    if (!groups) {
      results.emplace_back(s, node);
      std::push_heap(results.begin(), results.end(), worst_on_top);
    } else {
      const id_t g = group_of(node);
      std::size_t& held = members[g];
      if (held >= groups->per_group) {
        std::size_t worst = results.size();
        for (std::size_t i = 0; i < results.size(); ++i)
          if (group_of(results[i].second) == g && (worst == results.size() || results[i].first < results[worst].first))
            worst = i;
        if (!(s > results[worst].first)) return;
        results[worst] = Scored(s, node);
        std::make_heap(results.begin(), results.end(), worst_on_top);
        return;
      }
      ++held;
      results.emplace_back(s, node);
      std::push_heap(results.begin(), results.end(), worst_on_top);
    }
    if (results.size() > ef) {
      std::pop_heap(results.begin(), results.end(), worst_on_top);
      if (groups) --members[group_of(results.back().second)];
      results.pop_back();
    }
  };
  visited.reset(level_.size());
  visited.visit(ep);
  candidates.emplace_back(ep_score, ep);
  float bound = -std::numeric_limits<float>::infinity();
  if (!allowed || allowed[ep]) {
    admit(ep_score, ep);
    bound = ep_score;
  }
  LinkCopy copy;
  while (!candidates.empty()) {
    const Scored c = candidates.front();
    if (c.first < bound && (results.size() >= ef || !filtered)) break;
    std::pop_heap(candidates.begin(), candidates.end(), best_on_top);
    candidates.pop_back();
    {
      std::unique_lock<std::mutex> lock;
      if (Locked) lock = std::unique_lock<std::mutex>(node_locks_[c.second]);
      const std::uint32_t* l = links(c.second, level);
      copy.n = 0;
      for (std::uint32_t i = 1; i <= l[0]; ++i)
        if (visited.visit(l[i])) copy.ids[copy.n++] = l[i];
    }
    for (std::uint32_t i = 0; i < copy.n; ++i) q.prefetch(copy.ids[i]);
    float sims[4];
    for (std::uint32_t i = 0; i < copy.n; ++i) {
      const std::uint32_t nb = copy.ids[i];
      if ((i & 3) == 0) {  // score the next four neighbours together
        if (i + 4 <= copy.n) {
          q.score4(copy.ids + i, sims);
        } else {
          for (std::uint32_t j = i; j < copy.n; ++j) sims[j - i] = q.score(copy.ids[j]);
        }
      }
      const float s = sims[i & 3];
      if (results.size() < ef || s > bound) {
        candidates.emplace_back(s, nb);
        std::push_heap(candidates.begin(), candidates.end(), best_on_top);
        if (!allowed || allowed[nb]) {
          admit(s, nb);
          bound = results.front().first;
        }
      }
    }
  }
  out.assign(results.begin(), results.end());
  std::sort(out.begin(), out.end(), [](const Scored& x, const Scored& y) { return x.first > y.first; });  // best first
}

void HNSWIndex::select_neighbors(std::vector<Scored>& candidates, std::size_t m, std::vector<float>& scratch) const {
  if (candidates.size() <= m) return;
  std::vector<Scored> kept;
  kept.reserve(m);
  for (const Scored& c : candidates) {
    // Keep c only if it is closer to the base than to every neighbour kept so far.
    const QueryCode qc(store_, c.second, scratch);
    bool good = true;
    for (const Scored& r : kept) {
      if (qc.score(r.second) > c.first) {
        good = false;
        break;
      }
    }
    if (good) {
      kept.push_back(c);
      if (kept.size() >= m) break;
    }
  }
  candidates.swap(kept);
}

// Sets node's links at level to `chosen` merged with any links other threads added
// meanwhile, pruned to the level's capacity.
void HNSWIndex::write_links(std::uint32_t node, int level, std::vector<Scored>& chosen, std::vector<float>& scratch) {
  const auto lock = lock_node(node);
  std::uint32_t* l = links(node, level);
  const std::size_t cap = max_links(level);
  if (l[0] != 0) {
    std::vector<float> tmp;
    const QueryCode qn(store_, node, tmp);
    for (std::uint32_t i = 1; i <= l[0]; ++i) {
      const std::uint32_t x = l[i];
      if (std::none_of(chosen.begin(), chosen.end(), [x](const Scored& s) { return s.second == x; }))
        chosen.emplace_back(qn.score(x), x);
    }
    std::sort(chosen.begin(), chosen.end(), [](const Scored& a, const Scored& b) { return a.first > b.first; });
    select_neighbors(chosen, cap, scratch);
  }
  l[0] = static_cast<std::uint32_t>(std::min(cap, chosen.size()));
  for (std::uint32_t i = 0; i < l[0]; ++i) l[i + 1] = chosen[i].second;
}

void HNSWIndex::insert(std::uint32_t node, const float* unit, VisitedList& visited) {
  const int level = level_[node];
  const QueryCode q(store_, unit);
  std::unique_lock<std::mutex> top_lock(entry_mutex_);
  const int top = max_level_;
  std::uint32_t ep = entry_;
  if (top < 0) {
    entry_ = node;
    max_level_ = level;
    return;
  }
  if (level <= top) top_lock.unlock();  // only a new top layer keeps it to the end

  float ep_score = q.score(ep);
  ep = parallel_insert_ ? greedy<true>(q, ep, ep_score, top, level) : greedy<false>(q, ep, ep_score, top, level);
  std::vector<Scored> found, chosen, pruned;
  std::vector<float> scratch;
  for (int l = std::min(level, top); l >= 0; --l) {
    if (parallel_insert_) {
      search_layer<true>(q, ep, ep_score, params_.ef_construction, l, nullptr, nullptr, visited, found);
    } else {
      search_layer<false>(q, ep, ep_score, params_.ef_construction, l, nullptr, nullptr, visited, found);
    }
    chosen = found;
    select_neighbors(chosen, params_.M, scratch);
    write_links(node, l, chosen, scratch);
    const std::size_t cap = max_links(l);
    for (const Scored& nb : chosen) {
      const auto lock = lock_node(nb.second);
      std::uint32_t* nl = links(nb.second, l);
      if (std::find(nl + 1, nl + 1 + nl[0], node) != nl + 1 + nl[0]) continue;
      if (nl[0] < cap) {
        nl[1 + nl[0]++] = node;
        continue;
      }
      // Full: re-select among the old links and the new node, as seen from nb.
      const QueryCode qn(store_, nb.second, scratch);
      pruned.clear();
      pruned.emplace_back(nb.first, node);
      for (std::uint32_t i = 1; i <= nl[0]; ++i) pruned.emplace_back(qn.score(nl[i]), nl[i]);
      std::sort(pruned.begin(), pruned.end(), [](const Scored& a, const Scored& b) { return a.first > b.first; });
      std::vector<float> scratch2;
      select_neighbors(pruned, cap, scratch2);
      nl[0] = static_cast<std::uint32_t>(pruned.size());
      for (std::size_t i = 0; i < pruned.size(); ++i) nl[i + 1] = pruned[i].second;
    }
    if (!found.empty()) {
      ep = found.front().second;
      ep_score = found.front().first;
    }
  }
  if (level > top) {
    entry_ = node;
    max_level_ = level;
  }
}

void HNSWIndex::add(const id_t* ids, const float* vectors, std::size_t n, std::size_t threads) {
  if (n == 0) return;
  if (n > std::numeric_limits<std::uint32_t>::max() - 1) throw std::invalid_argument("too many vectors in one add");
  std::vector<float> units(n * dim_);
  normalize_rows(vectors, n, dim_, units.data(), "vectors");
  std::unique_lock lock(mutex_);
  check_new_ids(ids, n, node_of_);
  const std::size_t base = node_ids_.size();
  if (base + n >= std::numeric_limits<std::uint32_t>::max()) throw std::invalid_argument("index is full (2^32 nodes)");
  // Small batches are not worth the threads.
  const std::size_t workers = n < 256 ? 1 : resolve_threads(threads);
  // Allocate first: a failure here leaves the index as it was. (Growing geometrically: see growth.hpp.)
  store_.reserve(base + n);
  reserve_growing(links0_, (base + n) * (m0_ + 1));
  reserve_growing(upper_, base + n);
  reserve_growing(level_, base + n);
  reserve_growing(deleted_, base + n);
  reserve_growing(node_ids_, base + n);
  reserve_growing_map(node_of_, node_of_.size() + n);
  // per-node locks only for a parallel insert (a single-threaded one takes none)
  std::unique_ptr<std::mutex[]> locks;
  if (workers > 1) locks = std::make_unique<std::mutex[]>(base + n);

  store_.resize(base + n);
  links0_.resize((base + n) * (m0_ + 1), 0);
  for (std::size_t i = 0; i < n; ++i) {
    store_.set(base + i, units.data() + i * dim_);
    const int level = random_level();
    level_.push_back(static_cast<std::uint8_t>(level));
    upper_.emplace_back(static_cast<std::size_t>(level) * (params_.M + 1), 0);
    deleted_.push_back(0);
    node_ids_.push_back(ids[i]);
    node_of_.emplace(ids[i], base + i);
  }
  node_locks_ = std::move(locks);
  std::vector<std::unique_ptr<VisitedList>> visited(workers);
  for (auto& v : visited) v = std::make_unique<VisitedList>();
  parallel_insert_ = workers > 1;
  try {
    parallel_for(n, workers, workers == 1 ? n : 64, [&](std::size_t b, std::size_t e, std::size_t w) {
      for (std::size_t i = b; i < e; ++i)
        insert(static_cast<std::uint32_t>(base + i), units.data() + i * dim_, *visited[w]);
    });
  } catch (...) {
    node_locks_.reset();
    parallel_insert_ = false;
    throw;
  }
  node_locks_.reset();
  parallel_insert_ = false;
}

void HNSWIndex::remove(const id_t* ids, std::size_t n) {
  std::unique_lock lock(mutex_);
  check_known_ids(ids, n, node_of_, true);
  for (std::size_t i = 0; i < n; ++i) {
    const auto it = node_of_.find(ids[i]);
    deleted_[it->second] = 1;
    node_of_.erase(it);
  }
}

void HNSWIndex::search_locked(const float* unit, std::size_t k, std::size_t ef, const std::uint8_t* allowed,
                              const GroupLimit* groups, VisitedList& visited, id_t* out_ids, float* out_scores) const {
  TopK top(k, groups);
  if (max_level_ >= 0) {
    const QueryCode q(store_, unit);
    std::uint32_t ep = entry_;
    float ep_score = q.score(ep);
    ep = greedy<false>(q, ep, ep_score, max_level_, 0);
    std::vector<Scored> found;
    search_layer<false>(q, ep, ep_score, std::max(ef, k), 0, allowed, groups, visited, found);
    for (const Scored& s : found) top.push(s.first, node_ids_[s.second]);
  }
  top.write(out_ids, out_scores);
}

void HNSWIndex::search(const float* queries, std::size_t m, std::size_t k, const IdFilter* allow,
                       const GroupLimit* groups, std::size_t threads, id_t* out_ids, float* out_scores,
                       std::size_t ef) const {
  if (k == 0) throw std::invalid_argument("k must be at least 1");
  if (ef == 0) ef = ef_search();  // read once: a concurrent set_ef_search does not split a batch
  std::vector<float> units(m * dim_);
  normalize_rows(queries, m, dim_, units.data(), "queries");
  std::shared_lock lock(mutex_);
  const std::size_t nodes = node_ids_.size();
  const std::size_t workers = m < 4 ? 1 : resolve_threads(threads);

  if (allow && allow->size() <= std::max<std::size_t>(1024, node_of_.size() / 10)) {
    // Small allow set: exact scores of the allowed live nodes.
    std::vector<std::size_t> slots;
    for (id_t id : allow->ids()) {
      const auto it = node_of_.find(id);
      if (it != node_of_.end()) slots.push_back(it->second);
    }
    parallel_for(m, workers, 4, [&](std::size_t b, std::size_t e, std::size_t) {
      for (std::size_t j = b; j < e; ++j) {
        const QueryCode q(store_, units.data() + j * dim_);
        TopK top(k, groups);
        for (std::size_t s : slots) top.push(q.score(s), node_ids_[s]);
        top.write(out_ids + j * k, out_scores + j * k);
      }
    });
    return;
  }
  // Nodes allowed into results: live ones, and with allow only those listed.
  std::vector<std::uint8_t> allowed_nodes;
  const bool any_deleted = node_of_.size() != nodes;
  if (allow) {
    allowed_nodes.assign(nodes, 0);
    for (id_t id : allow->ids()) {
      const auto it = node_of_.find(id);
      if (it != node_of_.end()) allowed_nodes[it->second] = 1;
    }
  } else if (any_deleted) {
    allowed_nodes.resize(nodes);
    for (std::size_t i = 0; i < nodes; ++i) allowed_nodes[i] = !deleted_[i];
  }
  const std::uint8_t* allowed = allowed_nodes.empty() ? nullptr : allowed_nodes.data();
  parallel_for(m, workers, 4, [&](std::size_t b, std::size_t e, std::size_t) {
    auto visited = visited_->acquire();
    for (std::size_t j = b; j < e; ++j)
      search_locked(units.data() + j * dim_, k, ef, allowed, groups, *visited, out_ids + j * k,
                      out_scores + j * k);
    visited_->release(std::move(visited));
  });
}

void HNSWIndex::search_one(const float* query, std::size_t k, const IdFilter* allow, id_t* ids, float* scores,
                           std::size_t ef) const {
  search(query, 1, k, allow, nullptr, 1, ids, scores, ef);
}

bool HNSWIndex::reconstruct(id_t id, float* out) const {
  std::shared_lock lock(mutex_);
  const auto it = node_of_.find(id);
  if (it == node_of_.end()) return false;
  store_.decode(it->second, out);
  return true;
}

bool HNSWIndex::contains(id_t id) const {
  std::shared_lock lock(mutex_);
  return node_of_.count(id) != 0;
}

std::vector<id_t> HNSWIndex::ids() const {
  std::shared_lock lock(mutex_);
  std::vector<id_t> out;
  out.reserve(node_of_.size());
  for (const auto& kv : node_of_) out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

void HNSWIndex::get_vectors(const id_t* ids, std::size_t n, float* out) const {
  std::shared_lock lock(mutex_);
  check_known_ids(ids, n, node_of_, false);
  for (std::size_t i = 0; i < n; ++i) store_.decode(node_of_.at(ids[i]), out + i * dim_);
}

std::size_t HNSWIndex::memory_bytes() const {
  std::shared_lock lock(mutex_);
  std::size_t upper = 0;
  for (const auto& u : upper_) upper += u.capacity() * 4 + sizeof(u);
  return store_.memory_bytes() + links0_.capacity() * 4 + upper + level_.capacity() + deleted_.capacity() +
         node_ids_.capacity() * sizeof(id_t) +
         node_of_.size() * (sizeof(id_t) + sizeof(std::size_t) + 2 * sizeof(void*)) +
         node_of_.bucket_count() * sizeof(void*);
}

// Payload: u32 dtype, u32 reserved, u64 dim, M, ef_construction, seed, ef_search, rng
// state, node count, i64 max level, u64 entry; then per node id (i64), level (u8),
// deleted (u8); layer-0 links (count * (2M + 1) u32); upper links of each node with
// level > 0 (level * (M + 1) u32), in node order; rows; scales (i8).
void HNSWIndex::save(const std::string& path) const {
  std::shared_lock lock(mutex_);
  const std::size_t nodes = node_ids_.size();
  PayloadWriter w;
  w.put<std::uint32_t>(static_cast<std::uint32_t>(dtype_));
  w.put<std::uint32_t>(0);
  w.put<std::uint64_t>(dim_);
  w.put<std::uint64_t>(params_.M);
  w.put<std::uint64_t>(params_.ef_construction);
  w.put<std::uint64_t>(params_.seed);
  w.put<std::uint64_t>(ef_search());
  w.put<std::uint64_t>(rng_state_);
  w.put<std::uint64_t>(nodes);
  w.put<std::int64_t>(max_level_);
  w.put<std::uint64_t>(entry_);
  w.put_vector(node_ids_);
  w.put_vector(level_);
  w.put_vector(deleted_);
  w.put_vector(links0_);
  for (std::size_t i = 0; i < nodes; ++i) w.put_vector(upper_[i]);
  w.put_bytes(store_.raw_rows(), nodes * store_.row_bytes());
  if (dtype_ == Dtype::i8) w.put_vector(store_.scales());
  w.save(path, IndexKind::hnsw);
}

std::shared_ptr<HNSWIndex> HNSWIndex::load(const std::string& path) {
  PayloadReader r(path, IndexKind::hnsw);
  const auto dtype = r.get<std::uint32_t>();
  r.get<std::uint32_t>();
  const auto dim = r.get<std::uint64_t>();
  Params p;
  p.M = r.get<std::uint64_t>();
  p.ef_construction = r.get<std::uint64_t>();
  p.seed = r.get<std::uint64_t>();
  const auto ef = r.get<std::uint64_t>();
  const auto rng = r.get<std::uint64_t>();
  const auto nodes = r.get<std::uint64_t>();
  const auto max_level = r.get<std::int64_t>();
  const auto entry = r.get<std::uint64_t>();
  if (dtype > 2) r.corrupt("unknown dtype code " + std::to_string(dtype));
  if (dim == 0 || dim > kMaxDim) r.corrupt("implausible dim " + std::to_string(dim));
  if (p.M < 2 || p.M > 256 || p.ef_construction < 1 || ef < 1 || p.ef_construction > kMaxEf || ef > kMaxEf) {
    r.corrupt("bad HNSW parameters (M " + std::to_string(p.M) + ", ef_construction " +
              std::to_string(p.ef_construction) + ", ef_search " + std::to_string(ef) + ")");
  }
  if (nodes >= std::numeric_limits<std::uint32_t>::max()) r.corrupt("implausible node count");
  auto index = std::make_shared<HNSWIndex>(dim, p, static_cast<Dtype>(dtype));
  HNSWIndex& h = *index;
  h.ef_search_ = ef;
  h.rng_state_ = rng;
  h.max_level_ = static_cast<int>(max_level);
  h.entry_ = static_cast<std::uint32_t>(entry);
  if (nodes > r.remaining() / (sizeof(id_t) + 2 + (h.m0_ + 1) * 4 + h.store_.row_bytes())) r.corrupt("payload ends early");
  r.get_vector(h.node_ids_, nodes);
  r.get_vector(h.level_, nodes);
  r.get_vector(h.deleted_, nodes);
  r.get_vector(h.links0_, nodes * (h.m0_ + 1));
  int top = -1;
  for (std::size_t i = 0; i < nodes; ++i) {
    if (h.level_[i] > 30) r.corrupt("bad node level");
    top = std::max(top, static_cast<int>(h.level_[i]));
  }
  if (top != h.max_level_ || (nodes > 0 && (entry >= nodes || h.level_[entry] != top)) ||
      (nodes == 0 && max_level != -1)) {
    r.corrupt("inconsistent entry point");
  }
  h.upper_.resize(nodes);
  for (std::size_t i = 0; i < nodes; ++i) r.get_vector(h.upper_[i], h.level_[i] * (p.M + 1));
  h.store_.resize(nodes);
  if (nodes) r.get_bytes(h.store_.raw_rows_mut(), nodes * h.store_.row_bytes());
  if (h.dtype_ == Dtype::i8) {
    r.get_vector(h.store_.scales_mut(), nodes);
    for (float s : h.store_.scales())
      if (!(s > 0) || !std::isfinite(s)) r.corrupt("bad i8 scale");
  }
  r.finish();
  // Every link must point at a node and fit its layer, so a crafted file cannot make a
  // search read out of bounds.
  for (std::size_t i = 0; i < nodes; ++i) {
    for (int l = 0; l <= h.level_[i]; ++l) {
      const std::uint32_t* ll = h.links(static_cast<std::uint32_t>(i), l);
      if (ll[0] > h.max_links(l)) r.corrupt("link count out of range");
      for (std::uint32_t j = 1; j <= ll[0]; ++j)
        if (ll[j] >= nodes || h.level_[ll[j]] < l) r.corrupt("link target out of range");
    }
    if (h.deleted_[i] > 1) r.corrupt("bad tombstone flag");
    if (!h.deleted_[i]) {
      if (h.node_ids_[i] < 0 || !h.node_of_.emplace(h.node_ids_[i], i).second)
        r.corrupt("id " + std::to_string(h.node_ids_[i]) + " is negative or repeated");
    }
  }
  return index;
}

}  // namespace kira
