#include "kira/rrf.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>

namespace kira {
namespace {

void check_arguments(std::size_t n_rankings, const std::vector<double>& weights, double k) {
  if (weights.size() != n_rankings) {
    throw std::invalid_argument("weights has " + std::to_string(weights.size()) +
                                " entries for " + std::to_string(n_rankings) +
                                " rankings; pass one weight per ranking");
  }
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0.0) {
      throw std::invalid_argument("weights[" + std::to_string(i) + "] = " +
                                  std::to_string(weights[i]) +
                                  "; weights must be finite and >= 0");
    }
  }
  if (!std::isfinite(k) || k <= 0.0) {
    throw std::invalid_argument("k must be a finite number > 0 (the paper uses k = 60)");
  }
}

// id -> dense slot (0, 1, 2, ... in order of first insertion). Open addressing with linear
// probing, power-of-two capacity, load <= 1/2 (it doubles past that). The empty key is -1,
// which is never stored.
class SlotTable {
 public:
  explicit SlotTable(std::size_t expected) {
    unsigned bits = 4;
    while ((std::size_t{1} << bits) < 2 * expected) ++bits;
    resize(bits);
  }

  // The slot of key (!= -1); a new key gets the next slot and sets `added`.
  std::uint32_t slot(id_t key, bool& added) {
    std::size_t h = home(key);
    while (keys_[h] != -1 && keys_[h] != key) h = (h + 1) & mask_;
    added = keys_[h] == -1;
    if (!added) return slots_[h];
    if (2 * (std::size_t{size_} + 1) > mask_ + 1) {
      grow();
      h = home(key);
      while (keys_[h] != -1) h = (h + 1) & mask_;
    }
    keys_[h] = key;
    slots_[h] = size_;
    return size_++;
  }

 private:
  std::size_t home(id_t key) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull) >>
                                    shift_);
  }

  void resize(unsigned bits) {
    mask_ = (std::size_t{1} << bits) - 1;
    shift_ = 64 - bits;  // Fibonacci hashing keeps the top bits
    keys_.assign(mask_ + 1, -1);
    slots_.assign(mask_ + 1, 0);
  }

  void grow() {
    std::vector<id_t> keys = std::move(keys_);
    std::vector<std::uint32_t> slots = std::move(slots_);
    resize(static_cast<unsigned>(64 - shift_ + 1));
    for (std::size_t j = 0; j < keys.size(); ++j) {
      if (keys[j] == -1) continue;
      std::size_t h = home(keys[j]);
      while (keys_[h] != -1) h = (h + 1) & mask_;
      keys_[h] = keys[j];
      slots_[h] = slots[j];
    }
  }

  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  std::uint32_t size_ = 0;
  std::vector<id_t> keys_;
  std::vector<std::uint32_t> slots_;
};

// The first n entries of fused (by `better`), as ids and scores.
template <class Entry, class Better, class Score>
FusedRanking best_first(std::vector<Entry>& fused, std::size_t limit, Better better, Score score) {
  const std::size_t n = std::min(limit, fused.size());
  if (n < fused.size()) {
    std::partial_sort(fused.begin(), fused.begin() + static_cast<std::ptrdiff_t>(n), fused.end(),
                      better);
  } else {
    std::sort(fused.begin(), fused.end(), better);
  }
  FusedRanking out;
  out.ids.resize(n);
  out.scores.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    out.ids[j] = fused[j].id;
    out.scores[j] = score(fused[j]);
  }
  return out;
}

}  // namespace

FusedRanking rrf_fuse(const std::vector<RankingView>& rankings,
                      const std::vector<double>& weights, double k, std::size_t limit) {
  check_arguments(rankings.size(), weights, k);
  std::size_t total = 0;
  for (const auto& r : rankings) total += r.size;

  SlotTable table(total);
  struct Fused {
    double score;
    id_t id;
    std::uint32_t last_ranking;  // ranking (1-based) that last scored this id: dedupe
  };
  std::vector<Fused> fused;
  fused.reserve(total);

  for (std::size_t i = 0; i < rankings.size(); ++i) {
    const RankingView& r = rankings[i];
    const double w = weights[i];
    const auto tag = static_cast<std::uint32_t>(i + 1);
    for (std::size_t pos = 0; pos < r.size; ++pos) {
      const id_t id = r.ids[pos];
      if (id == -1) continue;
      bool added = false;
      const std::uint32_t s = table.slot(id, added);
      if (added) fused.push_back(Fused{0.0, id, 0});
      Fused& f = fused[s];
      if (f.last_ranking == tag) continue;  // already counted at a better rank
      f.last_ranking = tag;
      f.score += w / (k + static_cast<double>(pos + 1));
    }
  }

  auto better = [](const Fused& a, const Fused& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.id < b.id;
  };
  return best_first(fused, limit, better, [](const Fused& f) { return f.score; });
}

