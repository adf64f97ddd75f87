// python/bindings/dlpack.cc — the Python side of DLPack: capsules, the
// `__dlpack__` protocol both ways, the DLPack C exchange API fast path, and
// the stream arguments of the array API. The conversions are src/interop's.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings.h"
#include "call_views.h"
#include "interop/export.h"
#include "interop/import.h"
#include "producer_deleters.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kLegacyName = "dltensor";
// CUDA's legacy default stream, as the array API numbers it (and CU_STREAM_LEGACY).
constexpr intptr_t kLegacyDefaultStream = 1;

interop::CopyPolicy Policy(std::optional<bool> copy) {
  if (!copy) return interop::CopyPolicy::kIfNeeded;
  return *copy ? interop::CopyPolicy::kAlways : interop::CopyPolicy::kNever;
}

// The default client of `platform` ("cuda", "cpu"), made by the Python layer
// on first use and kept for the life of the process.
const std::shared_ptr<const ClientState>& DefaultState(const std::string& platform) {
  static auto* states = new std::vector<std::pair<std::string, std::shared_ptr<const ClientState>>>();
  for (const auto& [name, state] : *states)
    if (name == platform) return state;
  nb::object client = nb::module_::import_("cuxla._client").attr("client_for_platform")(platform);
  auto core = nb::cast<std::shared_ptr<Client>>(client.attr("_core"));
  return states->emplace_back(platform, core->state()).second;
}

std::string PlatformOf(int device_type) {
  if (device_type == kDLCUDA) return "cuda";
  if (device_type == kDLCPU) return "cpu";
  throw Error(ErrorKind::kBuffer, "cuxla imports tensors on CPU (1) or CUDA (2) devices, not "
                                  "DLPack device type " + std::to_string(device_type));
}

// The client to import into (the tensor's platform) and the options that take
// the result to `target`.
std::pair<std::shared_ptr<const ClientState>, interop::ImportOptions> Resolve(
    const ImportTarget& target, int device_type, std::optional<bool> copy) {
  const std::string platform = PlatformOf(device_type);
  interop::ImportOptions options;
  options.copy = Policy(copy);
  if (target.state != nullptr && target.state->platform_name == platform && target.device == nullptr)
    return {target.state, options};
  if (target.state != nullptr) {
    options.target_state = target.state;
    options.target_device = target.device != nullptr ? target.device : &target.state->devices.front();
  }
  std::shared_ptr<const ClientState> source =
      target.state != nullptr && target.state->platform_name == platform ? target.state : DefaultState(platform);
  return {source, options};
}

