#include "bindings.hpp"
namespace kira::bindings {
void bind_retrieval(pybind11::module_&) {}
}  // namespace kira::bindings
