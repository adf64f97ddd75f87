// python/bindings/bindings.h — what the binding sources share: the Python view
// of a device, small conversions, and the DLPack entry points of dlpack.cc.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <optional>
#include <string>

#include "cuxla/cuxla.h"

namespace cuxla::bindings {

namespace nb = nanobind;

// A device as Python sees it: it keeps its client alive.
struct PyDevice {
  std::shared_ptr<const ClientState> state;
  const Device* device;
};

inline PyDevice Wrap(const std::shared_ptr<const ClientState>& state, const Device& device) {
  return PyDevice{state, &device};
}

inline nb::tuple Shape(const Array& array) {
  nb::list shape;
  for (int64_t d : array.dims()) shape.append(d);
  return nb::tuple(shape);
}

// numpy.dtype of a cuxla dtype (ml_dtypes registers bfloat16 and the float8s).
nb::object NumpyDType(DType dtype);

// Where an import goes: a client, a device, or (both null) the default
// client of the tensor's platform, on the tensor's own device.
struct ImportTarget {
  std::shared_ptr<const ClientState> state;
  const Device* device = nullptr;
};

// XLA's external-ready stream as ordered for the first CUDA tensor of a
// batch of imports (one call's arguments), reused for the others on the
// same device: one stream wait per call instead of one per tensor.
struct ReadyStreamCache {
  int device_id = -1;
  intptr_t ready_stream = 0;
};

// Imports any DLPack producer (`__dlpack__` object, DLPack C exchange API)
// or capsule as an Array. `cache` (may be null) spans one batch of imports.
Array ImportObject(nb::handle object, const ImportTarget& target, std::optional<bool> copy,
                   ReadyStreamCache* cache = nullptr);

// from_dlpack, Array.__dlpack__/__dlpack_device__/is_view, and the framework
// fast paths (export_to, call_with).
void RegisterDLPack(nb::module_& m, nb::class_<Array>& array);

}  // namespace cuxla::bindings
