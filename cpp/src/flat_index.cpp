#include "kira/flat_index.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <unordered_set>

#include "kira/dispatch.hpp"
#include "kira/growth.hpp"
#include "kira/index_file.hpp"
#include "kira/parallel.hpp"
#include "kira/topk.hpp"

namespace kira {

void check_new_ids(const id_t* ids, std::size_t n, const std::unordered_map<id_t, std::size_t>& present) {
  std::unordered_set<id_t> batch;
  batch.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (ids[i] < 0) {
      throw std::invalid_argument("ids must be non-negative (-1 marks padding in results); got " +
                                  std::to_string(ids[i]) + " at position " + std::to_string(i));
    }
    if (present.count(ids[i])) {
      throw std::invalid_argument("id " + std::to_string(ids[i]) +
                                  " is already in the index; remove it first or use a new id");
    }
    if (!batch.insert(ids[i]).second) {
      throw std::invalid_argument("id " + std::to_string(ids[i]) + " appears twice in ids; ids must be unique");
    }
  }
}

void check_known_ids(const id_t* ids, std::size_t n, const std::unordered_map<id_t, std::size_t>& present,
                     bool reject_repeats) {
  std::unordered_set<id_t> seen;
  for (std::size_t i = 0; i < n; ++i) {
    if (!present.count(ids[i])) {
      throw std::invalid_argument("id " + std::to_string(ids[i]) +
                                  " is not in the index; check contains(id) first");
    }
    if (reject_repeats && !seen.insert(ids[i]).second) {
      throw std::invalid_argument("id " + std::to_string(ids[i]) + " appears twice in ids; pass each id once");
    }
  }
}

FlatIndex::FlatIndex(std::size_t dim, Dtype dtype) : dim_(dim), dtype_(dtype), store_(dim, dtype) {}

std::size_t FlatIndex::size() const {
  std::shared_lock lock(mutex_);
  return slot_ids_.size();
}

void FlatIndex::add(const id_t* ids, const float* vectors, std::size_t n) {
  if (n == 0) return;
  std::vector<float> units(n * dim_);
  normalize_rows(vectors, n, dim_, units.data(), "vectors");
  std::unique_lock lock(mutex_);
  check_new_ids(ids, n, slot_of_);
  const std::size_t base = slot_ids_.size();
  // Allocate everything before the first change so a failure leaves the index as it was.
  store_.reserve(base + n);
  reserve_growing(slot_ids_, base + n);
  reserve_growing_map(slot_of_, base + n);
  store_.resize(base + n);
  for (std::size_t i = 0; i < n; ++i) {
    store_.set(base + i, units.data() + i * dim_);
    slot_ids_.push_back(ids[i]);
    slot_of_.emplace(ids[i], base + i);
  }
}

void FlatIndex::remove(const id_t* ids, std::size_t n) {
  std::unique_lock lock(mutex_);
  check_known_ids(ids, n, slot_of_, true);
  for (std::size_t i = 0; i < n; ++i) {
    const auto it = slot_of_.find(ids[i]);
    const std::size_t slot = it->second;
    const std::size_t last = slot_ids_.size() - 1;
    slot_of_.erase(it);
    if (slot != last) {
      store_.move_row(last, slot);
      slot_ids_[slot] = slot_ids_[last];
      slot_of_[slot_ids_[slot]] = slot;
    }
    slot_ids_.pop_back();
    store_.resize(last);
  }
}

void FlatIndex::search(const float* queries, std::size_t m, std::size_t k, const IdFilter* allow,
                       const GroupLimit* groups, std::size_t threads, id_t* out_ids, float* out_scores) const {
  if (k == 0) throw std::invalid_argument("k must be at least 1");
  std::vector<float> units(m * dim_);
  normalize_rows(queries, m, dim_, units.data(), "queries");
  std::shared_lock lock(mutex_);
  search_locked(units.data(), m, k, allow, groups, threads, out_ids, out_scores);
}

void FlatIndex::search_one(const float* query, std::size_t k, const IdFilter* allow, id_t* ids,
                           float* scores, std::size_t /*ef*/) const {
  search(query, 1, k, allow, nullptr, 1, ids, scores);
}

