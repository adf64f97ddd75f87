// python/bindings/executable.cc — cuxla.Executable as Python sees it: its
// name, outputs, device and planned memory, and a call on Arrays or DLPack tensors.
#include <utility>
#include <vector>

#include "bindings.h"
#include "calls.h"

namespace cuxla::bindings {

nb::class_<Executable> RegisterExecutable(nb::module_& m) {
  nb::class_<Executable> executable(m, "Executable");
  executable
      .def_prop_ro("name", &Executable::name)
      .def_prop_ro("num_outputs", &Executable::num_outputs)
      .def_prop_ro("device", [](const Executable& e) { return PyDevice(e.state(), e.device()); })
      .def("memory_sizes", [](const Executable& e) -> std::optional<nb::dict> {
        const std::optional<Executable::MemorySizes> sizes = e.memory_sizes();
        if (!sizes) return std::nullopt;
        nb::dict d;
        d["arguments"] = sizes->arguments;
        d["outputs"] = sizes->outputs;
        d["aliased"] = sizes->aliased;
        d["scratch"] = sizes->scratch;
        d["code"] = sizes->code;
        return d;
      }, "XLA's planned device memory for one execution, in bytes: arguments, outputs, aliased (arguments "
         "reused as outputs), scratch (its temporaries) and code; None where the plugin does not say.")
      .def("__call__", [](const Executable& e, nb::args args) {
        const Executable::Call call = PrepareCall(e, args, /*keep_views=*/false);
        std::vector<Array> outputs;
        {
          nb::gil_scoped_release release;
          outputs = e.Run(call);
        }
        nb::list result;
        for (Array& out : outputs) result.append(nb::cast(std::move(out)));
        return nb::tuple(result);
      }, "Runs on cuxla Arrays or DLPack tensors; returns a tuple of Arrays.");
  return executable;
}

}  // namespace cuxla::bindings