// The DLPack C exchange API of `type` (PyTorch >= 2.10), or null. Found types
// are kept referenced for good, so their cached address stays theirs.
const DLPackExchangeAPI* ExchangeApi(PyTypeObject* type) {
  static auto* known = new std::vector<std::pair<PyTypeObject*, const DLPackExchangeAPI*>>();
  for (const auto& [t, api] : *known)
    if (t == type) return api;
  nb::handle type_handle(reinterpret_cast<PyObject*>(type));
  if (!nb::hasattr(type_handle, "__dlpack_c_exchange_api__")) return nullptr;
  nb::object capsule = type_handle.attr("__dlpack_c_exchange_api__");
  auto* api = static_cast<const DLPackExchangeAPI*>(PyCapsule_GetPointer(capsule.ptr(), "dlpack_exchange_api"));
  if (api == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  if (api->header.version.major != DLPACK_MAJOR_VERSION) return nullptr;
  type_handle.inc_ref();
  known->emplace_back(type, api);
  return api;
}

[[noreturn]] void RaisePythonError() { throw nb::python_error(); }

// interop::ImportDLPack without the GIL, the producer's deleter run with it
// (producer_deleters.h). A copy made at import runs a program, and PJRT may
// wait in it for earlier work to finish: holding the GIL there would stall
// every other Python thread. The tensor is ours by now, and no Python object
// is touched. Afterwards, with the GIL back, the deleters queued meanwhile
// (this import's, if it failed, and those of views XLA let go of) run.
template <class Managed>
Array ImportWithoutGil(const std::shared_ptr<const ClientState>& state, Managed* tensor,
                       const interop::ImportOptions& options) {
  struct RunQueuedAfter {
    ~RunQueuedAfter() { RunQueuedDeleters(); }
  } run_queued_after;  // destroyed after `release`: with the GIL
  tensor = WithGilDeleter(tensor);
  nb::gil_scoped_release release;
  return interop::ImportDLPack(state, tensor, options);
}

// Imports a capsule's tensor. The capsule is renamed used_* (its destructor
// then leaves the tensor to cuxla) only once nothing before the import can
// fail: until then, the capsule still owns the tensor.
template <class Managed>
Array ConsumeCapsule(PyObject* capsule, Managed* tensor, const ImportTarget& target,
                     std::optional<bool> copy, intptr_t ready_stream) {
  auto [state, options] = Resolve(target, tensor->dl_tensor.device.device_type, copy);
  options.producer.ready_stream = ready_stream;
  const bool versioned = std::is_same_v<Managed, DLManagedTensorVersioned>;
  if (PyCapsule_SetName(capsule, versioned ? "used_dltensor_versioned" : "used_dltensor") != 0)
    RaisePythonError();
  return ImportWithoutGil(state, tensor, options);
}

// Consumes a DLPack capsule: renames it used_*, so that its destructor leaves
// the tensor to us, and imports it.
Array ImportCapsule(nb::handle capsule, const ImportTarget& target, std::optional<bool> copy,
                    intptr_t ready_stream) {
  PyObject* c = capsule.ptr();
  if (!PyCapsule_CheckExact(c))
    throw nb::type_error(("__dlpack__ returned a " + std::string(nb::type_name(capsule.type()).c_str()) +
                          ", not a DLPack capsule").c_str());
  const char* name = PyCapsule_GetName(c);
  if (name == nullptr) RaisePythonError();
  const bool versioned = std::string_view(name) == kVersionedName;
  if (!versioned && std::string_view(name) != kLegacyName)
    throw Error(ErrorKind::kValue, std::string_view(name).starts_with("used_")
                                       ? "this DLPack capsule was already consumed"
                                       : "not a DLPack capsule: '" + std::string(name) + "'");
  void* pointer = PyCapsule_GetPointer(c, name);
  if (pointer == nullptr) RaisePythonError();
  return versioned ? ConsumeCapsule(c, static_cast<DLManagedTensorVersioned*>(pointer), target, copy, ready_stream)
                   : ConsumeCapsule(c, static_cast<DLManagedTensor*>(pointer), target, copy, ready_stream);
}

// Orders XLA's first use of a tensor on `device` (of `state`'s client) after
// the exchange-API producer's current stream, on the device; sets `options`'
// producer order (nothing to do off CUDA).
void OrderAfterProducer(const DLPackExchangeAPI* api, const ClientState& state, DLDevice device,
                        ImportBatch* batch, interop::ImportOptions& options) {
  if (device.device_type != kDLCUDA) return;
  if (batch != nullptr && batch->device_id == device.device_id) {
    // Another view of this execution waits for the producer; a copy made
    // now runs on its own, and waits too.
    options.producer.ready_stream = batch->ready_stream;
    options.only_copies_wait = true;
    return;
  }
  void* current = nullptr;
  if (api->current_work_stream(kDLCUDA, device.device_id, &current) != 0) RaisePythonError();
  // The default stream is reported as null; name it so that it is waited on.
  const intptr_t producer = current != nullptr ? reinterpret_cast<intptr_t>(current) : kLegacyDefaultStream;
  // The views of a call's arguments are read by its program alone.
  options.producer = state.OrderAfter(state.DeviceWithHardwareId(device.device_id), producer, batch != nullptr);
  if (batch != nullptr) *batch = ImportBatch{device.device_id, options.producer.ready_stream};
}

// The fast path: no Python-level `__dlpack__`; XLA's first use waits, on the
// device, for the producer's current stream.
Array ImportExchange(const DLPackExchangeAPI* api, nb::handle object, const ImportTarget& target,
                     std::optional<bool> copy, ImportBatch* batch) {
  DLManagedTensorVersioned* tensor = nullptr;
  if (api->managed_tensor_from_py_object_no_sync(object.ptr(), &tensor) != 0) RaisePythonError();
  std::pair<std::shared_ptr<const ClientState>, interop::ImportOptions> resolved;
  try {
    resolved = Resolve(target, tensor->dl_tensor.device.device_type, copy);
    OrderAfterProducer(api, *resolved.first, tensor->dl_tensor.device, batch, resolved.second);
  } catch (...) {
    if (tensor->deleter != nullptr) tensor->deleter(tensor);
    throw;
  }
  return ImportWithoutGil(resolved.first, tensor, resolved.second);
}

// The `__dlpack__` protocol: the producer orders its work before XLA's
// external-ready stream, which XLA's first use of the view waits on. (Before
// the compute stream instead, it would leave no marker of its writes for
// the view's other readers.)
Array ImportProtocol(nb::handle object, const ImportTarget& target, std::optional<bool> copy) {
  auto device = nb::cast<std::pair<int, int>>(object.attr("__dlpack_device__")());
  nb::object stream = nb::none();
  intptr_t ready_stream = 0;
  if (device.first == kDLCUDA) {
    auto [state, options] = Resolve(target, device.first, copy);
    const Device& source = state->DeviceWithHardwareId(device.second);
    ready_stream = state->ExternalReadyStream(source);
    stream = nb::int_(ready_stream);
  }
  nb::object dlpack = object.attr("__dlpack__");
  nb::object capsule;
  try {
    capsule = dlpack("stream"_a = stream, "max_version"_a = nb::make_tuple(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    capsule = dlpack("stream"_a = stream);  // a producer older than DLPack 1.0
  }
  return ImportCapsule(capsule, target, copy, ready_stream);
}

// The array API's stream argument for a consumer on `array`'s device; nullopt: no ordering.
std::optional<intptr_t> ConsumerStream(const Array& array, nb::handle stream) {
  const bool cuda = array.device().platform == Platform::kCuda;
  if (!cuda) {
    if (!stream.is_none() && !(nb::isinstance<nb::int_>(stream) && nb::cast<intptr_t>(stream) == -1))
      throw Error(ErrorKind::kValue, "stream must be None for a CPU array");
    return std::nullopt;
  }
  if (stream.is_none()) return kLegacyDefaultStream;
  if (!nb::isinstance<nb::int_>(stream))
    throw Error(ErrorKind::kValue, "stream must be None or an int, not " +
                                       std::string(nb::type_name(stream.type()).c_str()));
  const auto value = nb::cast<intptr_t>(stream);
  if (value == -1) return std::nullopt;
  if (value == 0) throw Error(ErrorKind::kValue, "stream 0 is ambiguous and disallowed by the array API: use 1 or 2");
  return value;
}

// The capsule name of each kind of managed tensor.
template <class Managed>
constexpr const char* kCapsuleName = std::is_same_v<Managed, DLManagedTensor> ? kLegacyName : kVersionedName;

// A capsule's destructor: calls the tensor's deleter unless a consumer took
// it (and renamed the capsule used_*).
template <class Managed>
void DeleteUnconsumed(PyObject* capsule) {
  auto* tensor = static_cast<Managed*>(PyCapsule_GetPointer(capsule, kCapsuleName<Managed>));
  if (tensor == nullptr) {
    PyErr_Clear();  // renamed used_*: the consumer owns the tensor
    return;
  }
  if (tensor->deleter != nullptr) tensor->deleter(tensor);
}

template <class Managed>
nb::object Capsule(Managed* tensor) {
  PyObject* capsule = PyCapsule_New(tensor, kCapsuleName<Managed>, &DeleteUnconsumed<Managed>);
  if (capsule == nullptr) {
    tensor->deleter(tensor);
    RaisePythonError();
  }
  return nb::steal(capsule);
}

nb::object ExportCapsule(const Array& array, bool versioned) {
  return versioned ? Capsule(interop::ExportDLPack(array)) : Capsule(interop::ExportLegacyDLPack(array));
}

// The current stream of an exchange-API consumer on `device`, for
// OrderConsumer (nullopt off CUDA).
std::optional<intptr_t> ConsumerStream(const DLPackExchangeAPI* api, DLDevice device) {
  if (device.device_type != kDLCUDA) return std::nullopt;
  void* current = nullptr;
  if (api->current_work_stream(kDLCUDA, device.device_id, &current) != 0) RaisePythonError();
  return current != nullptr ? reinterpret_cast<intptr_t>(current) : kLegacyDefaultStream;
}

// The exchange-API consumer's object for `array`, already ordered for it.
nb::object ExportOrdered(const DLPackExchangeAPI* api, const Array& array) {
  DLManagedTensorVersioned* tensor = interop::ExportDLPack(array);
  void* out = nullptr;
  if (api->managed_tensor_to_py_object_no_sync(tensor, &out) != 0) RaisePythonError();
  return nb::steal(static_cast<PyObject*>(out));
}

// The DLPack C exchange API of the tensor type `type`; TypeError if none.
const DLPackExchangeAPI* ExchangeApiOfType(nb::handle type) {
  if (!PyType_Check(type.ptr())) throw nb::type_error("export_to needs a tensor type");
  const DLPackExchangeAPI* api = ExchangeApi(reinterpret_cast<PyTypeObject*>(type.ptr()));
  if (api == nullptr)
    throw nb::type_error((std::string(nb::type_name(type).c_str()) +
                          " has no DLPack C exchange API (__dlpack_c_exchange_api__)").c_str());
  return api;
}

// A `type` tensor of `array` (to_torch's fast path): the consumer's current
// stream waits for XLA's writes on the device.
nb::object ExportTo(const Array& array, nb::handle type) {
  const DLPackExchangeAPI* api = ExchangeApiOfType(type);
  const std::optional<intptr_t> stream = ConsumerStream(api, interop::DLDeviceOf(array));
  {
    const Array held = array;  // shares the buffer: another thread may delete `array` meanwhile
    nb::gil_scoped_release release;  // on the CPU, waits for the buffer (see ImportWithoutGil)
    interop::OrderConsumer(held, stream);
  }
  return ExportOrdered(api, array);
}

ImportTarget TargetOf(nb::handle device, nb::handle client) {
  // Names such as "cuda:1", torch.devices, ints and platform names are the
  // package's to resolve, off the path of a Device or a Client.
  if ((!device.is_none() && !nb::isinstance<PyDevice>(device)) || (!client.is_none() && !nb::hasattr(client, "_core"))) {
    const nb::object resolved = nb::module_::import_("cuxla._client").attr("import_target")(device, client);
    return TargetOf(resolved[0], resolved[1]);
  }
  ImportTarget target;
  if (!client.is_none()) target.state = nb::cast<std::shared_ptr<Client>>(client.attr("_core"))->state();
  if (!device.is_none()) {
    const auto& d = nb::cast<const PyDevice&>(device);
    if (target.state != nullptr && target.state != d.state)
      throw Error(ErrorKind::kValue, "device is not a device of client");
    target.state = d.state;
    target.device = d.device;
  }
  return target;
}

}  // namespace

Array ImportObject(nb::handle object, const ImportTarget& target, std::optional<bool> copy,
                   ImportBatch* batch) {
  if (PyCapsule_CheckExact(object.ptr())) return ImportCapsule(object, target, copy, 0);
  if (const DLPackExchangeAPI* api = ExchangeApi(Py_TYPE(object.ptr())))
    return ImportExchange(api, object, target, copy, batch);
  if (!nb::hasattr(object, "__dlpack__"))
    throw nb::type_error(("a " + std::string(nb::type_name(object.type()).c_str()) +
                          " is neither a DLPack capsule nor has __dlpack__").c_str());
  return ImportProtocol(object, target, copy);
}

namespace {

// The view cuxla.torch.call keeps of `object`, a tensor of `api`'s type
// (call_views.h), for an execution on `target`, found or made now; null when
// `object` is not one to keep a view of.
std::shared_ptr<const Array> CallView(nb::handle object, const DLPackExchangeAPI* api, const ImportTarget& target,
                                      ImportBatch* batch) {
  if (api->dltensor_from_py_object_no_sync == nullptr) return nullptr;
  DLTensor now;
  if (api->dltensor_from_py_object_no_sync(object.ptr(), &now) != 0) RaisePythonError();
  // Elsewhere than the execution's device, an import is a copy: never kept.
  const DLDevice own = interop::DLDeviceOf(*target.device);
  if (now.device.device_type != own.device_type || now.device.device_id != own.device_id) return nullptr;
  const ClientState& state = *target.state;
  if (std::shared_ptr<const Array> kept = KeptView(object, now, state, *target.device)) {
    interop::ImportOptions options;
    OrderAfterProducer(api, state, now.device, batch, options);
    return kept;
  }
  // A kept view is ordered after the producer anew by each execution through
  // XLA's compute stream (known for good once probed); without it, only at
  // its making.
  if (now.device.device_type == kDLCUDA && state.compute_stream(*target.device).stream == 0) return nullptr;
  if (!SeenBefore(object, now)) return nullptr;
  TensorDescription described(now);  // `now` may not outlive the Python code below
  // The view holds an alias of the tensor, not the tensor: while anything
  // outside holds a PyTorch tensor, PyTorch keeps its Python object alive
  // (PyObject preservation), and the tensor would never die.
  static PyObject* const detach_name = PyUnicode_InternFromString("detach");  // never freed: outlives Python
  if (detach_name == nullptr) return nullptr;  // Python had no memory for it: a view per call
  PyObject* detached = PyObject_CallMethodNoArgs(object.ptr(), detach_name);
  if (detached == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) RaisePythonError();
    PyErr_Clear();  // a tensor type without detach: a view per call
    return nullptr;
  }
  Array view = ImportExchange(api, nb::steal(detached), target, std::nullopt, batch);
  if (!view.is_view() || !view.is_row_major()) return std::make_shared<const Array>(std::move(view));
  return KeepView(object, std::move(described), std::move(view));
}

}  // namespace

Executable::Call PrepareCall(const Executable& executable, const nb::args& args, bool keep_views) {
  const ImportTarget target{executable.state(), &executable.device()};
  ImportBatch batch;
  std::vector<Array> imported;  // kept until the call holds their buffers
  std::vector<std::shared_ptr<const Array>> kept;  // likewise
  std::vector<const Array*> arrays;
  size_t index = 0;
  for (nb::handle arg : args) {
    if (nb::isinstance<Array>(arg)) {
      arrays.push_back(&nb::cast<const Array&>(arg));
    } else {
      const DLPackExchangeAPI* api = ExchangeApi(Py_TYPE(arg.ptr()));
      if (!PyCapsule_CheckExact(arg.ptr()) && api == nullptr && !nb::hasattr(arg, "__dlpack__"))
        throw nb::type_error(("argument " + std::to_string(index) + " is a " + nb::type_name(arg.type()).c_str() +
                              ", neither a cuxla.Array nor a DLPack tensor").c_str());
      if (std::shared_ptr<const Array> view =
              keep_views && api != nullptr ? CallView(arg, api, target, &batch) : nullptr) {
        arrays.push_back(kept.emplace_back(std::move(view)).get());
      } else {
        imported.push_back(ImportObject(arg, target, std::nullopt, &batch));
        arrays.push_back(nullptr);  // filled in below: `imported` may still grow
      }
    }
    ++index;
  }
  for (size_t i = 0, next = 0; i < arrays.size(); ++i)
    if (arrays[i] == nullptr) arrays[i] = &imported[next++];
  // With the GIL held: no other Python thread can delete an argument
  // between the checks and the holds.
  return executable.Prepare(arrays);
}

void RegisterDLPack(nb::module_& m, nb::class_<Array>& array) {
  m.def("from_dlpack", [](nb::handle x, nb::handle device, nb::handle copy, nb::handle client) {
    return ImportObject(x, TargetOf(device, client),
                        ArgumentAs<std::optional<bool>>(copy, "copy", "None, True or False"));
  }, "x"_a.none(), nb::kw_only(), "device"_a = nb::none(), "copy"_a = nb::none(), "client"_a = nb::none(),
     "Imports any DLPack producer or capsule as an Array: a view of its memory when XLA can "
     "use it as it is, else (copy=None) one compact device copy.");

  m.def("export_to", [](nb::handle array, nb::handle type) {
    return ExportTo(*ArgumentAs<const Array*>(array, "the array to export", "a cuxla.Array"), type);
  }, "array"_a.none(), "type"_a,
        "A `type` tensor of `array`'s memory, through `type`'s DLPack C exchange API.");

  m.def("call_with", [](const Executable& executable, nb::handle type, nb::args tensors) {
    const DLPackExchangeAPI* api = ExchangeApiOfType(type);
    const std::optional<intptr_t> stream = ConsumerStream(api, interop::DLDeviceOf(executable.device()));
    const Executable::Call call = PrepareCall(executable, tensors, /*keep_views=*/true);
    std::vector<Array> outputs;
    {
      nb::gil_scoped_release release;
      outputs = executable.Run(call);
      for (const Array& out : outputs) interop::OrderConsumer(out, stream);  // the outputs are this call's alone
    }
    nb::list result;
    for (const Array& out : outputs) result.append(ExportOrdered(api, out));
    return nb::tuple(result);
  }, "executable"_a, "type"_a, "tensors"_a);

  m.def("forget_call_views", &ForgetCallViews,
        "Drops the views call_with keeps of the tensors it was given (each let go of once its "
        "programs are done).");
  m.def("call_view_count", &CallViewCount, "How many views call_with keeps.");

  array
      .def_prop_ro("is_view", [](const Array& a) { return a.is_view(); },
                   "True when the array aliases memory owned elsewhere (an import).")
      .def("__dlpack_device__", [](const Array& a) {
        const DLDevice d = interop::DLDeviceOf(a);
        return nb::make_tuple(static_cast<int>(d.device_type), d.device_id);
      })
      .def("__dlpack__", [](const Array& a, nb::handle stream, nb::handle max_version_arg, nb::handle dl_device_arg,
                            nb::handle copy_arg) {
        using Pair = std::optional<std::pair<int, int>>;
        const auto max_version = ArgumentAs<Pair>(max_version_arg, "max_version", "None or a (major, minor) pair");
        const auto dl_device = ArgumentAs<Pair>(dl_device_arg, "dl_device", "None or a (device type, id) pair");
        const auto copy = ArgumentAs<std::optional<bool>>(copy_arg, "copy", "None, True or False");
        const DLDevice own = interop::DLDeviceOf(a);
        if (dl_device && (dl_device->first != own.device_type || dl_device->second != own.device_id))
          throw Error(ErrorKind::kBuffer, "cuxla exports to the array's own device (" +
                                              std::to_string(own.device_type) + ", " +
                                              std::to_string(own.device_id) + ") only");
        const std::optional<intptr_t> consumer = ConsumerStream(a, stream);
        Array source = a;  // shares the buffer: another thread may delete `a` meanwhile
        {
          nb::gil_scoped_release release;  // see ImportWithoutGil
          if (copy.value_or(false)) source = source.CopyToDevice(*source.state(), source.state(), source.device());
          interop::OrderConsumer(source, consumer);
        }
        return ExportCapsule(source, max_version && max_version->first >= 1);
      }, nb::kw_only(), "stream"_a = nb::none(), "max_version"_a.none() = nb::none(),
         "dl_device"_a.none() = nb::none(), "copy"_a.none() = nb::none(),
         "A DLPack capsule of the array's memory (no copy unless copy=True); it stays valid "
         "after the Array is deleted.");
}

}  // namespace cuxla::bindings
