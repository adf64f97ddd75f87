// python/bindings/capsules.cc — DLPack capsules: consumed (renamed used_*
// once the tensor is ours), produced by Array.__dlpack__ with the array API's
// stream and device arguments, and the producer's side of `__dlpack__`.
#include "capsules.h"

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "interop/export.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kLegacyName = "dltensor";

// The capsule name of each kind of managed tensor.
template <class Managed>
constexpr const char* kCapsuleName = std::is_same_v<Managed, DLManagedTensor> ? kLegacyName : kVersionedName;

// Imports a capsule's tensor. The capsule is renamed used_* (its destructor
// then leaves the tensor to cuxla) only once nothing before the import can
// fail: until then, the capsule still owns the tensor.
template <class Managed>
Array ConsumeCapsule(PyObject* capsule, Managed* tensor, const ImportTarget& target,
                     std::optional<bool> copy, intptr_t ready_stream) {
  ImportPlan plan = PlanImport(target, tensor->dl_tensor.device.device_type, copy);
  plan.options.order.read.ready_stream = ready_stream;
  const bool versioned = std::is_same_v<Managed, DLManagedTensorVersioned>;
  if (PyCapsule_SetName(capsule, versioned ? "used_dltensor_versioned" : "used_dltensor") != 0)
    RaisePythonError();
  return ImportWithoutGil(plan, tensor);
}

// A capsule's destructor: calls the tensor's deleter unless a consumer took
// it (and renamed the capsule used_*).
template <class Managed>
void DeleteUnconsumed(PyObject* capsule) noexcept {
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

// The consumer's stream as `__dlpack__`'s `stream` argument names it, for a
// consumer on `array`'s device; nullopt: no ordering.
std::optional<intptr_t> StreamArgument(const Array& array, nb::handle stream) {
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

}  // namespace

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

Array ImportProtocol(nb::handle object, const ImportTarget& target, std::optional<bool> copy) {
  auto device = nb::cast<std::pair<int, int>>(object.attr("__dlpack_device__")());
  nb::object stream = nb::none();
  intptr_t ready_stream = 0;
  if (device.first == kDLCUDA) {
    const ImportPlan plan = PlanImport(target, device.first, copy);
    const Device& source = plan.state->DeviceWithHardwareId(device.second);
    ready_stream = plan.state->ExternalReadyStream(source);
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

void RegisterCapsules(nb::class_<Array>& array) {
  array
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
        const std::optional<intptr_t> consumer = StreamArgument(a, stream);
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
