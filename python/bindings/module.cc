// python/bindings/module.cc — the nanobind module cuxla._cuxla: its import
// (NumPy's dtypes), cuxla's exception types and their translation, and the
// Register* calls that add each file's types and functions.
#include <nanobind/nanobind.h>

#include <cstdlib>
#include <string>

#include "bindings.h"

namespace nb = nanobind;
using namespace cuxla::bindings;

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

void RaiseWrongType(const char* what, const char* expected, nb::handle value) {
  throw nb::type_error((std::string(what) + " must be " + expected + ", not a " + Described(value)).c_str());
}

}  // namespace cuxla::bindings

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

  // XLA's log level and flags as loading libcuxla left them in the
  // environment (pjrt/xla_environment.cc), for the package to tell os.environ.
  for (const char* name : {"TF_CPP_MIN_LOG_LEVEL", "XLA_FLAGS"}) {
    const char* value = std::getenv(name);
    m.attr(name) = value ? nb::object(nb::str(value)) : nb::none();
  }

  RegisterPlugin(m);
  RegisterCompileCache(m);
  RegisterDevice(m);
  RegisterClient(m);
  RegisterDefaultClients(m);
  nb::class_<cuxla::Array> array = RegisterArray(m);
  RegisterImports(m);
  RegisterCapsules(array);
  RegisterExchangeApi(m);
  nb::class_<cuxla::Executable> executable = RegisterExecutable(m);
  RegisterCalls(m);
  RegisterSharding(m, executable);
  RegisterTorchAllocator(m);
}
