// FlatIndex, HNSWIndex and simd_level. Arguments are validated here under the GIL
// (dtype, contiguity, shape); the core validates values (NaN, zeros, ids) and the GIL is
// released for the work. std::invalid_argument becomes ValueError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings.hpp"
#include "kira/dispatch.hpp"
#include "kira/flat_index.hpp"
#include "kira/groups.hpp"
#include "kira/hnsw_index.hpp"
#include "kira/index_file.hpp"

namespace py = pybind11;
using namespace pybind11::literals;

namespace kira::bindings {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

std::string type_name(const py::handle& obj) { return py::str(py::type::of(obj).attr("__name__")); }

// A float32 C-contiguous (n, dim) array (or (dim,) when one_d_ok). No copies: float64
// and strided input are refused with the conversion to use.
struct Rows {
  py::array array;  // keeps the buffer alive while the GIL is released
  const float* data;
  std::size_t n;
};

Rows as_rows(const py::handle& obj, std::size_t dim, const char* name, bool one_d_ok) {
  if (!py::isinstance<py::array>(obj)) {
    bad(std::string(name) + " must be a numpy float32 array, got " + type_name(obj) +
        "; use np.asarray(" + name + ", dtype=np.float32)");
  }
  auto arr = py::reinterpret_borrow<py::array>(obj);
  if (!arr.dtype().is(py::dtype::of<float>())) {
    bad(std::string(name) + " must be float32, got " + std::string(py::str(arr.dtype())) +
        "; convert with np.asarray(" + name + ", dtype=np.float32) (kira does not copy silently)");
  }
  std::size_t n;
  if (arr.ndim() == 2) {
    n = static_cast<std::size_t>(arr.shape(0));
    if (static_cast<std::size_t>(arr.shape(1)) != dim) {
      bad(std::string(name) + " must have " + std::to_string(dim) + " columns (the index dim), got " +
          std::to_string(arr.shape(1)));
    }
  } else if (arr.ndim() == 1 && one_d_ok) {
    n = 1;
    if (static_cast<std::size_t>(arr.shape(0)) != dim) {
      bad(std::string(name) + " must have length " + std::to_string(dim) + " (the index dim), got " +
          std::to_string(arr.shape(0)));
    }
  } else {
    bad(std::string(name) + " must be a 2-d array of shape (n, " + std::to_string(dim) + ")" +
        (one_d_ok ? " or a 1-d array of length " + std::to_string(dim) : std::string()) + ", got " +
        std::to_string(arr.ndim()) + " dimensions");
  }
  if (!(arr.flags() & py::array::c_style)) {
    bad(std::string(name) + " must be C-contiguous; use np.ascontiguousarray(" + name + ")");
  }
  return Rows{arr, static_cast<const float*>(arr.data()), n};
}

// Integer ids from an integer array or a sequence of ints, as int64 (a copy: ids are small).
std::vector<id_t> as_ids(const py::handle& obj, const char* name) {
  py::array arr = py::isinstance<py::array>(obj) ? py::reinterpret_borrow<py::array>(obj)
                                                 : py::array(py::module_::import("numpy").attr("asarray")(obj));
  const char kind = arr.dtype().kind();
  if (arr.size() > 0 && kind != 'i' && kind != 'u') {
    bad(std::string(name) + " must be integers (int64), got " + std::string(py::str(arr.dtype())) +
        "; use np.asarray(" + name + ", dtype=np.int64)");
  }
  if (arr.ndim() != 1) {
    bad(std::string(name) + " must be a 1-d array of ids, got " + std::to_string(arr.ndim()) +
        " dimensions; wrap a single id as [id]");
  }
  auto cast = py::array_t<id_t, py::array::c_style | py::array::forcecast>::ensure(arr);
  if (!cast) throw py::error_already_set();
  return std::vector<id_t>(cast.data(), cast.data() + cast.size());
}

std::size_t as_k(py::ssize_t k) {
  if (k <= 0) bad("k must be a positive integer, got " + std::to_string(k));
  if (k > (py::ssize_t{1} << 24)) bad("k must be at most 16777216, got " + std::to_string(k));
  return static_cast<std::size_t>(k);
}

std::size_t as_threads(const std::optional<py::ssize_t>& threads) {
  if (!threads) return 0;
  if (*threads <= 0) bad("threads must be a positive integer or None (all cores), got " + std::to_string(*threads));
  return static_cast<std::size_t>(*threads);
}

// The file system's bytes for path (str or os.PathLike): a name that is not UTF-8 (kept by
// Python as lone surrogates) reaches the file system unchanged. A NUL would cut the name
// short in the C calls: refused.
std::string as_path(const py::object& path) {
  const std::string p = py::bytes(py::module_::import("os").attr("fsencode")(path));
  if (p.find('\0') != std::string::npos) bad("path contains a NUL character; pass a path without one");
  if (p.empty()) bad("path is empty; pass a file path");
  return p;
}

void check_ef(py::ssize_t ef, const char* name, const char* none_means = "") {
  if (ef < 1 || static_cast<std::size_t>(ef) > kMaxEf) {
    bad(std::string(name) + " must be a positive integer at most " + std::to_string(kMaxEf) + none_means + ", got " +
        std::to_string(ef));
  }
}

void check_dim(py::ssize_t dim) {
  if (dim <= 0 || static_cast<std::size_t>(dim) > kMaxDim) {
    bad("dim must be between 1 and " + std::to_string(kMaxDim) + ", got " + std::to_string(dim));
  }
}

template <class Index>
py::tuple search_impl(const Index& index, const py::object& queries, py::ssize_t k, const py::object& allow,
                      const std::shared_ptr<GroupMap>& groups, py::ssize_t per_group,
                      const std::optional<py::ssize_t>& threads, const std::optional<py::ssize_t>& ef = std::nullopt) {
  const std::size_t kk = as_k(k);
  if (ef) check_ef(*ef, "ef", " or None (the index's ef_search)");
  const std::size_t t = as_threads(threads);
  Rows q = as_rows(queries, index.dim(), "queries", true);
  std::optional<IdFilter> filter;
  if (!allow.is_none()) filter.emplace(as_ids(allow, "allow"));
  if (per_group < 1) bad("per_group must be a positive integer, got " + std::to_string(per_group));
  const GroupLimit limit{groups.get(), static_cast<std::size_t>(per_group)};
  py::array_t<id_t> ids({static_cast<py::ssize_t>(q.n), static_cast<py::ssize_t>(kk)});
  py::array_t<float> scores({static_cast<py::ssize_t>(q.n), static_cast<py::ssize_t>(kk)});
  id_t* ip = ids.mutable_data();
  float* sp = scores.mutable_data();
  {
    py::gil_scoped_release release;
    if constexpr (std::is_same_v<Index, HNSWIndex>) {
      index.search(q.data, q.n, kk, filter ? &*filter : nullptr, groups ? &limit : nullptr, t, ip, sp,
                   ef ? static_cast<std::size_t>(*ef) : 0);
    } else {
      index.search(q.data, q.n, kk, filter ? &*filter : nullptr, groups ? &limit : nullptr, t, ip, sp);
    }
  }
  return py::make_tuple(ids, scores);
}

template <class Index>
py::array_t<float> get_vectors_impl(const Index& index, const py::object& ids_obj) {
  const std::vector<id_t> ids = as_ids(ids_obj, "ids");
  py::array_t<float> out({static_cast<py::ssize_t>(ids.size()), static_cast<py::ssize_t>(index.dim())});
  float* op = out.mutable_data();
  {
    py::gil_scoped_release release;
    index.get_vectors(ids.data(), ids.size(), op);
  }
  return out;
}

template <class Index>
py::array_t<id_t> ids_impl(const Index& index) {
  std::vector<id_t> ids = index.ids();
  py::array_t<id_t> out(static_cast<py::ssize_t>(ids.size()));
  std::copy(ids.begin(), ids.end(), out.mutable_data());
  return out;
}

template <class Index>
void remove_impl(Index& index, const py::object& ids_obj) {
  const std::vector<id_t> ids = as_ids(ids_obj, "ids");
  py::gil_scoped_release release;
  index.remove(ids.data(), ids.size());
}

template <class Index>
void save_impl(const Index& index, const py::object& path) {
  const std::string p = as_path(path);
  py::gil_scoped_release release;
  index.save(p);
}

// search's docstring, shared by FlatIndex and HNSWIndex (HNSWIndex adds its ef line).
constexpr const char* kSearchDoc =
    "Top-k cosine search.\n\n"
    "queries: float32 C-contiguous (m, dim) or (dim,) (m = 1); normalised here, not in place.\n"
    "k: results per query, >= 1.\n"
    "allow: optional int64 ids; only these ids may be returned (unknown ids are ignored).\n"
    "groups: optional GroupMap; then at most per_group (>= 1) results of one group come\n"
    "back, the best of each (FlatIndex: exactly the top k under that cap), so fewer than\n"
    "k may return when few groups exist. Ids the map does not label are each their own group.\n"
    "threads: worker threads for the batch (None = all cores).\n"
    "Returns (ids int64 (m, k), scores float32 (m, k)) best first, ties to the smaller id,\n"
    "padded with id -1 and score -inf when fewer than k results exist.\n"
    "Raises ValueError for float64/non-contiguous/wrong-shaped queries (no silent copy),\n"
    "NaN/inf or all-zero query rows, k < 1, threads < 1.\n"
    "Thread safety: concurrent search calls from several Python threads are safe and run\n"
    "in parallel (shared lock; the GIL is released).";

// Methods FlatIndex and HNSWIndex share, with the same docstrings.
template <class Index, class Class>
void bind_common(Class& cls, const char* name) {
  const std::string n(name);
  cls.def("remove", &remove_impl<Index>, "ids"_a,
          "Remove ids (int64 1-d array or sequence of ints).\n\n"
          "Raises ValueError, leaving the index unchanged, if an id is not present or is repeated.\n"
          "Thread safety: exclusive; waits for running searches and blocks new ones. GIL released.");
  cls.def("__len__", &Index::size, "Number of stored vectors. Thread safety: shared lock.");
  cls.def_property_readonly("dim", &Index::dim, "Vector dimension (fixed at construction).");
  cls.def_property_readonly(
      "dtype", [](const Index& i) { return std::string(dtype_name(i.dtype())); },
      "Storage encoding: \"f32\", \"f16\" or \"i8\".");
  cls.def("ids", &ids_impl<Index>, "Stored ids, int64 1-d array, ascending. Thread safety: shared lock.");
  cls.def("contains", &Index::contains, "id"_a, "Whether id is stored (removed ids are not). Thread safety: shared lock.");
  cls.def("get_vectors", &get_vectors_impl<Index>, "ids"_a,
          "Decoded unit vectors of ids, float32 (n, dim) (f16/i8 decoded from storage).\n\n"
          "Raises ValueError for an unknown id. Thread safety: shared lock; GIL released.");
  cls.def("memory_bytes", &Index::memory_bytes,
          "Approximate bytes held by vectors, ids and (HNSW) links. Thread safety: shared lock.");
  cls.def("save", &save_impl<Index>, "path"_a,
          "Write the index to path (str or os.PathLike) atomically: a temporary file in the same\n"
          "directory, fsync, rename. See docs/core-indexes.md for the format.\n"
          "Raises OSError when the file cannot be written. Thread safety: shared lock (searches\n"
          "may continue meanwhile); GIL released.");
  cls.def_static(
      "load",
      [](const py::object& path) {
        const std::string p = as_path(path);
        py::gil_scoped_release release;
        return Index::load(p);
      },
      "path"_a,
      ("Read an index written by " + n + ".save.\n\n"
       "Raises ValueError naming the problem for a truncated, corrupted or foreign file, a\n"
       "wrong format version, or a file of the other index kind; FileNotFoundError/OSError if\n"
       "it cannot be read.")
          .c_str());
}

}  // namespace

