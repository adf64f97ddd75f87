// python/bindings/client.cc — cuxla.Client: made from what users pass (a
// platform name, a plugin path, memory options, a store for several
// processes), its options, devices, memory statistics, compute streams and
// compile cache; and client= arguments.
#include "client.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "default_clients.h"
#include "device.h"
#include "kv_store.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

constexpr const char* kClientDoc = R"(A PJRT client on one platform ("cuda" or "cpu").

``platform=None`` picks CUDA when a GPU and the CUDA plugin are present,
else CPU. ``plugin`` is a path to a PJRT plugin, overriding discovery.
The memory options apply to CUDA only; ``None`` means "from the
environment (CUXLA_PREALLOCATE, CUXLA_MEM_FRACTION, CUXLA_ALLOCATOR), else
the default", and the default never preallocates. ``device_count`` sets
a CPU client's number of devices (else CUXLA_CPU_DEVICE_COUNT, else the plugin's default).
``num_nodes`` > 1 makes one CUDA client of several processes, this one
being ``node_id``; they find each other through ``kv_store``, a
``torch.distributed.Store`` (see ``cuxla.torch.distributed_client``).)";

// Client's options as the user passed them, each checked for its type.
ClientOptions OptionsOf(nb::handle preallocate, nb::handle memory_fraction, nb::handle allocator,
                        nb::handle visible_devices, nb::handle device_count, nb::handle node_id,
                        nb::handle num_nodes, nb::handle kv_store) {
  ClientOptions options;
  if (!preallocate.is_none()) {
    if (!PyBool_Check(preallocate.ptr())) RaiseWrongType("preallocate", "None, True or False", preallocate);
    options.preallocate = preallocate.ptr() == Py_True;
  }
  if (!memory_fraction.is_none()) {
    if (!IsInt(memory_fraction) && !PyFloat_Check(memory_fraction.ptr()))
      RaiseWrongType("memory_fraction", "None or a number", memory_fraction);
    options.memory_fraction = nb::cast<double>(memory_fraction);
  }
  if (!allocator.is_none()) {
    if (!nb::isinstance<nb::str>(allocator)) RaiseWrongType("allocator", "None or an allocator's name", allocator);
    options.allocator = nb::cast<std::string>(allocator);
  }
  if (!device_count.is_none()) {
    if (!IsInt(device_count)) RaiseWrongType("device_count", "None or an int", device_count);
    options.device_count = nb::cast<int64_t>(device_count);
  }
  if (!visible_devices.is_none()) {
    PyObject* items = PySequence_List(visible_devices.ptr());  // any iterable, as list() takes it
    if (items == nullptr) PyErr_Clear();
    if (items == nullptr || !nb::try_cast(nb::steal(items), options.visible_devices))
      RaiseWrongType("visible_devices", "None or a sequence of ints", visible_devices);
  }
  options.node_id = ArgumentAs<int64_t>(node_id, "node_id", "an int");
  options.num_nodes = ArgumentAs<int64_t>(num_nodes, "num_nodes", "an int");
  if (!kv_store.is_none()) options.kv_store = PythonKeyValueStore(nb::borrow(kv_store));
  return options;
}

std::shared_ptr<Client> CreateWithoutGil(const std::string& plugin_path, const std::string& platform,
                                         const ClientOptions& options) {
  nb::gil_scoped_release release;
  return Client::Create(plugin_path, platform, options);
}

// `plugin` (a str or os.PathLike) as a path; empty for None.
std::string PluginPath(nb::handle plugin) {
  if (plugin.is_none()) return {};
  PyObject* path = PyOS_FSPath(plugin.ptr());
  if (path == nullptr) RaisePythonError();
  return ArgumentAs<std::string>(nb::steal(path), "plugin", "None or a path");
}

// Client(platform=None, *, plugin=None, ...): the platform's name checked,
// then the options, then the plugin chosen.
std::shared_ptr<Client> MakeClient(nb::handle platform, nb::handle plugin, nb::handle preallocate,
                                   nb::handle memory_fraction, nb::handle allocator, nb::handle visible_devices,
                                   nb::handle device_count, nb::handle node_id, nb::handle num_nodes,
                                   nb::handle kv_store) {
  const std::string name = platform.is_none() ? std::string() : PlatformName(platform, !plugin.is_none());
  const ClientOptions options = OptionsOf(preallocate, memory_fraction, allocator, visible_devices, device_count,
                                          node_id, num_nodes, kv_store);
  const pjrt::PluginChoice choice = pjrt::ChoosePlugin(name, PluginPath(plugin), PackageDirs());
  return CreateWithoutGil(choice.path, choice.platform, options);
}

}  // namespace

std::string PlatformName(nb::handle name, bool plugin_given) {
  if (!nb::isinstance<nb::str>(name))
    throw nb::type_error(("a platform is a name such as 'cuda' or 'cpu', not a " + Described(name)).c_str());
  // What users call platforms, in any case: JAX says "gpu" where PJRT says "cuda".
  const auto lower = nb::cast<std::string>(name.attr("lower")());
  if (lower == "cpu") return "cpu";
  if (lower == "cuda" || lower == "gpu") return "cuda";
  if (plugin_given) return lower;
  throw nb::value_error(("cuxla knows the platforms 'cpu' and 'cuda' (or 'gpu'), not " +
                         std::string(nb::repr(name).c_str()) + "; pass plugin= for another")
                            .c_str());
}