FusedRanking rrf_fuse_documents(const std::vector<DocumentRankingView>& rankings,
                                const std::vector<double>& weights, double k, std::size_t limit) {
  check_arguments(rankings.size(), weights, k);
  std::size_t total = 0;
  for (const auto& r : rankings) total += r.size;

  struct Chunk {
    double score;           // chunk-level RRF, s(c)
    double fused;           // S(doc(c)) * s(c) / best s of doc(c), once every ranking is in
    id_t id;
    id_t document;          // its document id (its own id for a document of its own)
    std::uint32_t doc;      // its document's slot
    std::uint32_t last_ranking;
  };
  struct Document {
    double score = 0.0;     // S(D)
    double best = 0.0;      // max s(c) over its fused chunks
    std::uint32_t last_ranking = 0;
  };
  SlotTable chunk_slots(total);
  SlotTable document_slots(0);  // documents are often far fewer than chunks: it grows as needed
  std::vector<Chunk> chunks;
  std::vector<Document> documents;
  chunks.reserve(total);

  for (std::size_t i = 0; i < rankings.size(); ++i) {
    const DocumentRankingView& r = rankings[i];
    const double w = weights[i];
    const auto tag = static_cast<std::uint32_t>(i + 1);
    std::size_t document_rank = 0;
    bool padded = false;
    for (std::size_t pos = 0; pos < r.size; ++pos) {
      const id_t id = r.ids[pos];
      if (id == -1) {  // padding: one document rank at its first -1, no score
        if (!padded) ++document_rank;
        padded = true;
        continue;
      }
      const id_t given = r.documents[pos];
      if (given < -1) {
        throw std::invalid_argument(
            "documents[" + std::to_string(i) + "][" + std::to_string(pos) + "] = " +
            std::to_string(given) +
            "; a document id is >= 0, or -1 for a chunk that is a document of its own");
      }
      const id_t document = given >= 0 ? given : id;
      bool added = false;
      const std::uint32_t d = document_slots.slot(document, added);
      if (added) documents.push_back(Document{});
      Document& doc = documents[d];
      if (doc.last_ranking != tag) {  // the document's first chunk in this ranking
        doc.last_ranking = tag;
        doc.score += w / (k + static_cast<double>(++document_rank));
      }
      const std::uint32_t c = chunk_slots.slot(id, added);
      if (added) chunks.push_back(Chunk{0.0, 0.0, id, document, d, 0});
      Chunk& chunk = chunks[c];
      if (chunk.document != document) {
        throw std::invalid_argument(
            "chunk " + std::to_string(id) + " is given document " +
            std::to_string(chunk.document) + " and, in rankings[" + std::to_string(i) +
            "], document " + std::to_string(document) +
            "; pass each chunk's one document (-1 meaning the chunk's own id) everywhere");
      }
      if (chunk.last_ranking == tag) continue;  // already counted at a better rank
      chunk.last_ranking = tag;
      chunk.score += w / (k + static_cast<double>(pos + 1));
    }
  }

  for (const Chunk& c : chunks) {
    documents[c.doc].best = std::max(documents[c.doc].best, c.score);
  }
  for (Chunk& c : chunks) {
    const Document& doc = documents[c.doc];
    c.fused = doc.best > 0.0 ? doc.score * (c.score / doc.best) : 0.0;
  }
  auto better = [](const Chunk& a, const Chunk& b) {
    if (a.fused != b.fused) return a.fused > b.fused;
    if (a.score != b.score) return a.score > b.score;
    return a.id < b.id;
  };
  return best_first(chunks, limit, better, [](const Chunk& c) { return c.fused; });
}

}  // namespace kira
