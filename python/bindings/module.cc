// python/bindings/module.cc — the nanobind module cuxla._cuxla: Python types
// over the C++ API, exception translation and GIL release. No logic of its own
// beyond converting between Python and C++ values.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace cuxla::bindings;
using cuxla::Array;
using cuxla::Client;
using cuxla::Device;
using cuxla::Executable;

namespace cuxla::bindings {

namespace {
// numpy.dtype, set once at module import. Not a function-local static: its
// initialisation would import Python modules under C++'s static-init lock,
// and a second thread waiting on that lock while holding the GIL would
// deadlock the first. Leaked: no Python object may outlive finalization.
nb::handle numpy_dtype;
}  // namespace

nb::object NumpyDType(DType dtype) { return numpy_dtype(std::string(DTypeName(dtype))); }

std::string Described(nb::handle value) {
  return std::string(nb::type_name(value.type()).c_str()) + " " + nb::repr(value).c_str();
}

}  // namespace cuxla::bindings

namespace {

cuxla::DType DTypeFromName(const std::string& name) {
  if (auto dtype = cuxla::DTypeFromName(name)) return *dtype;
  throw cuxla::Error(cuxla::ErrorKind::kBuffer, "cuxla does not support dtype " + name);
}

// A torch.distributed.Store (anything with set / get / check / wait) as the
// key-value store of a client of several processes. PJRT calls it from its
// own threads: each call takes the GIL, and Python errors become C++ ones
// (their text is read while the GIL is held).
class PyKeyValueStore : public cuxla::KeyValueStore {
  static std::string Bytes(nb::handle value) {
    nb::bytes bytes = nb::borrow<nb::bytes>(value);
    return std::string(bytes.c_str(), bytes.size());
  }

  template <class F>
  static auto Call(F f) {
    nb::gil_scoped_acquire gil;
    try {
      return f();
    } catch (nb::python_error& e) {
      throw std::runtime_error(std::string(nb::str(e.type().attr("__name__")).c_str()) + ": " +
                               nb::str(e.value()).c_str());
    }
  }

 public:
  explicit PyKeyValueStore(nb::object store) : store_(std::move(store)) {}
  ~PyKeyValueStore() override {
    if (!Py_IsInitialized()) {
      store_.release();  // the interpreter is gone: nothing to decrement
      return;
    }
    nb::gil_scoped_acquire gil;
    store_.reset();
  }

  std::string Get(std::string_view key, std::chrono::milliseconds timeout) override {
    return Call([&] {
      nb::list keys;
      keys.append(nb::str(key.data(), key.size()));
      nb::object timedelta = nb::module_::import_("datetime").attr("timedelta");
      store_.attr("wait")(keys, timedelta("milliseconds"_a = timeout.count()));
      return Bytes(store_.attr("get")(keys[0]));
    });
  }

  std::optional<std::string> TryGet(std::string_view key) override {
    return Call([&]() -> std::optional<std::string> {
      nb::list keys;
      keys.append(nb::str(key.data(), key.size()));
      if (!nb::cast<bool>(store_.attr("check")(keys))) return std::nullopt;
      return Bytes(store_.attr("get")(keys[0]));
    });
  }

  void Put(std::string_view key, std::string_view value) override {
    Call([&] {
      store_.attr("set")(nb::str(key.data(), key.size()), nb::bytes(value.data(), value.size()));
      return 0;
    });
  }

 private:
  nb::object store_;
};

nb::object MemoryStatsDict(const std::optional<cuxla::MemoryStats>& stats) {
  if (!stats) return nb::none();
  nb::dict d;
  d["bytes_in_use"] = stats->bytes_in_use;
  d["peak_bytes_in_use"] = stats->peak_bytes_in_use;
  d["bytes_limit"] = stats->bytes_limit;
  d["pool_bytes"] = stats->pool_bytes;
  return d;
}

}  // namespace