nb::object AsClient(nb::handle client) {
  if (nb::isinstance<Client>(client)) return nb::borrow(client);
  if (nb::isinstance<nb::str>(client)) return ClientForPlatform(PlatformName(client));
  throw nb::type_error(
      ("client must be a cuxla.Client or a platform name such as 'cuda', not a " + Described(client)).c_str());
}

void RegisterClient(nb::module_& m) {
  nb::class_<Client>(m, "Client", kClientDoc, nb::is_weak_referenceable())
      .def(nb::new_(&MakeClient), "platform"_a.none() = nb::none(), nb::kw_only(), "plugin"_a.none() = nb::none(),
           "preallocate"_a.none() = nb::none(), "memory_fraction"_a.none() = nb::none(),
           "allocator"_a.none() = nb::none(), "visible_devices"_a.none() = nb::none(),
           "device_count"_a.none() = nb::none(), "node_id"_a = 0, "num_nodes"_a = 1, "kv_store"_a.none() = nb::none())
      // A client of a plugin path as given, nothing chosen nor looked for:
      // Client::Create checks the options before it loads the plugin, so
      // their checks can be tried without one.
      .def_static("_create", [](const std::string& path, const std::string& platform, nb::handle preallocate,
                                nb::handle memory_fraction, nb::handle allocator, nb::handle visible_devices,
                                nb::handle device_count, nb::handle node_id, nb::handle num_nodes,
                                nb::handle kv_store) {
        return CreateWithoutGil(path, platform, OptionsOf(preallocate, memory_fraction, allocator, visible_devices,
                                                          device_count, node_id, num_nodes, kv_store));
      }, "plugin"_a, "platform"_a, "preallocate"_a.none(), "memory_fraction"_a.none(), "allocator"_a.none(),
         "visible_devices"_a.none(), "device_count"_a.none() = nb::none(), "node_id"_a = 0, "num_nodes"_a = 1,
         "kv_store"_a.none() = nb::none())
      .def_prop_ro("platform", &Client::platform_name)
      .def_prop_ro("platform_version", &Client::platform_version)
      .def_prop_ro("plugin", [](const Client& c) { return c.plugin().path(); },
                   "Path of the PJRT plugin this client was made from.")
      .def_prop_ro("api_version", [](const Client& c) {
        return nb::make_tuple(c.plugin().api().major(), c.plugin().api().minor());
      }, "The plugin's PJRT C API version, (major, minor).")
      .def_prop_ro("options", [](const Client& c) {
        nb::dict d;
        d["preallocate"] = c.options().preallocate;
        d["memory_fraction"] = c.options().memory_fraction;
        d["allocator"] = c.options().allocator;
        d["device_count"] = c.options().device_count;
        d["node_id"] = c.options().node_id;
        d["num_nodes"] = c.options().num_nodes;
        return d;
      }, "The options in force (after the environment).")
      .def("devices", [](const Client& c) {
        std::vector<PyDevice> out;
        for (const Device& d : c.devices()) out.emplace_back(c.state(), d);
        return out;
      }, "This process's devices.")
      .def_prop_ro("global_device_count", [](const Client& c) { return c.state()->global_device_count; },
                   "The devices of every process of the client.")
      .def("memory_stats", [](nb::handle self, nb::handle device) {
        const auto& c = nb::cast<const Client&>(self);
        const PyDevice chosen = device.is_none() ? PyDevice(c.state(), c.devices().front()) : AsDevice(device, self);
        return MemoryStatsDict(c.memory_stats(*chosen.device));
      }, "device"_a.none() = nb::none(),
         "The device allocator's statistics, or None where the plugin has none.")
      .def("__repr__", [](const Client& c) {
        return "cuxla.Client(" + std::string(nb::repr(nb::str(c.platform_name().c_str())).c_str()) +
               ", devices=" + std::to_string(c.devices().size()) +
               ", plugin=" + nb::repr(nb::str(c.plugin().path().c_str())).c_str() + ")";
      })
      .def("_device", [](const Client& c, int id) { return PyDevice(c.state(), c.device(id)); }, "id"_a,
           "The device of global id `id`.")
      .def("_compute_stream", [](const Client& c, const PyDevice& d) {
        nb::gil_scoped_release release;  // the first request compiles and runs the probe
        const pjrt::ComputeStream& found = c.state()->compute_stream(*d.device);
        return std::make_pair(found.stream, found.why_not);
      }, "device"_a, "The CUDA stream XLA runs the device's programs on (0 and why, if unknown).")
      .def("_compile", [](Client& c, nb::bytes program) {
        std::string_view text(program.c_str(), program.size());
        nb::gil_scoped_release release;
        return c.Compile(text, c.devices().front());
      }, "program"_a, "Compiles for the client's first device (cached).");

  m.def("as_client", &AsClient, "client"_a.none(),
        "`client` as a Client: a Client, or a platform name for that platform's default client.");
}

}  // namespace cuxla::bindings
