// kira._core: a thin pybind11 layer over the static core library.
// Convention for every binding: validate shapes and dtypes under the GIL, release it for
// the work, throw std::invalid_argument (seen in Python as ValueError) for bad input.
#include <memory>

#include "bindings.hpp"
#include "kira/index.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() = "kira's compiled core: cosine indexes, rank fusion, residual hops, regions, pixel features.";
  // The common base lets functions such as residual_hops take either index type.
  py::class_<kira::CosineIndex, std::shared_ptr<kira::CosineIndex>>(
      m, "CosineIndex", "Base class of FlatIndex and HNSWIndex; not constructible.");
  kira::bindings::bind_indexes(m);
  kira::bindings::bind_retrieval(m);
  kira::bindings::bind_pixels(m);
}
