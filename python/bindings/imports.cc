// python/bindings/imports.cc — from_dlpack: its device= and client=
// arguments, the client an import goes through, and the dispatch to the
// capsule, exchange-API and `__dlpack__` paths.
#include "imports.h"

#include <optional>
#include <string>

#include "capsules.h"
#include "client.h"
#include "default_clients.h"
#include "device.h"
#include "exchange_api.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

interop::CopyPolicy Policy(std::optional<bool> copy) {
  if (!copy) return interop::CopyPolicy::kIfNeeded;
  return *copy ? interop::CopyPolicy::kAlways : interop::CopyPolicy::kNever;
}

std::string PlatformOf(int device_type) {
  if (device_type == kDLCUDA) return "cuda";
  if (device_type == kDLCPU) return "cpu";
  throw Error(ErrorKind::kBuffer, "cuxla imports tensors on CPU (1) or CUDA (2) devices, not "
                                  "DLPack device type " + std::to_string(device_type));
}

// from_dlpack's device= and client=, resolved: a Device and a Client as
// they are, the forms users write through AsDevice and AsClient.
ImportTarget TargetOf(nb::handle device, nb::handle client) {
  ImportTarget target;
  if (!client.is_none())
    target.state = nb::cast<const Client&>(AsClient(client)).state();
  if (!device.is_none()) {
    std::optional<PyDevice> resolved;
    const PyDevice& d =
        nb::isinstance<PyDevice>(device) ? nb::cast<const PyDevice&>(device) : resolved.emplace(AsDevice(device, client));
    if (target.state != nullptr && target.state != d.state)
      throw Error(ErrorKind::kValue, "device is not a device of client");
    target.state = d.state;
    target.device = d.device;
  }
  return target;
}

}  // namespace

ImportPlan PlanImport(const ImportTarget& target, int device_type, std::optional<bool> copy) {
  const std::string platform = PlatformOf(device_type);
  ImportPlan plan;
  plan.options.copy = Policy(copy);
  if (target.state != nullptr && target.state->platform_name == platform && target.device == nullptr) {
    plan.state = target.state;
    return plan;
  }
  if (target.state != nullptr) {
    plan.options.target_state = target.state;
    plan.options.target_device = target.device != nullptr ? target.device : &target.state->devices.front();
  }
  plan.state = target.state != nullptr && target.state->platform_name == platform ? target.state : DefaultState(platform);
  return plan;
}

Array ImportObject(nb::handle object, const ImportTarget& target, std::optional<bool> copy,
                   pjrt::ExecutionImports* batch) {
  if (PyCapsule_CheckExact(object.ptr())) return ImportCapsule(object, target, copy, 0);
  if (const DLPackExchangeAPI* api = ExchangeApi(Py_TYPE(object.ptr())))
    return ImportExchange(api, object, target, copy, batch);
  if (!nb::hasattr(object, "__dlpack__"))
    throw nb::type_error(("a " + std::string(nb::type_name(object.type()).c_str()) +
                          " is neither a DLPack capsule nor has __dlpack__").c_str());
  return ImportProtocol(object, target, copy);
}

void RegisterImports(nb::module_& m) {
  m.def("from_dlpack", [](nb::handle x, nb::handle device, nb::handle copy, nb::handle client) {
    return ImportObject(x, TargetOf(device, client),
                        ArgumentAs<std::optional<bool>>(copy, "copy", "None, True or False"));
  }, "x"_a.none(), nb::kw_only(), "device"_a = nb::none(), "copy"_a = nb::none(), "client"_a = nb::none(),
     "Imports any DLPack producer or capsule as an Array: a view of its memory when XLA can "
     "use it as it is, else (copy=None) one compact device copy.");
}

}  // namespace cuxla::bindings
