// Bindings for the retrieval algorithms: rrf_fuse, residual_hops (Hop, HopTrace),
// extract_regions, CompoundGroups and expand_compound.
// Validate under the GIL, release it for the work, std::invalid_argument -> ValueError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "kira/compound.hpp"
#include "kira/index.hpp"
#include "kira/regions.hpp"
#include "kira/residual_hops.hpp"
#include "kira/rrf.hpp"

namespace py = pybind11;

namespace kira::bindings {
namespace {

template <class T>
const char* dtype_name();
template <>
const char* dtype_name<std::int64_t>() { return "int64"; }
template <>
const char* dtype_name<float>() { return "float32"; }

// obj as a C-contiguous numpy array of T with ndim dimensions, or ValueError saying the fix.
template <class T>
py::array_t<T> checked_array(py::handle obj, const std::string& what, int ndim) {
  const std::string fix = std::string("np.ascontiguousarray(") + what + ", dtype=np." +
                          dtype_name<T>() + ")";
  if (!py::isinstance<py::array>(obj)) {
    throw std::invalid_argument(what + " must be a numpy array of " + dtype_name<T>() +
                                ", got " + std::string(py::str(py::type::of(obj).attr("__name__"))) +
                                "; pass " + fix);
  }
  auto arr = py::reinterpret_borrow<py::array>(obj);
  if (!py::isinstance<py::array_t<T>>(arr)) {
    throw std::invalid_argument(what + " has dtype " + std::string(py::str(arr.dtype())) +
                                ", expected " + dtype_name<T>() + "; convert it visibly with " +
                                fix);
  }
  if (arr.ndim() != ndim) {
    throw std::invalid_argument(what + " must be " + std::to_string(ndim) + "-d, got " +
                                std::to_string(arr.ndim()) + "-d");
  }
  if (!(arr.flags() & py::array::c_style)) {
    throw std::invalid_argument(what + " is not C-contiguous; pass " + fix);
  }
  return py::reinterpret_borrow<py::array_t<T>>(arr);
}

// Hands a vector to numpy without copying; the array owns it through a capsule.
template <class T>
py::array_t<T> to_numpy(std::vector<T>&& v, std::vector<py::ssize_t> shape = {}) {
  auto owned = std::make_unique<std::vector<T>>(std::move(v));
  if (shape.empty()) shape.push_back(static_cast<py::ssize_t>(owned->size()));
  T* data = owned->data();
  py::capsule owner(owned.get(), [](void* p) { delete static_cast<std::vector<T>*>(p); });
  owned.release();
  return py::array_t<T>(shape, data, owner);
}

template <class T>
py::array_t<T> copy_numpy(const std::vector<T>& v) {
  return to_numpy(std::vector<T>(v));
}

// A list of ids from an int64 array or any sequence of Python ints.
std::vector<id_t> id_list(py::handle obj, const std::string& what) {
  if (py::isinstance<py::array>(obj)) {
    auto arr = checked_array<id_t>(obj, what, 1);
    return std::vector<id_t>(arr.data(), arr.data() + arr.size());
  }
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj)) {
    throw std::invalid_argument(what + " must be a sequence of int ids or an int64 array");
  }
  std::vector<id_t> out;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(obj)) {
    if (!py::isinstance<py::int_>(item) && !py::hasattr(item, "__index__")) {
      throw std::invalid_argument(what + " holds a non-integer " +
                                  std::string(py::str(py::repr(item))) + "; pass integer ids");
    }
    out.push_back(py::cast<id_t>(py::reinterpret_borrow<py::object>(item).attr("__index__")()));
  }
  return out;
}

std::int64_t as_int(py::handle obj, const std::string& what) {
  if (py::isinstance<py::bool_>(obj) ||
      (!py::isinstance<py::int_>(obj) && !py::hasattr(obj, "__index__"))) {
    throw std::invalid_argument(what + " must be an integer, got " +
                                std::string(py::str(py::repr(obj))));
  }
  return py::cast<std::int64_t>(py::reinterpret_borrow<py::object>(obj).attr("__index__")());
}

