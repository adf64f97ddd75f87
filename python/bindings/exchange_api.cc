// python/bindings/exchange_api.cc — imports and exports through the DLPack C
// exchange API, and export_to (to_torch's fast path).
#include "exchange_api.h"

#include <string>
#include <utility>
#include <vector>

#include "interop/export.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

// A `type` tensor of `array` (to_torch's fast path): the consumer's current
// stream waits for XLA's writes on the device.
nb::object ExportTo(const Array& array, nb::handle type) {
  const DLPackExchangeAPI* api = ExchangeApiOfType(type);
  const std::optional<intptr_t> stream = CurrentStream(api, interop::DLDeviceOf(array));
  {
    const Array held = array;  // shares the buffer: another thread may delete `array` meanwhile
    nb::gil_scoped_release release;  // on the CPU, waits for the buffer (see ImportWithoutGil)
    interop::OrderConsumer(held, stream);
  }
  return ExportOrdered(api, array);
}

}  // namespace

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

const DLPackExchangeAPI* ExchangeApiOfType(nb::handle type) {
  if (!PyType_Check(type.ptr())) throw nb::type_error("export_to needs a tensor type");
  const DLPackExchangeAPI* api = ExchangeApi(reinterpret_cast<PyTypeObject*>(type.ptr()));
  if (api == nullptr)
    throw nb::type_error((std::string(nb::type_name(type).c_str()) +
                          " has no DLPack C exchange API (__dlpack_c_exchange_api__)").c_str());
  return api;
}

std::optional<intptr_t> CurrentStream(const DLPackExchangeAPI* api, DLDevice device) {
  if (device.device_type != kDLCUDA) return std::nullopt;
  void* current = nullptr;
  if (api->current_work_stream(kDLCUDA, device.device_id, &current) != 0) RaisePythonError();
  // The default stream is reported as null; named, it is waited on.
  return current != nullptr ? reinterpret_cast<intptr_t>(current) : kLegacyDefaultStream;
}

void OrderAfterProducer(const DLPackExchangeAPI* api, const ClientState& state, DLDevice device,
                        pjrt::ExecutionImports* batch, interop::ImportOptions& options) {
  if (device.device_type != kDLCUDA) return;
  if (batch != nullptr) {
    if (std::optional<pjrt::ImportOrder> earlier = batch->Earlier(device.device_id)) {
      options.order = *earlier;
      return;
    }
  }
  const intptr_t producer = *CurrentStream(api, device);
  const Device& on = state.DeviceWithHardwareId(device.device_id);
  options.order = batch != nullptr ? batch->First(state, on, producer)
                                   : pjrt::ImportOrder{pjrt::OrderAfterProducer(state, on, producer, false)};
}

Array ImportExchange(const DLPackExchangeAPI* api, nb::handle object, const ImportTarget& target,
                     std::optional<bool> copy, pjrt::ExecutionImports* batch) {
  DLManagedTensorVersioned* tensor = nullptr;
  if (api->managed_tensor_from_py_object_no_sync(object.ptr(), &tensor) != 0) RaisePythonError();
  ImportPlan plan;
  try {
    plan = PlanImport(target, tensor->dl_tensor.device.device_type, copy);
    OrderAfterProducer(api, *plan.state, tensor->dl_tensor.device, batch, plan.options);
  } catch (...) {
    if (tensor->deleter != nullptr) tensor->deleter(tensor);
    throw;
  }
  return ImportWithoutGil(plan, tensor);
}

nb::object ExportOrdered(const DLPackExchangeAPI* api, const Array& array) {
  DLManagedTensorVersioned* tensor = interop::ExportDLPack(array);
  void* out = nullptr;
  if (api->managed_tensor_to_py_object_no_sync(tensor, &out) != 0) RaisePythonError();
  return nb::steal(static_cast<PyObject*>(out));
}

void RegisterExchangeApi(nb::module_& m) {
  m.def("export_to", [](nb::handle array, nb::handle type) {
    return ExportTo(*ArgumentAs<const Array*>(array, "the array to export", "a cuxla.Array"), type);
  }, "array"_a.none(), "type"_a,
        "A `type` tensor of `array`'s memory, through `type`'s DLPack C exchange API.");
}

}  // namespace cuxla::bindings
