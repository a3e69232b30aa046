#include "bindings.hpp"
namespace kira::bindings {
void bind_indexes(pybind11::module_&) {}
}  // namespace kira::bindings
