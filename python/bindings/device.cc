// python/bindings/device.cc — cuxla.Device: one device of a client, compared
// and hashed by identity, its client kept alive.
#include <cstdint>
#include <string>

#include "bindings.h"

namespace cuxla::bindings {

void RegisterDevice(nb::module_& m) {
  nb::class_<PyDevice>(m, "Device")
      .def_prop_ro("id", [](const PyDevice& d) { return d.device->id; })
      .def_prop_ro("local_hardware_id", [](const PyDevice& d) { return d.device->local_hardware_id; })
      .def_prop_ro("platform", [](const PyDevice& d) { return d.device->platform; })
      .def_prop_ro("kind", [](const PyDevice& d) { return d.device->kind; })
      .def("__eq__", [](const PyDevice& a, const PyDevice& b) { return a.device == b.device; })
      .def("__hash__", [](const PyDevice& d) { return reinterpret_cast<uintptr_t>(d.device); })
      .def("__repr__", [](const PyDevice& d) {
        return d.device->platform + "(id=" + std::to_string(d.device->id) + ")";
      });
}

}  // namespace cuxla::bindings
