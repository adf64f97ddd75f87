// python/bindings/array.cc — cuxla.Array as Python sees it (shape, dtype,
// device, host copies, deletion), the dtypes cuxla knows, and host memory
// copied to a device.
#include <cstdint>
#include <string>
#include <vector>

#include "bindings.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

DType DTypeNamed(const std::string& name) {
  if (auto dtype = DTypeFromName(name)) return *dtype;
  throw Error(ErrorKind::kBuffer, "cuxla does not support dtype " + name);
}

}  // namespace

nb::class_<Array> RegisterArray(nb::module_& m) {
  m.attr("DTYPES") = [] {
    nb::list names;
    for (int i = 0; i <= static_cast<int>(DType::kFloat8E8M0FNU); ++i)
      names.append(std::string(DTypeName(static_cast<DType>(i))));
    return nb::tuple(names);
  }();

  m.def("_buffer_alignment", [](const std::string& platform) { return BufferAlignment(PlatformOf(platform)); },
        "platform"_a, "The alignment XLA on `platform` needs of a buffer's address to view it.");

  m.def("_from_host", [](uintptr_t data, const std::string& dtype, std::vector<int64_t> dims,
                         const PyDevice& device) {
    HostBuffer host{reinterpret_cast<const void*>(data), DTypeNamed(dtype), std::move(dims), {}};
    nb::gil_scoped_release release;
    return Array::FromHost(device.state, host, *device.device);
  }, "data"_a, "dtype"_a, "dims"_a, "device"_a,
     "Copies C-contiguous host memory at `data` to `device`.");

  nb::class_<Array> array(m, "Array");
  array
      .def_prop_ro("shape", [](const Array& a) { return Tuple(a.dims()); })
      .def_prop_ro("dtype", [](const Array& a) { return NumpyDType(a.dtype()); })
      .def_prop_ro("ndim", [](const Array& a) { return a.dims().size(); })
      .def_prop_ro("size", &Array::size)
      .def_prop_ro("nbytes", &Array::nbytes)
      .def_prop_ro("layout", [](const Array& a) { return Tuple(a.layout()); }, "Minor-to-major dimension order.")
      .def_prop_ro("device", [](const Array& a) { a.buffer(); return PyDevice(a.state(), a.device()); })
      .def_prop_ro("is_deleted", &Array::is_deleted)
      .def_prop_ro("is_view", [](const Array& a) { return a.is_view(); },
                   "True when the array aliases memory owned elsewhere (an import).")
      .def("unsafe_buffer_pointer", &Array::UnsafeBufferPointer)
      .def("block_until_ready", [](nb::handle self) {
        const Array held = nb::cast<const Array&>(self);  // another thread may delete self meanwhile
        {
          nb::gil_scoped_release release;
          held.BlockUntilReady();
        }
        return nb::borrow(self);
      })
      .def("numpy", [](const Array& a) {
        a.buffer();  // raise before allocating for a deleted array
        nb::object out = nb::module_::import_("numpy").attr("empty")(Tuple(a.dims()), NumpyDType(a.dtype()));
        auto data = nb::cast<uintptr_t>(out.attr("ctypes").attr("data"));
        const Array held = a;  // another thread may delete `a` meanwhile
        {
          nb::gil_scoped_release release;
          held.CopyToHost(reinterpret_cast<void*>(data), static_cast<size_t>(held.nbytes()));
        }
        return out;
      }, "A host copy as a NumPy array.")
      .def("delete", &Array::Delete, "Frees the device buffer now.")
      .def("__repr__", [](const Array& a) {
        if (a.is_deleted()) return std::string("Array(<deleted>)");
        return "Array(shape=" + pjrt::TupleText(a.dims()) + ", dtype=" + std::string(DTypeName(a.dtype())) +
               ", device=" + a.device().platform_name + ":" + std::to_string(a.device().id) + ")";
      });
  return array;
}

}  // namespace cuxla::bindings