// One document array per ranking, parallel to its ids, or ValueError saying which one is off.
std::vector<py::array_t<id_t>> document_arrays(py::handle documents,
                                               const std::vector<RankingView>& rankings) {
  if (py::isinstance<py::array>(documents) || !py::isinstance<py::sequence>(documents) ||
      py::isinstance<py::str>(documents)) {
    throw std::invalid_argument(
        "documents must be None or a sequence of int64 1-d arrays, one per ranking");
  }
  auto seq = py::reinterpret_borrow<py::sequence>(documents);
  if (seq.size() != rankings.size()) {
    throw std::invalid_argument("documents has " + std::to_string(seq.size()) + " arrays for " +
                                std::to_string(rankings.size()) +
                                " rankings; pass one per ranking");
  }
  std::vector<py::array_t<id_t>> arrays;
  for (std::size_t i = 0; i < rankings.size(); ++i) {
    const std::string what = "documents[" + std::to_string(i) + "]";
    arrays.push_back(checked_array<id_t>(seq[i], what, 1));
    if (static_cast<std::size_t>(arrays.back().size()) != rankings[i].size) {
      throw std::invalid_argument(what + " has " + std::to_string(arrays.back().size()) +
                                  " entries for the " + std::to_string(rankings[i].size) +
                                  " ids of rankings[" + std::to_string(i) +
                                  "]; pass each id's document, in order");
    }
  }
  return arrays;
}

