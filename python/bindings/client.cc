// python/bindings/client.cc — the client class as Python sees it: creation
// from a chosen plugin, its options, devices, memory statistics, compute
// streams and compile cache.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings.h"
#include "kv_store.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

nb::object MemoryStatsDict(const std::optional<MemoryStats>& stats) {
  if (!stats) return nb::none();
  nb::dict d;
  d["bytes_in_use"] = stats->bytes_in_use;
  d["peak_bytes_in_use"] = stats->peak_bytes_in_use;
  d["bytes_limit"] = stats->bytes_limit;
  d["pool_bytes"] = stats->pool_bytes;
  return d;
}

}  // namespace

void RegisterClient(nb::module_& m) {
  nb::class_<Client>(m, "_Client")
      .def_static("create", [](const std::string& path, const std::string& platform,
                               std::optional<bool> preallocate, std::optional<double> memory_fraction,
                               std::optional<std::string> allocator,
                               std::vector<int64_t> visible_devices, std::optional<int64_t> device_count,
                               int64_t node_id, int64_t num_nodes, nb::object kv_store) {
        ClientOptions options{preallocate, memory_fraction, allocator, std::move(visible_devices),
                              device_count, node_id, num_nodes};
        if (!kv_store.is_none()) options.kv_store = PythonKeyValueStore(std::move(kv_store));
        nb::gil_scoped_release release;
        return Client::Create(path, platform, options);
      }, "plugin"_a, "platform"_a, "preallocate"_a.none(), "memory_fraction"_a.none(),
         "allocator"_a.none(), "visible_devices"_a, "device_count"_a.none() = nb::none(), "node_id"_a = 0,
         "num_nodes"_a = 1, "kv_store"_a = nb::none())
      .def_prop_ro("platform", &Client::platform)
      .def_prop_ro("platform_version", &Client::platform_version)
      .def_prop_ro("plugin", [](const Client& c) { return c.plugin().path(); })
      .def_prop_ro("api_version", [](const Client& c) {
        return nb::make_tuple(c.plugin().api().major(), c.plugin().api().minor());
      })
      .def_prop_ro("options", [](const Client& c) {
        nb::dict d;
        d["preallocate"] = c.options().preallocate;
        d["memory_fraction"] = c.options().memory_fraction;
        d["allocator"] = c.options().allocator;
        d["device_count"] = c.options().device_count;
        d["node_id"] = c.options().node_id;
        d["num_nodes"] = c.options().num_nodes;
        return d;
      })
      .def("devices", [](const Client& c) {
        std::vector<PyDevice> out;
        for (const Device& d : c.devices()) out.emplace_back(c.state(), d);
        return out;
      })
      .def_prop_ro("global_device_count", [](const Client& c) { return c.state()->global_device_count; })
      .def("device", [](const Client& c, int id) { return PyDevice(c.state(), c.device(id)); }, "id"_a)
      .def("memory_stats", [](const Client& c, const PyDevice& d) {
        return MemoryStatsDict(c.memory_stats(*d.device));
      }, "device"_a)
      .def("compute_stream", [](const Client& c, const PyDevice& d) {
        nb::gil_scoped_release release;  // the first request compiles and runs the probe
        const ComputeStream& found = c.state()->compute_stream(*d.device);
        return std::make_pair(found.stream, found.why_not);
      }, "device"_a, "The CUDA stream XLA runs the device's programs on (0 and why, if unknown).")
      .def("_compile", [](Client& c, nb::bytes program) {
        std::string_view text(program.c_str(), program.size());
        nb::gil_scoped_release release;
        return c.Compile(text, c.devices().front());
      }, "program"_a, "Compiles for the client's first device (cached).");
}

}  // namespace cuxla::bindings