void FlatIndex::search_locked(const float* Q, std::size_t m, std::size_t k, const IdFilter* allow,
                              const GroupLimit* groups, std::size_t threads, id_t* out_ids,
                              float* out_scores) const {
  const std::size_t n = slot_ids_.size();
  const std::size_t d = dim_;
  const id_t* slot_ids = slot_ids_.data();
  threads = resolve_threads(threads);

  // A small allow set: score just those rows.
  if (allow && allow->size() * 8 < n) {
    std::vector<std::size_t> slots;
    slots.reserve(allow->size());
    for (id_t id : allow->ids()) {
      const auto it = slot_of_.find(id);
      if (it != slot_of_.end()) slots.push_back(it->second);
    }
    const std::size_t work_threads = slots.size() * m * d >= (1u << 22) ? threads : 1;
    parallel_for(m, work_threads, 1, [&](std::size_t q0, std::size_t q1, std::size_t) {
      for (std::size_t q = q0; q < q1; ++q) {
        QueryCode code(store_, Q + q * d);
        TopK top(k, groups);
        for (std::size_t s : slots) top.push(code.score(s), slot_ids[s]);
        top.write(out_ids + q * k, out_scores + q * k);
      }
    });
    return;
  }
  std::vector<std::uint8_t> keep;
  if (allow) {
    keep.assign(n, 0);
    for (id_t id : allow->ids()) {
      const auto it = slot_of_.find(id);
      if (it != slot_of_.end()) keep[it->second] = 1;
    }
  }
  const std::uint8_t* keep_p = allow ? keep.data() : nullptr;

  // Rows per block: about 128 KiB of f32 data, so a block stays in L2 while every query
  // of a chunk passes over it.
  const std::size_t block = std::max<std::size_t>(16, 32768 / d);
  const Kernels& kern = kernels();

  // Scores rows [r0, r1) for queries [q0, q1) into tops[q - q0].
  auto run = [&](std::size_t q0, std::size_t q1, std::size_t r0, std::size_t r1, std::vector<TopK>& tops) {
    const std::size_t mq = q1 - q0;
    std::vector<float> buf(mq * block);
    std::vector<std::int32_t> scratch;
    std::vector<QueryCode> codes;
    // f32 rows, and f16 rows decoded a block at a time, go through the multi-query kernel.
    const bool multi = (dtype_ == Dtype::f32 || dtype_ == Dtype::f16) && mq >= 4;
    std::vector<float> decoded(dtype_ == Dtype::f16 && multi ? block * d : 0);
    if (!multi) {
      codes.reserve(mq);
      for (std::size_t q = q0; q < q1; ++q) codes.emplace_back(store_, Q + q * d);
    }
    for (std::size_t b0 = r0; b0 < r1; b0 += block) {
      const std::size_t nb = std::min(block, r1 - b0);
      if (multi) {
        const float* rows = dtype_ == Dtype::f32 ? store_.f32_row(b0) : nullptr;
        if (dtype_ == Dtype::f16) {
          kern.f16_to_f32(store_.f16_row(b0), decoded.data(), nb * d);
          rows = decoded.data();
        }
        kern.scan_f32_multi(Q + q0 * d, mq, rows, nb, d, buf.data(), block);
      } else {
        for (std::size_t j = 0; j < mq; ++j) codes[j].scan(b0, b0 + nb, buf.data() + j * block, scratch);
      }
      for (std::size_t j = 0; j < mq; ++j) {
        const float* s = buf.data() + j * block;
        TopK& top = tops[j];
        float t = top.threshold();
        for (std::size_t r = 0; r < nb; ++r) {
          if (s[r] >= t && (!keep_p || keep_p[b0 + r])) {
            top.push(s[r], slot_ids[b0 + r]);
            t = top.threshold();
          }
        }
      }
    }
  };

  // Threads are started per call, which costs tens of microseconds (far more on a loaded
  // machine), so only work of about 16 MiB of row reads or more is split.
  const bool big = n * store_.row_bytes() * m >= (std::size_t{16} << 20);
  if (!big || threads == 1 || n == 0) {
    // One thread, queries in chunks.
    for (std::size_t q0 = 0; q0 < m; q0 += 256) {
      const std::size_t q1 = std::min(m, q0 + 256);
      std::vector<TopK> tops(q1 - q0, TopK(k, groups));
      run(q0, q1, 0, n, tops);
      for (std::size_t q = q0; q < q1; ++q) tops[q - q0].write(out_ids + q * k, out_scores + q * k);
    }
    return;
  }
  if (m >= 4 * threads) {
    // Many queries: spread query chunks over threads; each chunk streams all rows once.
    const std::size_t chunk = std::min<std::size_t>(256, ((m + threads - 1) / threads + 3) & ~std::size_t{3});
    parallel_for(m, threads, chunk, [&](std::size_t q0, std::size_t q1, std::size_t) {
      std::vector<TopK> tops(q1 - q0, TopK(k, groups));
      run(q0, q1, 0, n, tops);
      for (std::size_t q = q0; q < q1; ++q) tops[q - q0].write(out_ids + q * k, out_scores + q * k);
    });
    return;
  }
  // Few queries: split the rows over threads, merge the per-thread top-k.
  const std::size_t parts = std::min(threads, (n + block - 1) / block);
  const std::size_t per = ((n + parts - 1) / parts + block - 1) / block * block;
  std::vector<std::vector<TopK>> partial(parts, std::vector<TopK>(m, TopK(k, groups)));
  parallel_for(parts, parts, 1, [&](std::size_t p0, std::size_t p1, std::size_t) {
    for (std::size_t p = p0; p < p1; ++p) {
      const std::size_t r0 = std::min(n, p * per), r1 = std::min(n, (p + 1) * per);
      run(0, m, r0, r1, partial[p]);
    }
  });
  for (std::size_t q = 0; q < m; ++q) {
    for (std::size_t p = 1; p < parts; ++p) partial[0][q].merge(partial[p][q]);
    partial[0][q].write(out_ids + q * k, out_scores + q * k);
  }
}

