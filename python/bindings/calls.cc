// python/bindings/calls.cc — PrepareCall, and call_with (cuxla.torch.call's
// fast path): a call on a framework's tensors, its outputs handed back as
// that framework's tensors, the views of tensors given again kept, and
// tensors of XLA's own exported buffers read through those buffers.
#include "calls.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "call_views.h"
#include "exchange_api.h"
#include "imports.h"
#include "interop/export.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

// The Array a call reads `object`, a tensor of `api`'s type, through
// without a new import, for an execution on `target`: the view kept of it
// (call_views.h), the Array of XLA's own buffer it is an export of, or a
// view made now and kept; null when it is none of these.
std::shared_ptr<const Array> ArrayWithoutImport(nb::handle object, const DLPackExchangeAPI* api,
                                                const ImportTarget& target, pjrt::ExecutionImports* batch) {
  if (api->dltensor_from_py_object_no_sync == nullptr) return nullptr;
  DLTensor now;
  if (api->dltensor_from_py_object_no_sync(object.ptr(), &now) != 0) RaisePythonError();
  // Elsewhere than the execution's device, an import is a copy: never kept.
  const DLDevice own = interop::DLDeviceOf(*target.device);
  if (now.device.device_type != own.device_type || now.device.device_id != own.device_id) return nullptr;
  const ClientState& state = *target.state;
  if (std::shared_ptr<const Array> kept = FindCallView(object, now, state, *target.device)) {
    interop::ImportOptions options;
    OrderAfterProducer(api, state, now.device, batch, options);
    return kept;
  }
  // Both are ordered after the producer anew by each execution through XLA's
  // compute stream (known for good once probed); without it, a view only at
  // its making, an export's buffer never.
  if (now.device.device_type == kDLCUDA && state.compute_stream(*target.device).stream == 0) return nullptr;
  if (std::optional<Array> exported = interop::LiveExportOf(now, state, *target.device)) {
    interop::ImportOptions options;
    OrderAfterProducer(api, state, now.device, batch, options);
    return std::make_shared<const Array>(std::move(*exported));
  }
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
  return StoreCallView(object, std::move(described), std::move(view));
}

}  // namespace

Executable::Call PrepareCall(const Executable& executable, const nb::args& args, bool keep_views) {
  const ImportTarget target{executable.state(), &executable.device()};
  pjrt::ExecutionImports batch;
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
      if (std::shared_ptr<const Array> known =
              keep_views && api != nullptr ? ArrayWithoutImport(arg, api, target, &batch) : nullptr) {
        arrays.push_back(kept.emplace_back(std::move(known)).get());
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

void RegisterCalls(nb::module_& m) {
  m.def("call_with", [](const Executable& executable, nb::handle type, nb::args tensors) {
    const DLPackExchangeAPI* api = ExchangeApiOfType(type);
    const std::optional<intptr_t> stream = CurrentStream(api, interop::DLDeviceOf(executable.device()));
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
}

}  // namespace cuxla::bindings
