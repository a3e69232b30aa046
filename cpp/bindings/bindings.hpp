// Each binding file registers one family of names on the module.
#pragma once
#include <pybind11/pybind11.h>

namespace kira::bindings {
void bind_indexes(pybind11::module_& m);    // FlatIndex, HNSWIndex, simd_level
void bind_retrieval(pybind11::module_& m);  // rrf_fuse, residual_hops, extract_regions, compound
void bind_pixels(pybind11::module_& m);     // pixel_descriptor, saliency_maps
}  // namespace kira::bindings
