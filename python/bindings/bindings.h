// python/bindings/bindings.h — what the binding sources share: the Python view
// of a device, small conversions, and the DLPack entry points of dlpack.cc.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "cuxla/cuxla.h"
#include "pjrt/text.h"

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

// A Python tuple of ints: shapes, layouts, tile counts.
inline nb::tuple Tuple(std::span<const int64_t> values) {
  nb::list list;
  for (int64_t v : values) list.append(v);
  return nb::tuple(list);
}

// numpy.dtype of a cuxla dtype (ml_dtypes registers bfloat16 and the float8s).
nb::object NumpyDType(DType dtype);

// A bad argument as an error message shows it: its type and repr ("str 'yes'").
std::string Described(nb::handle value);

// `value` as a T; else a TypeError in one sentence, "<what> must be <expected>,
// not a <value described>" (nanobind's own would list the signature).
template <class T>
T ArgumentAs(nb::handle value, const char* what, const char* expected) {
  T out;
  if (!nb::try_cast(value, out))
    throw nb::type_error((std::string(what) + " must be " + expected + ", not a " + Described(value)).c_str());
  return out;
}

// Where an import goes: a client, a device, or (both null) the default
// client of the tensor's platform, on the tensor's own device.
struct ImportTarget {
  std::shared_ptr<const ClientState> state;
  const Device* device = nullptr;
};

// The imports of one execution's arguments: only the first CUDA tensor of a
// device carries the ordering after the producer's stream. The others were
// written before it on that stream, and their views are only ever used in
// the same execution, which waits for all its arguments: they need no
// ordering of their own (through PJRT's external-ready stream, costly per
// view) — but a copy made at import (a strided tensor) runs before that
// execution, and waits for `ready_stream` itself.
struct ImportBatch {
  int device_id = -1;
  intptr_t ready_stream = 0;  // the first import's (0: the compute stream waited, or nothing was pending)
};

// Imports any DLPack producer (`__dlpack__` object, DLPack C exchange API)
// or capsule as an Array. `batch` (may be null): the imports of one execution's arguments.
Array ImportObject(nb::handle object, const ImportTarget& target, std::optional<bool> copy,
                   ImportBatch* batch = nullptr);

// The call of `executable` on Python arguments: cuxla Arrays as they are,
// any other DLPack tensor imported onto its device (zero-copy when possible,
// the imports batched); with `keep_views`, the views of exchange-API tensors
// kept for the next calls (call_views.h). Checked and held with the GIL, as
// Executable::Prepare; run it without.
Executable::Call PrepareCall(const Executable& executable, const nb::args& args, bool keep_views);

// from_dlpack, Array.__dlpack__/__dlpack_device__/is_view, and the framework
// fast paths (export_to, call_with).
void RegisterDLPack(nb::module_& m, nb::class_<Array>& array);

// Mesh, ShardedArray, shard, SPMD compilation and execution (sharding.cc).
void RegisterSharding(nb::module_& m, nb::class_<Executable>& executable);

}  // namespace cuxla::bindings
