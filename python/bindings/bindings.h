// python/bindings/bindings.h — what every binding source shares: the Python
// view of a device, small conversions, and the Register* function of each file.
#pragma once

#include <nanobind/nanobind.h>
// The casters of the standard types cuxla's API takes and returns, in every
// binding source: a conversion whose caster a source lacks fails only when run.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "cuxla/cuxla.h"
#include "pjrt/text.h"

namespace cuxla::bindings {

namespace nb = nanobind;

// A device as Python sees it: it keeps its client alive.
struct PyDevice {
  PyDevice(std::shared_ptr<const ClientState> state, const Device& device)
      : state(std::move(state)), device(&device) {}

  std::shared_ptr<const ClientState> state;
  const Device* device;
};

// A Python tuple of ints: shapes, layouts, tile counts.
inline nb::tuple Tuple(std::span<const int64_t> values) {
  nb::list list;
  for (int64_t v : values) list.append(v);
  return nb::tuple(list);
}

// A dict of named counts: the statistics the bindings give Python.
inline nb::dict Counts(std::initializer_list<std::pair<const char*, uint64_t>> counts) {
  nb::dict d;
  for (const auto& [name, count] : counts) d[name] = count;
  return d;
}

// numpy.dtype of a cuxla dtype (ml_dtypes registers bfloat16 and the float8s).
nb::object NumpyDType(DType dtype);

// A bad argument as an error message shows it: its type and repr ("str 'yes'").
std::string Described(nb::handle value);

// A TypeError in one sentence, "<what> must be <expected>, not a <value
// described>" (nanobind's own would list the signature).
[[noreturn]] void RaiseWrongType(const char* what, const char* expected, nb::handle value);

// `value` as a T; else RaiseWrongType.
template <class T>
T ArgumentAs(nb::handle value, const char* what, const char* expected) {
  T out;
  if (!nb::try_cast(value, out)) RaiseWrongType(what, expected, value);
  return out;
}

// An int, and not a bool (which Python counts as one).
inline bool IsInt(nb::handle value) { return PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr()); }

// Raises the Python error a failed C API call left set.
[[noreturn]] inline void RaisePythonError() { throw nb::python_error(); }

// What each binding source adds to the module, in the order module.cc calls them.
void RegisterPlugin(nb::module_& m);      // plugin.cc: Plugin, plugin discovery, the CUDA driver
void RegisterCompileCache(nb::module_& m);  // compile_cache.cc: the on-disk cache's counts and entries
void RegisterDevice(nb::module_& m);      // device.cc: Device, device= arguments
void RegisterClient(nb::module_& m);      // client.cc: Client, client= arguments
void RegisterDefaultClients(nb::module_& m);  // default_clients.cc: one client per platform
nb::class_<Array> RegisterArray(nb::module_& m);  // array.cc: Array, host -> device copies
void RegisterImports(nb::module_& m);     // imports.cc: from_dlpack
void RegisterCapsules(nb::class_<Array>& array);  // capsules.cc: Array.__dlpack__, __dlpack_device__
void RegisterExchangeApi(nb::module_& m);  // exchange_api.cc: export_to
nb::class_<Executable> RegisterExecutable(nb::module_& m);  // executable.cc: Executable
void RegisterCalls(nb::module_& m);       // calls.cc: call_with and its kept views
void RegisterSharding(nb::module_& m, nb::class_<Executable>& executable);  // sharding.cc
void RegisterTorchAllocator(nb::module_& m);  // torch_allocator.cc: PyTorch's allocations from XLA's CUDA pool

}  // namespace cuxla::bindings
