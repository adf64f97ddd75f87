// python/bindings/device.cc — cuxla.Device (one device of a client, compared
// and hashed by identity, its client kept alive, its memory statistics), and
// the device= forms that name one.
#include "device.h"

#include <charconv>
#include <cstdint>
#include <string>

#include "client.h"
#include "default_clients.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

bool IsTorchDevice(nb::handle value) {
  const nb::handle type = value.type();
  return nb::getattr(type, "__module__", nb::none()).equal(nb::str("torch")) &&
         nb::getattr(type, "__name__", nb::none()).equal(nb::str("device"));
}

// The CUDA device a name without an index means: PyTorch's current one when
// PyTorch has set one up (not imported here), else the first.
int64_t CurrentIndex(const std::string& platform) {
  if (platform != "cuda") return 0;
  nb::object name = nb::str("torch");
  PyObject* torch = PyImport_GetModule(name.ptr());
  if (torch == nullptr) {
    if (PyErr_Occurred()) RaisePythonError();
    return 0;
  }
  const nb::object cuda = nb::steal(torch).attr("cuda");
  if (!nb::cast<bool>(cuda.attr("is_initialized")())) return 0;
  return nb::cast<int64_t>(cuda.attr("current_device")());
}

// A device as its repr shows it: "cuda(id=0)".
std::string Repr(const Device& d) { return d.platform_name + "(id=" + std::to_string(d.id) + ")"; }

std::string Quoted(const std::string& text) { return nb::repr(nb::str(text.c_str(), text.size())).c_str(); }

}  // namespace

nb::object MemoryStatsDict(const std::optional<MemoryStats>& stats) {
  if (!stats) return nb::none();
  nb::dict d;
  d["bytes_in_use"] = stats->bytes_in_use;
  d["peak_bytes_in_use"] = stats->peak_bytes_in_use;
  d["bytes_limit"] = stats->bytes_limit;
  d["pool_bytes"] = stats->pool_bytes;
  return d;
}

PyDevice AsDevice(nb::handle device, nb::handle client) {
  if (nb::isinstance<PyDevice>(device)) return nb::cast<PyDevice>(device);
  nb::object chosen = client.is_none() ? nb::object() : AsClient(client);
  if (IsInt(device)) {
    if (!chosen.is_valid()) chosen = DefaultClient();
    const auto& c = nb::cast<const Client&>(chosen);
    int overflow = 0;
    const long long index = PyLong_AsLongLongAndOverflow(device.ptr(), &overflow);
    if (overflow != 0 || index < 0 || static_cast<size_t>(index) >= c.devices().size())
      throw nb::value_error(("device " + std::string(nb::str(device).c_str()) + " does not exist: the " +
                             c.platform_name() + " client has " + std::to_string(c.devices().size()) + " device(s)")
                                .c_str());
    return PyDevice(c.state(), c.devices()[index]);
  }
  if (!nb::isinstance<nb::str>(device) && !IsTorchDevice(device))
    throw nb::type_error(("device must be a cuxla.Device, a torch.device, a name such as 'cuda:0' or an int, not a " +
                          Described(device))
                             .c_str());
  const std::string text = nb::str(device).c_str();
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  const std::string index_text = colon == std::string::npos ? std::string() : text.substr(colon + 1);
  const std::string platform = PlatformName(nb::str(name.c_str(), name.size()));
  int64_t index = 0;
  if (colon != std::string::npos && !index_text.empty()) {
    const char* end = index_text.data() + index_text.size();
    for (char ch : index_text)
      if (ch < '0' || ch > '9')
        throw nb::value_error(("device " + Quoted(text) + " has no index after ':'; write e.g. '" + platform + ":0'")
                                  .c_str());
    if (std::from_chars(index_text.data(), end, index).ec != std::errc()) index = -1;  // too large: no device
  } else {
    index = CurrentIndex(platform);
  }
  if (chosen.is_valid() && nb::cast<const Client&>(chosen).platform_name() != platform)
    throw nb::value_error(("device " + Quoted(text) + " is not a device of the " +
                           nb::cast<const Client&>(chosen).platform_name() + " client")
                              .c_str());
  if (!chosen.is_valid()) chosen = ClientForPlatform(platform);
  const auto& c = nb::cast<const Client&>(chosen);
  // PyTorch's CUDA ordinal, whatever devices the client was made to see.
  for (const Device& d : c.devices())
    if ((platform == "cuda" ? d.local_hardware_id : d.id) == index) return PyDevice(c.state(), d);
  std::string listed;
  for (const Device& d : c.devices())
    listed += (listed.empty() ? "" : ", ") + Repr(d);
  throw nb::value_error(("device " + Quoted(text) + " does not exist: the " + platform + " client has " + listed)
                            .c_str());
}

void RegisterDevice(nb::module_& m) {
  nb::class_<PyDevice>(m, "Device")
      .def_prop_ro("id", [](const PyDevice& d) { return d.device->id; })
      .def_prop_ro("local_hardware_id", [](const PyDevice& d) { return d.device->local_hardware_id; })
      .def_prop_ro("platform", [](const PyDevice& d) { return d.device->platform_name; })
      .def_prop_ro("kind", [](const PyDevice& d) { return d.device->kind; })
      .def("memory_stats", [](const PyDevice& d) { return MemoryStatsDict(Client::MemoryStatsOf(*d.state, *d.device)); },
           "The device allocator's statistics (bytes_in_use, peak_bytes_in_use, bytes_limit, pool_bytes), "
           "or None where the plugin has none.")
      .def("__eq__", [](const PyDevice& a, const PyDevice& b) { return a.device == b.device; })
      .def("__hash__", [](const PyDevice& d) { return reinterpret_cast<uintptr_t>(d.device); })
      .def("__repr__", [](const PyDevice& d) { return Repr(*d.device); });

  m.def("as_device", &AsDevice, "device"_a.none(), "client"_a.none() = nb::none(),
        "`device` as a cuxla Device, from what PyTorch and JAX users pass (a Device, a name such as "
        "'cuda:1', a torch.device, an int).");
}

}  // namespace cuxla::bindings
