// Bindings for the default image stack's classical features: pixel_descriptor and
// saliency_maps. Validate under the GIL, release it for the work, std::invalid_argument ->
// ValueError; a wrong dtype is a TypeError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "kira/pixel_descriptor.hpp"
#include "kira/saliency_map.hpp"

namespace py = pybind11;

namespace kira::bindings {
namespace {

// obj as a C-contiguous uint8 (n, size, size, 3) array: TypeError for another type or dtype,
// ValueError for another shape or layout.
py::array_t<std::uint8_t> square_rgb_batch(py::handle obj, const char* what) {
  if (!py::isinstance<py::array>(obj)) {
    throw py::type_error(std::string(what) + " must be a numpy uint8 array (n, size, size, 3), got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  }
  auto arr = py::reinterpret_borrow<py::array>(obj);
  if (!py::isinstance<py::array_t<std::uint8_t>>(arr)) {
    throw py::type_error(std::string(what) + " has dtype " + std::string(py::str(arr.dtype())) +
                         ", expected uint8 (n, size, size, 3)");
  }
  if (arr.ndim() != 4 || arr.shape(3) != 3 || arr.shape(1) != arr.shape(2) || arr.shape(1) < 1) {
    throw std::invalid_argument(std::string(what) + " must have shape (n, size, size, 3), got " +
                                std::string(py::str(py::tuple(py::cast(std::vector<py::ssize_t>(
                                    arr.shape(), arr.shape() + arr.ndim()))))));
  }
  if (!(arr.flags() & py::array::c_style)) {
    throw std::invalid_argument(std::string(what) + " is not C-contiguous; pass np.ascontiguousarray(" +
                                what + ")");
  }
  return py::reinterpret_borrow<py::array_t<std::uint8_t>>(arr);
}

SaliencyOptions saliency_options(int grid, int residual_filter, double residual_sigma, double centre_sigma,
                                 double surround_sigma, double residual_weight) {
  SaliencyOptions o;
  o.grid = grid;
  o.residual_filter = residual_filter;
  o.residual_sigma = residual_sigma;
  o.centre_sigma = centre_sigma;
  o.surround_sigma = surround_sigma;
  o.residual_weight = residual_weight;
  return o;
}

}  // namespace

void bind_pixels(py::module_& m) {
  m.def(
      "saliency_maps",
      [](py::object images, int grid, int residual_filter, double residual_sigma, double centre_sigma,
         double surround_sigma, double residual_weight) {
        auto a = square_rgb_batch(images, "images");
        const auto n = static_cast<std::size_t>(a.shape(0)), size = static_cast<std::size_t>(a.shape(1));
        const auto o = saliency_options(grid, residual_filter, residual_sigma, centre_sigma, surround_sigma,
                                        residual_weight);
        py::array_t<float> out({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(grid),
                                static_cast<py::ssize_t>(grid)});
        float* dst = out.mutable_data();
        {
          py::gil_scoped_release release;
          saliency_maps(a.data(), n, size, o, dst);
        }
        return out;
      },
      py::arg("images"), py::kw_only(), py::arg("grid"), py::arg("residual_filter"),
      py::arg("residual_sigma"), py::arg("centre_sigma"), py::arg("surround_sigma"), py::arg("residual_weight"),
      "Saliency maps (spectral residual + centre-surround contrast) of uint8 (n, size, size, 3): float32\n"
      "(n, grid, grid) in [0, 1], zeros for a uniform image. The GIL is released.");

  m.def(
      "pixel_descriptor",
      [](py::object images, py::object colour_table, int colour_bins, std::vector<int> colour_levels,
         std::vector<int> lbp_radii, std::vector<int> texture_levels, int orientation_bins,
         std::vector<int> gradient_levels, int layout_grid, int salience_grid, double mirror_weight,
         double salience_mirror_weight, std::vector<double> weights, int saliency_grid, int residual_filter,
         double residual_sigma, double centre_sigma, double surround_sigma, double residual_weight) {
        auto a = square_rgb_batch(images, "images");
        if (!py::isinstance<py::array_t<std::int32_t>>(colour_table)) {
          throw py::type_error("colour_table must be a numpy int32 array of 32768 colour bins");
        }
        auto table = py::reinterpret_borrow<py::array_t<std::int32_t>>(colour_table);
        if (table.ndim() != 1 || !(table.flags() & py::array::c_style)) {
          throw std::invalid_argument("colour_table must be a contiguous 1-d int32 array");
        }
        if (weights.size() != 5) {
          throw std::invalid_argument(
              "weights must be 5 block weights (colour, texture, gradient, layout, salience)");
        }
        PixelDescriptorOptions o;
        o.colour_table.assign(table.data(), table.data() + table.shape(0));
        o.colour_bins = colour_bins;
        o.colour_levels = std::move(colour_levels);
        o.lbp_radii = std::move(lbp_radii);
        o.texture_levels = std::move(texture_levels);
        o.orientation_bins = orientation_bins;
        o.gradient_levels = std::move(gradient_levels);
        o.layout_grid = layout_grid;
        o.salience_grid = salience_grid;
        o.mirror_weight = mirror_weight;
        o.salience_mirror_weight = salience_mirror_weight;
        o.colour_weight = weights[0];
        o.texture_weight = weights[1];
        o.gradient_weight = weights[2];
        o.layout_weight = weights[3];
        o.salience_weight = weights[4];
        o.saliency = saliency_options(saliency_grid, residual_filter, residual_sigma, centre_sigma,
                                      surround_sigma, residual_weight);
        const auto n = static_cast<std::size_t>(a.shape(0)), size = static_cast<std::size_t>(a.shape(1));
        const std::size_t dim = pixel_descriptor_dim(o);
        py::array_t<float> out({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(dim)});
        float* dst = out.mutable_data();
        {
          py::gil_scoped_release release;
          pixel_descriptors(a.data(), n, size, o, dst);
        }
        return out;
      },
      py::arg("images"), py::arg("colour_table"), py::kw_only(), py::arg("colour_bins"),
      py::arg("colour_levels"), py::arg("lbp_radii"), py::arg("texture_levels"),
      py::arg("orientation_bins"), py::arg("gradient_levels"), py::arg("layout_grid"),
      py::arg("salience_grid"), py::arg("mirror_weight"), py::arg("salience_mirror_weight"),
      py::arg("weights"), py::arg("saliency_grid"), py::arg("residual_filter"), py::arg("residual_sigma"),
      py::arg("centre_sigma"), py::arg("surround_sigma"), py::arg("residual_weight"),
      "The default pixel descriptor of uint8 (n, size, size, 3): float32 (n, dim) unit rows.\n"
      "The GIL is released.");
}

}  // namespace kira::bindings