bool FlatIndex::reconstruct(id_t id, float* out) const {
  std::shared_lock lock(mutex_);
  const auto it = slot_of_.find(id);
  if (it == slot_of_.end()) return false;
  store_.decode(it->second, out);
  return true;
}

bool FlatIndex::contains(id_t id) const {
  std::shared_lock lock(mutex_);
  return slot_of_.count(id) != 0;
}

std::vector<id_t> FlatIndex::ids() const {
  std::shared_lock lock(mutex_);
  std::vector<id_t> out = slot_ids_;
  std::sort(out.begin(), out.end());
  return out;
}

void FlatIndex::get_vectors(const id_t* ids, std::size_t n, float* out) const {
  std::shared_lock lock(mutex_);
  check_known_ids(ids, n, slot_of_, false);
  for (std::size_t i = 0; i < n; ++i) store_.decode(slot_of_.at(ids[i]), out + i * dim_);
}

std::size_t FlatIndex::memory_bytes() const {
  std::shared_lock lock(mutex_);
  return store_.memory_bytes() + slot_ids_.capacity() * sizeof(id_t) +
         slot_of_.size() * (sizeof(id_t) + sizeof(std::size_t) + 2 * sizeof(void*)) +
         slot_of_.bucket_count() * sizeof(void*);
}

// Payload: u32 dtype, u32 reserved, u64 dim, u64 count, ids[count] i64,
// rows[count * dim] (f32 / f16 / i8), then scales[count] f32 for i8.
void FlatIndex::save(const std::string& path) const {
  std::shared_lock lock(mutex_);
  PayloadWriter w;
  w.put<std::uint32_t>(static_cast<std::uint32_t>(dtype_));
  w.put<std::uint32_t>(0);
  w.put<std::uint64_t>(dim_);
  w.put<std::uint64_t>(slot_ids_.size());
  w.put_vector(slot_ids_);
  w.put_bytes(store_.raw_rows(), slot_ids_.size() * store_.row_bytes());
  if (dtype_ == Dtype::i8) w.put_vector(store_.scales());
  w.save(path, IndexKind::flat);
}

std::shared_ptr<FlatIndex> FlatIndex::load(const std::string& path) {
  PayloadReader r(path, IndexKind::flat);
  const auto dtype = r.get<std::uint32_t>();
  r.get<std::uint32_t>();
  const auto dim = r.get<std::uint64_t>();
  const auto count = r.get<std::uint64_t>();
  if (dtype > 2) r.corrupt("unknown dtype code " + std::to_string(dtype));
  if (dim == 0 || dim > kMaxDim) r.corrupt("implausible dim " + std::to_string(dim));
  auto index = std::make_shared<FlatIndex>(dim, static_cast<Dtype>(dtype));
  const std::size_t row_bytes = index->store_.row_bytes();
  if (count > r.remaining() / (sizeof(id_t) + row_bytes)) r.corrupt("payload ends early");
  r.get_vector(index->slot_ids_, count);
  index->store_.resize(count);
  r.get_bytes(index->store_.raw_rows_mut(), count * row_bytes);
  if (index->dtype_ == Dtype::i8) {
    r.get_vector(index->store_.scales_mut(), count);
    for (float s : index->store_.scales())
      if (!(s > 0) || !std::isfinite(s)) r.corrupt("bad i8 scale");
  }
  r.finish();
  index->slot_of_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (index->slot_ids_[i] < 0 || !index->slot_of_.emplace(index->slot_ids_[i], i).second) {
      r.corrupt("id " + std::to_string(index->slot_ids_[i]) + " is negative or repeated");
    }
  }
  return index;
}

}  // namespace kira