void bind_rrf(py::module_& m) {
  m.def(
      "rrf_fuse",
      [](py::object rankings, py::object weights, double k, py::object limit,
         py::object documents) {
        if (py::isinstance<py::array>(rankings) &&
            py::reinterpret_borrow<py::array>(rankings).ndim() == 1) {
          throw std::invalid_argument(
              "rankings must be a sequence of id arrays, got one 1-d array; wrap it: [ranking]");
        }
        if (!py::isinstance<py::sequence>(rankings) || py::isinstance<py::str>(rankings)) {
          throw std::invalid_argument("rankings must be a sequence of int64 1-d arrays");
        }
        std::vector<py::array_t<id_t>> arrays;  // holds references while the GIL is released
        std::vector<RankingView> views;
        std::size_t i = 0;
        for (py::handle r : py::reinterpret_borrow<py::sequence>(rankings)) {
          arrays.push_back(checked_array<id_t>(r, "rankings[" + std::to_string(i++) + "]", 1));
          views.push_back(RankingView{arrays.back().data(),
                                      static_cast<std::size_t>(arrays.back().size())});
        }
        std::vector<double> w;
        if (weights.is_none()) {
          w.assign(views.size(), 1.0);
        } else {
          if (!py::isinstance<py::sequence>(weights) && !py::isinstance<py::array>(weights)) {
            throw std::invalid_argument("weights must be None or a sequence of floats");
          }
          for (py::handle x : weights) {
            w.push_back(py::cast<double>(py::float_(py::reinterpret_borrow<py::object>(x))));
          }
        }
        std::size_t lim = std::numeric_limits<std::size_t>::max();
        if (!limit.is_none()) {
          const std::int64_t l = as_int(limit, "limit");
          if (l < 0) throw std::invalid_argument("limit must be None or >= 0");
          lim = static_cast<std::size_t>(l);
        }
        FusedRanking fused;
        if (documents.is_none()) {
          py::gil_scoped_release release;
          fused = kira::rrf_fuse(views, w, k, lim);
        } else {
          const auto docs = document_arrays(documents, views);
          std::vector<DocumentRankingView> documented;
          for (std::size_t j = 0; j < views.size(); ++j) {
            documented.push_back(DocumentRankingView{views[j].ids, docs[j].data(), views[j].size});
          }
          py::gil_scoped_release release;
          fused = kira::rrf_fuse_documents(documented, w, k, lim);
        }
        return py::make_tuple(to_numpy(std::move(fused.ids)), to_numpy(std::move(fused.scores)));
      },
      py::arg("rankings"), py::arg("weights") = py::none(), py::arg("k") = 60.0, py::kw_only(),
      py::arg("limit") = py::none(), py::arg("documents") = py::none(),
      R"doc(Weighted reciprocal rank fusion of ranked id lists.

score(id) = sum over rankings i that contain id of weights[i] / (k + rank_i(id)), where
rank_i counts from 1 at the best (first) entry. An id repeated inside one ranking counts
once, at its best (first) rank. Id -1 (the padding of index searches) is skipped, but its
position still counts in the ranks.

With documents (each id's document), a document counts once per ranking:
S(D) = sum over rankings i listing a chunk of D of weights[i] / (k + rank of D among the
distinct documents of ranking i, in order of first appearance; a ranking's padding takes one
such rank, at its first -1), and each chunk c scores S(doc(c)) * s(c) / max s(c') over the
fused chunks c' of doc(c), s being the score above; sorted by that score descending, ties in
the order above (s descending, then the smaller id).

Parameters
----------
rankings : sequence of int64 1-d C-contiguous arrays, best first (may be empty).
weights : None (all 1.0) or one finite weight >= 0 per ranking (KIRA: visual 0.6, text 0.4).
k : the RRF constant, finite and > 0 (KIRA: 60).
limit : keyword-only; None for every fused id, else at most this many (>= 0).
documents : keyword-only; None (chunk by chunk), or one int64 1-d C-contiguous array per
    ranking, parallel to its ids: each id's document id (>= 0), or -1 for a chunk that is a
    document of its own (its document id is then its own id). The entry of a -1 id is ignored.

Returns
-------
(ids int64 (n,), scores float64 (n,)) sorted by score descending, ties to the smaller id
(with documents: ties as above). Deterministic: each id's terms are summed in ranking order.

Raises
-------
ValueError: a ranking that is not an int64 1-d contiguous array, a weights length that
differs from the number of rankings, a negative/NaN/inf weight, k <= 0, a negative limit;
documents that are not one int64 1-d contiguous array per ranking of its ranking's length,
hold a value < -1, or give one chunk two different documents.

Thread safety: pure function; the GIL is released while fusing.)doc");
}

void bind_hops(py::module_& m) {
  py::class_<Hop>(m, "Hop", "One hop of residual_hops: what one query retrieved.")
      .def_property_readonly(
          "ids", [](const Hop& h) { return copy_numpy(h.ids); },
          "int64 (n,): the hop's results, best first, without -1 padding (n <= k).")
      .def_property_readonly(
          "scores", [](const Hop& h) { return copy_numpy(h.scores); },
          "float32 (n,): cosine scores of ids.")
      .def_property_readonly(
          "confidence", [](const Hop& h) { return h.confidence; },
          "Mean cosine score of the hop's results (0.0 when it found nothing).")
      .def_property_readonly(
          "query", [](const Hop& h) { return copy_numpy(h.query); },
          "float32 (dim,): the unit query this hop searched with.")
      .def_property_readonly(
          "new_ids", [](const Hop& h) { return h.new_ids; },
          "How many of ids no earlier hop had returned.")
      .def("__repr__", [](const Hop& h) {
        return "Hop(n=" + std::to_string(h.ids.size()) + ", new_ids=" +
               std::to_string(h.new_ids) + ", confidence=" +
               std::string(py::str(py::float_(h.confidence))) + ")";
      }, "Short summary: result count, new ids, confidence.");

  py::class_<HopTrace>(m, "HopTrace", "The result of residual_hops: every hop, why it stopped, and the merged results.")
      .def_property_readonly(
          "hops", [](const HopTrace& t) { return t.hops; },
          "list[Hop], in the order they ran (at least one).")
      .def_property_readonly(
          "stop_reason", [](const HopTrace& t) { return t.stop_reason; },
          "Why the chain stopped: 'confidence' (a hop's confidence reached the threshold), "
          "'no_new' (a hop returned no id unseen in earlier hops, or nothing at all), "
          "'max_hops' (the hop budget was spent), 'zero_residual' (q - beta * mean vanished; "
          "only possible with beta >= 1).")
      .def_property_readonly(
          "ids", [](const HopTrace& t) { return copy_numpy(t.ids); },
          "int64 (n,): every id any hop returned, by best score descending, ties to the smaller id.")
      .def_property_readonly(
          "scores", [](const HopTrace& t) { return copy_numpy(t.scores); },
          "float32 (n,): the best score each id got in any hop.")
      .def_property_readonly(
          "first_hop", [](const HopTrace& t) { return copy_numpy(t.first_hop); },
          "int32 (n,): for each merged id, the 0-based hop that first returned it.")
      .def("__repr__", [](const HopTrace& t) {
        return "HopTrace(hops=" + std::to_string(t.hops.size()) + ", stop_reason='" +
               t.stop_reason + "', n=" + std::to_string(t.ids.size()) + ")";
      }, "Short summary: hop count, stop reason, merged result count.");

  m.def(
      "residual_hops",
      [](const CosineIndex& index, py::object query, py::object k, double beta,
         py::object max_hops, double confidence, py::object allow, py::object ef) {
        auto q = checked_array<float>(query, "query", 1);
        if (static_cast<std::size_t>(q.size()) != index.dim()) {
          throw std::invalid_argument("query has " + std::to_string(q.size()) +
                                      " values but the index has dim " +
                                      std::to_string(index.dim()));
        }
        const std::int64_t kk = as_int(k, "k");
        if (kk < 1) throw std::invalid_argument("k must be >= 1, got " + std::to_string(kk));
        const std::int64_t hops = as_int(max_hops, "max_hops");
        if (hops < 1) throw std::invalid_argument("max_hops must be >= 1");
        std::int64_t ef_value = 0;
        if (!ef.is_none()) {
          ef_value = as_int(ef, "ef");
          if (ef_value < 1 || static_cast<std::size_t>(ef_value) > kMaxEf) {
            throw std::invalid_argument("ef must be between 1 and " + std::to_string(kMaxEf) +
                                        " or None (the index's own), got " + std::to_string(ef_value));
          }
        }
        std::optional<IdFilter> filter;
        std::vector<id_t> allowed;
        if (!allow.is_none()) allowed = id_list(allow, "allow");
        HopOptions options;
        options.beta = beta;
        options.max_hops = static_cast<std::size_t>(hops);
        options.confidence = confidence;
        options.ef = static_cast<std::size_t>(ef_value);
        std::vector<float> qv(q.data(), q.data() + q.size());
        HopTrace trace;
        {
          py::gil_scoped_release release;
          if (!allow.is_none()) filter.emplace(std::move(allowed));
          trace = kira::residual_hops(index, qv.data(), static_cast<std::size_t>(kk), options,
                                      filter ? &*filter : nullptr);
        }
        return trace;
      },
      py::arg("index"), py::arg("query"), py::arg("k"), py::kw_only(), py::arg("beta") = 0.3,
      py::arg("max_hops") = 3, py::arg("confidence") = 0.85, py::arg("allow") = py::none(), py::arg("ef") = py::none(),
      R"doc(Residual multi-hop retrieval in one native call.

Hop 1 searches with the unit-normalised query. After each hop the query becomes
q <- (q - beta * m) / ||q - beta * m||, where m is the unweighted mean of the stored unit
vectors (index.get_vectors) of that hop's results. The chain stops after a hop when, in
this order of precedence:
  'confidence': the hop's confidence >= confidence, where a hop's confidence is the mean
      cosine score of its valid (non-padding) top-k results;
  'no_new': the hop returned no id that an earlier hop had not (or returned nothing);
  'max_hops': max_hops hops have run;
  'zero_residual': q - beta * m has norm <= 1e-6 (only possible with beta >= 1), so there
      is no direction left to search.

Parameters
----------
index : a FlatIndex or HNSWIndex (any CosineIndex).
query : float32 (dim,) C-contiguous, finite and non-zero (normalised here).
k : results per hop, >= 1.
beta : keyword-only, >= 0 (KIRA: 0.3).  max_hops : >= 1 (KIRA: 3).
confidence : stop threshold (KIRA: 0.85).
allow : None, or ids (int64 array or int sequence) the hops may return.
ef : None, or an HNSWIndex's candidate list per hop (>= 1; the search uses max(ef, k)),
    leaving its ef_search alone; a FlatIndex is exact and ignores it.

Returns
-------
HopTrace: .hops (list[Hop] with .ids, .scores, .confidence, .query, .new_ids),
.stop_reason, and the merged .ids / .scores (best score per id, descending, ties to the
smaller id) with .first_hop.

Raises
------
ValueError: wrong dtype/shape/dimension, NaN/inf or zero query, k < 1, max_hops < 1,
beta < 0 or not finite, NaN confidence, ef < 1.

Thread safety: the GIL is released; safe to run concurrently with searches on the same
index, not with add/remove on it.)doc");
}

void bind_regions(py::module_& m) {
  m.def(
      "extract_regions",
      [](py::object attention, py::object image_size, double k_sigma, int connectivity,
         py::object min_cells) {
        auto a = checked_array<float>(attention, "attention", 2);
        if (!py::isinstance<py::sequence>(image_size) || py::len(image_size) != 2) {
          throw std::invalid_argument("image_size must be (width, height)");
        }
        auto size = py::reinterpret_borrow<py::sequence>(image_size);
        const std::int64_t width = as_int(size[0], "image_size[0] (width)");
        const std::int64_t height = as_int(size[1], "image_size[1] (height)");
        const std::int64_t mc = as_int(min_cells, "min_cells");
        if (mc < 1) throw std::invalid_argument("min_cells must be >= 1");
        RegionOptions options;
        options.k_sigma = k_sigma;
        options.connectivity = connectivity;
        options.min_cells = static_cast<std::size_t>(mc);
        const auto h = static_cast<std::size_t>(a.shape(0));
        const auto w = static_cast<std::size_t>(a.shape(1));
        Regions regions;
        {
          py::gil_scoped_release release;
          regions = kira::extract_regions(a.data(), h, w, width, height, options);
        }
        const auto n = static_cast<py::ssize_t>(regions.scores.size());
        return py::make_tuple(
            to_numpy(std::move(regions.boxes), {n, 4}), to_numpy(std::move(regions.scores)),
            to_numpy(std::move(regions.labels),
                     {static_cast<py::ssize_t>(h), static_cast<py::ssize_t>(w)}));
      },
      py::arg("attention"), py::arg("image_size"), py::kw_only(), py::arg("k_sigma") = 0.5,
      py::arg("connectivity") = 8, py::arg("min_cells") = 1,
      R"doc(Salient regions of an attention grid (KIRA stage 1).

Cells with attention > mean + k_sigma * std (population std, strictly greater: a constant
grid has no region) are labelled into connected components, scored by their mean
attention and returned best first (ties: the component whose first cell in row-major order
comes first). Grid cell (r, c) covers pixels [c*W/w, (c+1)*W/w) x [r*H/h, (r+1)*H/h); each
box is the smallest integer pixel box covering its cells: x0 = floor(c0*W/w),
y0 = floor(r0*H/h) inclusive, x1 = ceil((c1+1)*W/w), y1 = ceil((r1+1)*H/h) exclusive.

Parameters
----------
attention : float32 (h, w) C-contiguous, finite, h, w >= 1.
image_size : (width, height) in pixels, each >= 1.
k_sigma : keyword-only, finite (KIRA: 0.5).
connectivity : 8 (diagonal neighbours join) or 4.
min_cells : components with fewer cells are dropped (>= 1).

Returns
-------
(boxes int32 (n, 4) as x0, y0, x1, y1; scores float32 (n,) mean attention;
 labels int32 (h, w): 0 = background (and dropped components), i + 1 = the region in
 row i of boxes, i.e. labels are renumbered in output order).

Raises
------
ValueError: not float32 / not 2-d / not contiguous, an empty grid, NaN or inf, a bad
image_size, connectivity other than 4 or 8, min_cells < 1, non-finite k_sigma.

Thread safety: pure function; the GIL is released while labelling.)doc");
}

void bind_compound(py::module_& m) {
  py::class_<CompoundGroups, std::shared_ptr<CompoundGroups>>(
      m, "CompoundGroups",
      "Compound documents: temporal sequences and multiview sets of ids, registered once.\n\n"
      "Rule: an id may belong to at most one temporal sequence and at most one multiview set\n"
      "(one of each is fine). Thread safety: every method may be called from any number of\n"
      "threads at once, including while expand_compound runs on the same groups.")
      .def(py::init<>(), "An empty registry.")
      .def(
          "add_temporal",
          [](CompoundGroups& g, py::object members) {
            return g.add(GroupKind::temporal, id_list(members, "member_ids"));
          },
          py::arg("member_ids"),
          "Registers a temporal sequence (ids in time order); returns its 0-based number.\n\n"
          "Raises ValueError (and registers nothing) for an empty list, id -1, a repeated id,\n"
          "or an id already in another temporal sequence.")
      .def(
          "add_multiview",
          [](CompoundGroups& g, py::object members) {
            return g.add(GroupKind::multiview, id_list(members, "member_ids"));
          },
          py::arg("member_ids"),
          "Registers a multiview set (views of one subject); returns its 0-based number.\n\n"
          "Raises ValueError (and registers nothing) for an empty list, id -1, a repeated id,\n"
          "or an id already in another multiview set.")
      .def(
          "temporal_of",
          [](const CompoundGroups& g, id_t id) {
            return to_numpy(g.members_of(GroupKind::temporal, id));
          },
          py::arg("id"),
          "int64 array: the temporal sequence holding id (registration order, id included);\n"
          "empty if id is in none.")
      .def(
          "multiview_of",
          [](const CompoundGroups& g, id_t id) {
            return to_numpy(g.members_of(GroupKind::multiview, id));
          },
          py::arg("id"),
          "int64 array: the multiview set holding id (id included); empty if id is in none.")
      .def("contains", &CompoundGroups::contains, py::arg("id"),
           "True when id belongs to any temporal sequence or multiview set.")
      .def_property_readonly(
          "temporal_count", [](const CompoundGroups& g) { return g.count(GroupKind::temporal); },
          "Number of temporal sequences registered.")
      .def_property_readonly(
          "multiview_count",
          [](const CompoundGroups& g) { return g.count(GroupKind::multiview); },
          "Number of multiview sets registered.")
      .def(
          "__len__",
          [](const CompoundGroups& g) {
            return g.count(GroupKind::temporal) + g.count(GroupKind::multiview);
          },
          "Number of groups of both kinds.")
      .def("__repr__", [](const CompoundGroups& g) {
        return "CompoundGroups(temporal=" + std::to_string(g.count(GroupKind::temporal)) +
               ", multiview=" + std::to_string(g.count(GroupKind::multiview)) + ")";
      }, "Short summary: group counts of each kind.");

  m.def(
      "expand_compound",
      [](const CompoundGroups& groups, py::object ids, py::object scores, double temporal_decay,
         double multiview_decay) {
        auto i = checked_array<id_t>(ids, "ids", 1);
        auto s = checked_array<float>(scores, "scores", 1);
        if (i.size() != s.size()) {
          throw std::invalid_argument("ids has " + std::to_string(i.size()) + " entries but scores has " +
                                      std::to_string(s.size()) + "; pass one score per id");
        }
        CompoundGroups::Expanded out;
        {
          py::gil_scoped_release release;
          out = groups.expand(i.data(), s.data(), static_cast<std::size_t>(i.size()),
                              static_cast<float>(temporal_decay),
                              static_cast<float>(multiview_decay));
        }
        return py::make_tuple(to_numpy(std::move(out.ids)), to_numpy(std::move(out.scores)),
                              to_numpy(std::move(out.origin)));
      },
      py::arg("groups"), py::arg("ids"), py::arg("scores"), py::kw_only(),
      py::arg("temporal_decay") = 0.8, py::arg("multiview_decay") = 0.7,
      R"doc(Expands retrieved ids with the rest of their compound documents (KIRA stage 3).

Every retrieved id keeps its own score. Every other member of its temporal sequence is
offered temporal_decay * score, of its multiview set multiview_decay * score; an id that was
not retrieved keeps the best offer (equal offers: the smaller origin id). One level only:
pulled-in ids pull in nothing further. Id -1 (search padding) is skipped; a repeated
retrieved id keeps its best score.

Parameters
----------
groups : CompoundGroups.
ids : int64 (n,) retrieved ids.  scores : float32 (n,), finite except where id is -1.
temporal_decay, multiview_decay : keyword-only, in [0, 1] (KIRA: 0.8 and 0.7).

Returns
-------
(ids int64 (m,), scores float32 (m,), origin int64 (m,)) sorted by score descending, ties
to the smaller id; origin is the retrieved id that pulled each one in (itself if retrieved).

Raises
------
ValueError: wrong dtype/shape, length mismatch, NaN/inf score, decay outside [0, 1].

Thread safety: the GIL is released; safe to call concurrently, also with add_* calls.)doc");
}

}  // namespace

void bind_retrieval(py::module_& m) {
  bind_rrf(m);
  bind_hops(m);
  bind_regions(m);
  bind_compound(m);
}

}  // namespace kira::bindings