void bind_indexes(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const FileError& e) {
      PyErr_SetString(e.errno_value == ENOENT ? PyExc_FileNotFoundError : PyExc_OSError, e.what());
    }
  });

  py::class_<GroupMap, std::shared_ptr<GroupMap>>(
      m, "GroupMap",
      "Labels ids with groups for a capped search: index.search(q, k, groups=g, per_group=2)\n"
      "returns at most 2 results of any one group (e.g. chunks of one document).\n\n"
      "GroupMap(ids, groups): int64 1-d arrays of equal length, both non-negative; an id given\n"
      "twice raises ValueError. Immutable; safe to share between threads and searches.")
      .def(py::init([](const py::object& ids_obj, const py::object& groups_obj) {
             const std::vector<id_t> ids = as_ids(ids_obj, "ids");
             const std::vector<id_t> groups = as_ids(groups_obj, "groups");
             if (ids.size() != groups.size())
               bad(std::to_string(ids.size()) + " ids but " + std::to_string(groups.size()) +
                   " groups; pass one group per id");
             return std::make_shared<GroupMap>(ids.data(), groups.data(), ids.size());
           }),
           "ids"_a, "groups"_a)
      .def("__len__", &GroupMap::size, "Number of labelled ids.")
      .def(
          "group_of",
          [](const GroupMap& map, const py::object& ids_obj) {
            const std::vector<id_t> ids = as_ids(ids_obj, "ids");
            py::array_t<id_t> out(static_cast<py::ssize_t>(ids.size()));
            id_t* op = out.mutable_data();
            for (std::size_t i = 0; i < ids.size(); ++i) op[i] = map.group(ids[i]);
            return out;
          },
          "ids"_a, "Group of each id, int64; an unlabelled id gets -1 - id (a group of its own).");

  m.def("simd_level", [] { return std::string(simd_level()); },
        "Kernel set chosen at run time for this CPU: \"avx512\", \"avx2\" or \"scalar\".\n"
        "Chosen once on first use; KIRA_SIMD=scalar|avx2 in the environment lowers it.");

  py::class_<FlatIndex, CosineIndex, std::shared_ptr<FlatIndex>> flat(
      m, "FlatIndex",
      "Exact cosine-similarity index: every search scans all stored vectors.\n\n"
      "FlatIndex(dim, *, dtype=\"f32\"|\"f16\"|\"i8\"). Vectors are normalised on add; scores are\n"
      "dot products of unit vectors. Thread safety: searches and other reads share a lock and\n"
      "run in parallel; add/remove take it exclusively.");
  flat.def(py::init([](py::ssize_t dim, const std::string& dtype) {
             check_dim(dim);
             return std::make_shared<FlatIndex>(static_cast<std::size_t>(dim), parse_dtype(dtype));
           }),
           "dim"_a, py::kw_only(), "dtype"_a = "f32",
           "Create an empty index of dim-dimensional vectors stored as dtype \"f32\", \"f16\" or \"i8\".");
  flat.def(
      "add",
      [](FlatIndex& index, const py::object& ids_obj, const py::object& vectors) {
        const std::vector<id_t> ids = as_ids(ids_obj, "ids");
        Rows v = as_rows(vectors, index.dim(), "vectors", false);
        if (ids.size() != v.n) {
          bad("ids has " + std::to_string(ids.size()) + " entries but vectors has " + std::to_string(v.n) +
              " rows; pass one id per row");
        }
        py::gil_scoped_release release;
        index.add(ids.data(), v.data, v.n);
      },
      "ids"_a, "vectors"_a,
      "Add vectors under ids.\n\n"
      "ids: int64 (n,) (any integer array or sequence of ints), non-negative, unique.\n"
      "vectors: float32 C-contiguous (n, dim); each row is normalised to unit length.\n"
      "Raises ValueError, leaving the index unchanged, for an id already present or repeated\n"
      "in ids, float64 or non-contiguous vectors (convert with np.asarray(v, dtype=np.float32)),\n"
      "a wrong shape, NaN/inf or all-zero rows.\n"
      "Thread safety: exclusive; waits for running searches. GIL released.");
  flat.def(
      "search",
      [](const FlatIndex& index, const py::object& queries, py::ssize_t k, const py::object& allow,
         const std::shared_ptr<GroupMap>& groups, py::ssize_t per_group, const std::optional<py::ssize_t>& threads) {
        return search_impl(index, queries, k, allow, groups, per_group, threads);
      },
      "queries"_a, "k"_a, py::kw_only(), "allow"_a = py::none(), "groups"_a = py::none(), "per_group"_a = 1,
      "threads"_a = py::none(), kSearchDoc);
  bind_common<FlatIndex>(flat, "FlatIndex");
  flat.def("__repr__", [](const FlatIndex& i) {
    return "FlatIndex(dim=" + std::to_string(i.dim()) + ", dtype=\"" + dtype_name(i.dtype()) +
           "\", size=" + std::to_string(i.size()) + ")";
  });

  py::class_<HNSWIndex, CosineIndex, std::shared_ptr<HNSWIndex>> hnsw(
      m, "HNSWIndex",
      "Approximate cosine-similarity index over an HNSW graph.\n\n"
      "HNSWIndex(dim, *, M=16, ef_construction=200, seed=0, dtype=\"f32\"|\"f16\"|\"i8\").\n"
      "Removal leaves a tombstone that still routes searches but is never returned.\n"
      "Thread safety: searches and other reads share a lock and run in parallel; add/remove\n"
      "take it exclusively; ef_search may be set at any time.");
  hnsw.def(py::init([](py::ssize_t dim, py::ssize_t M, py::ssize_t ef_construction, std::uint64_t seed,
                       const std::string& dtype) {
             check_dim(dim);
             if (M < 2 || M > 256) bad("M must be between 2 and 256, got " + std::to_string(M));
             check_ef(ef_construction, "ef_construction");
             HNSWIndex::Params p;
             p.M = static_cast<std::size_t>(M);
             p.ef_construction = static_cast<std::size_t>(ef_construction);
             p.seed = seed;
             return std::make_shared<HNSWIndex>(static_cast<std::size_t>(dim), p, parse_dtype(dtype));
           }),
           "dim"_a, py::kw_only(), "M"_a = 16, "ef_construction"_a = 200, "seed"_a = 0, "dtype"_a = "f32",
           "Create an empty graph index.\n\n"
           "M: links per node on upper layers (2*M on layer 0), 2..256.\n"
           "ef_construction: candidate list size while inserting (quality vs build time).\n"
           "seed: seeds the layer assignment; with add(..., threads=1) the graph is deterministic.\n"
           "dtype: storage encoding \"f32\", \"f16\" or \"i8\".");
  hnsw.def(
      "add",
      [](HNSWIndex& index, const py::object& ids_obj, const py::object& vectors,
         const std::optional<py::ssize_t>& threads) {
        const std::size_t t = as_threads(threads);
        const std::vector<id_t> ids = as_ids(ids_obj, "ids");
        Rows v = as_rows(vectors, index.dim(), "vectors", false);
        if (ids.size() != v.n) {
          bad("ids has " + std::to_string(ids.size()) + " entries but vectors has " + std::to_string(v.n) +
              " rows; pass one id per row");
        }
        py::gil_scoped_release release;
        index.add(ids.data(), v.data, v.n, t);
      },
      "ids"_a, "vectors"_a, py::kw_only(), "threads"_a = py::none(),
      "Insert vectors under ids.\n\n"
      "ids: int64 (n,) (any integer array or sequence of ints), non-negative, unique; a removed\n"
      "id may be added again.\n"
      "vectors: float32 C-contiguous (n, dim); each row is normalised to unit length.\n"
      "threads: insertion workers (None = all cores; batches under 256 use one). threads=1\n"
      "gives a deterministic graph for the seed.\n"
      "Raises ValueError, leaving the index unchanged, for an id already present or repeated\n"
      "in ids, float64 or non-contiguous vectors (convert with np.asarray(v, dtype=np.float32)),\n"
      "a wrong shape, NaN/inf or all-zero rows.\n"
      "Thread safety: exclusive; waits for running searches. GIL released.");
  hnsw.def_property(
      "ef_search", &HNSWIndex::ef_search,
      [](HNSWIndex& index, py::ssize_t ef) {
        check_ef(ef, "ef_search");
        index.set_ef_search(static_cast<std::size_t>(ef));
      },
      "Candidate list size for search (default 64; a search uses max(ef_search, k)).\n"
      "Thread safety: atomic; may be set while searches run.");
  hnsw.def_property_readonly("M", [](const HNSWIndex& i) { return i.params().M; }, "Links per node (construction parameter).");
  hnsw.def_property_readonly("ef_construction", [](const HNSWIndex& i) { return i.params().ef_construction; },
                             "Candidate list size used while inserting.");
  hnsw.def_property_readonly("seed", [](const HNSWIndex& i) { return i.params().seed; }, "Seed of the layer assignment.");
  hnsw.def("search", &search_impl<HNSWIndex>, "queries"_a, "k"_a, py::kw_only(), "allow"_a = py::none(),
           "groups"_a = py::none(), "per_group"_a = 1, "threads"_a = py::none(), "ef"_a = py::none(),
           (std::string(kSearchDoc) +
            "\nef: candidate list size for this call (None = ef_search); the search uses max(ef, k).\n"
            "A per-call ef leaves ef_search alone, so concurrent callers may each pass their own.")
               .c_str());
  bind_common<HNSWIndex>(hnsw, "HNSWIndex");
  hnsw.def("__repr__", [](const HNSWIndex& i) {
    return "HNSWIndex(dim=" + std::to_string(i.dim()) + ", M=" + std::to_string(i.params().M) + ", dtype=\"" +
           dtype_name(i.dtype()) + "\", size=" + std::to_string(i.size()) + ")";
  });
}

}  // namespace kira::bindings