NB_MODULE(_cuxla, m) {
  m.doc() = "cuxla's C++ core (PJRT plugins, clients, arrays, executables)";
  // Other libraries keep cuxla objects until interpreter shutdown (Dynamo's
  // caches hold compiled graphs and so their Executables); nanobind would
  // report each of them as a leak.
  nb::set_leak_warnings(false);
  nb::module_::import_("ml_dtypes");  // registers bfloat16 and the float8s with NumPy
  numpy_dtype = nb::module_::import_("numpy").attr("dtype").inc_ref();

  // cuxla's own two exception types; everything else is a built-in one (README, "Errors").
  static nb::handle compile_error = PyErr_NewExceptionWithDoc(
      "cuxla.CompileError", "The compiler refused a program; the message is the plugin's.", PyExc_ValueError, nullptr);
  static nb::handle no_device_error = PyErr_NewExceptionWithDoc(
      "cuxla.NoDeviceError", "A platform has no plugin or no device on this machine.", PyExc_RuntimeError, nullptr);
  m.attr("CompileError") = compile_error;
  m.attr("NoDeviceError") = no_device_error;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const cuxla::Error& e) {
      switch (e.kind()) {
        case cuxla::ErrorKind::kValue: PyErr_SetString(PyExc_ValueError, e.what()); break;
        case cuxla::ErrorKind::kBuffer: PyErr_SetString(PyExc_BufferError, e.what()); break;
        case cuxla::ErrorKind::kMemory: PyErr_SetString(PyExc_MemoryError, e.what()); break;
        case cuxla::ErrorKind::kRuntime: PyErr_SetString(PyExc_RuntimeError, e.what()); break;
        case cuxla::ErrorKind::kCompile: PyErr_SetString(compile_error.ptr(), e.what()); break;
        case cuxla::ErrorKind::kNoDevice: PyErr_SetString(no_device_error.ptr(), e.what()); break;
      }
    }
  });

  m.attr("PJRT_HEADER_VERSION") =
      nb::make_tuple(static_cast<int>(PJRT_API_MAJOR), static_cast<int>(PJRT_API_MINOR));
  m.attr("DTYPES") = [] {
    nb::list names;
    for (int i = 0; i <= static_cast<int>(cuxla::DType::kFloat8E8M0FNU); ++i)
      names.append(std::string(cuxla::DTypeName(static_cast<cuxla::DType>(i))));
    return nb::tuple(names);
  }();

  // XLA's log level as loading libcuxla left it in the environment
  // (pjrt/xla_logging.cc), for the package to tell os.environ.
  const char* xla_level = std::getenv("TF_CPP_MIN_LOG_LEVEL");
  m.attr("XLA_MIN_LOG_LEVEL") = xla_level ? nb::object(nb::str(xla_level)) : nb::none();

  m.def("cuda_driver", [] {
    const cuxla::cuda::DriverStatus& s = cuxla::pjrt::CudaDriver();
    nb::dict d;
    d["available"] = s.available;
    d["version"] = s.version;
    d["device_count"] = s.device_count;
    d["why_not"] = s.why_not;
    return d;
  }, "The CUDA driver as found at run time.");

  m.def("known_platforms", &cuxla::pjrt::KnownPlatforms);

  m.def("find_plugin", [](const std::string& platform, const std::vector<std::string>& dirs) {
    cuxla::pjrt::PluginSearch search = cuxla::pjrt::FindPlugin(platform, dirs);
    nb::list tried;
    for (const auto& c : search.candidates) tried.append(nb::make_tuple(c.path, c.outcome));
    return nb::make_tuple(search.found, tried);
  }, "platform"_a, "package_dirs"_a,
     "Where `platform`'s plugin is: (path or None, [(path, outcome), ...]).");

  m.def("choose_plugin", [](const std::string& platform, const std::string& plugin,
                            const std::vector<std::string>& dirs) {
    cuxla::pjrt::PluginChoice choice = cuxla::pjrt::ChoosePlugin(platform, plugin, dirs);
    return nb::make_tuple(choice.platform, choice.path);
  }, "platform"_a, "plugin"_a, "package_dirs"_a);

  m.def("_buffer_alignment", [](const std::string& platform) { return cuxla::BufferAlignment(cuxla::PlatformOf(platform)); },
        "platform"_a, "The alignment XLA on `platform` needs of a buffer's address to view it.");

  nb::class_<cuxla::pjrt::Plugin>(m, "Plugin")
      .def_static("load", &cuxla::pjrt::Plugin::Load, "path"_a,
                  "Loads (once per process) the PJRT plugin at `path`.")
      .def_prop_ro("path", &cuxla::pjrt::Plugin::path)
      .def_prop_ro("api_version", [](const cuxla::pjrt::Plugin& p) {
        return nb::make_tuple(p.api().major(), p.api().minor());
      })
      .def("attributes", &cuxla::pjrt::Plugin::Attributes);

  nb::class_<PyDevice>(m, "Device")
      .def_prop_ro("id", [](const PyDevice& d) { return d.device->id; })
      .def_prop_ro("local_hardware_id", [](const PyDevice& d) { return d.device->local_hardware_id; })
      .def_prop_ro("platform", [](const PyDevice& d) { return d.device->platform_name; })
      .def_prop_ro("kind", [](const PyDevice& d) { return d.device->kind; })
      .def("__eq__", [](const PyDevice& a, const PyDevice& b) { return a.device == b.device; })
      .def("__hash__", [](const PyDevice& d) { return reinterpret_cast<uintptr_t>(d.device); })
      .def("__repr__", [](const PyDevice& d) {
        return d.device->platform_name + "(id=" + std::to_string(d.device->id) + ")";
      });

  nb::class_<Client>(m, "_Client")
      .def_static("create", [](const std::string& path, const std::string& platform,
                               std::optional<bool> preallocate, std::optional<double> memory_fraction,
                               std::optional<std::string> allocator,
                               std::vector<int64_t> visible_devices, std::optional<int64_t> device_count,
                               int64_t node_id, int64_t num_nodes, nb::object kv_store) {
        cuxla::ClientOptions options{preallocate, memory_fraction, allocator, std::move(visible_devices),
                                     device_count, node_id, num_nodes};
        if (!kv_store.is_none()) options.kv_store = std::make_shared<PyKeyValueStore>(std::move(kv_store));
        nb::gil_scoped_release release;
        return Client::Create(path, platform, options);
      }, "plugin"_a, "platform"_a, "preallocate"_a.none(), "memory_fraction"_a.none(),
         "allocator"_a.none(), "visible_devices"_a, "device_count"_a.none() = nb::none(), "node_id"_a = 0,
         "num_nodes"_a = 1, "kv_store"_a = nb::none())
      .def_prop_ro("platform", &Client::platform_name)
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
        for (const Device& d : c.devices()) out.push_back(Wrap(c.state(), d));
        return out;
      })
      .def_prop_ro("global_device_count", [](const Client& c) { return c.state()->global_device_count; })
      .def("device", [](const Client& c, int id) { return Wrap(c.state(), c.device(id)); }, "id"_a)
      .def("memory_stats", [](const Client& c, const PyDevice& d) {
        return MemoryStatsDict(c.memory_stats(*d.device));
      }, "device"_a)
      .def("compute_stream", [](const Client& c, const PyDevice& d) {
        nb::gil_scoped_release release;  // the first request compiles and runs the probe
        const cuxla::pjrt::ComputeStream& found = c.state()->compute_stream(*d.device);
        return std::make_pair(found.stream, found.why_not);
      }, "device"_a, "The CUDA stream XLA runs the device's programs on (0 and why, if unknown).")
      .def("_compile", [](Client& c, nb::bytes program) {
        std::string_view text(program.c_str(), program.size());
        nb::gil_scoped_release release;
        return c.Compile(text, c.devices().front());
      }, "program"_a, "Compiles for the client's first device (cached).");

  m.def("_from_host", [](uintptr_t data, const std::string& dtype, std::vector<int64_t> dims,
                         const PyDevice& device) {
    cuxla::HostBuffer host{reinterpret_cast<const void*>(data), DTypeFromName(dtype),
                           std::move(dims), {}};
    nb::gil_scoped_release release;
    return Array::FromHost(device.state, host, *device.device);
  }, "data"_a, "dtype"_a, "dims"_a, "device"_a,
     "Copies C-contiguous host memory at `data` to `device`.");

  nb::class_<Array> array(m, "Array");
  array
      .def_prop_ro("shape", [](const Array& a) { return Tuple(a.dims()); })
      .def_prop_ro("dtype", [](const Array& a) { return NumpyDType(a.dtype()); })
      .def_prop_ro("ndim", [](const Array& a) { return a.dims().size(); })
      .def_prop_ro("size", &Array::size)
      .def_prop_ro("nbytes", &Array::nbytes)
      .def_prop_ro("layout", [](const Array& a) { return Tuple(a.layout()); }, "Minor-to-major dimension order.")
      .def_prop_ro("device", [](const Array& a) { a.buffer(); return Wrap(a.state(), a.device()); })
      .def_prop_ro("is_deleted", &Array::is_deleted)
      .def("unsafe_buffer_pointer", &Array::UnsafeBufferPointer)
      .def("block_until_ready", [](nb::handle self) {
        const Array held = nb::cast<const Array&>(self);  // another thread may delete self meanwhile
        {
          nb::gil_scoped_release release;
          held.BlockUntilReady();
        }
        return nb::borrow(self);
      })
      .def("numpy", [](const Array& a) {
        a.buffer();  // raise before allocating for a deleted array
        nb::object out = nb::module_::import_("numpy").attr("empty")(Tuple(a.dims()), NumpyDType(a.dtype()));
        auto data = nb::cast<uintptr_t>(out.attr("ctypes").attr("data"));
        const Array held = a;  // another thread may delete `a` meanwhile
        {
          nb::gil_scoped_release release;
          held.CopyToHost(reinterpret_cast<void*>(data), static_cast<size_t>(held.nbytes()));
        }
        return out;
      }, "A host copy as a NumPy array.")
      .def("delete", &Array::Delete, "Frees the device buffer now.")
      .def("__repr__", [](const Array& a) {
        if (a.is_deleted()) return std::string("Array(<deleted>)");
        return "Array(shape=" + cuxla::pjrt::TupleText(a.dims()) + ", dtype=" +
               std::string(cuxla::DTypeName(a.dtype())) + ", device=" + a.device().platform_name +
               ":" + std::to_string(a.device().id) + ")";
      });

  RegisterDLPack(m, array);

  nb::class_<Executable> executable(m, "Executable");
  executable
      .def_prop_ro("name", &Executable::name)
      .def_prop_ro("num_outputs", &Executable::num_outputs)
      .def_prop_ro("device", [](const Executable& e) { return Wrap(e.state(), e.device()); })
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

  RegisterSharding(m, executable);
}
