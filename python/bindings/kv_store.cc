// python/bindings/kv_store.cc — PythonKeyValueStore: PJRT's key-value calls
// served by a Python store, under the GIL.
#include "kv_store.h"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

class PyKeyValueStore : public KeyValueStore {
  static std::string Bytes(nb::handle value) {
    nb::bytes bytes = nb::borrow<nb::bytes>(value);
    return std::string(bytes.c_str(), bytes.size());
  }

  // Runs `f` with the GIL; a Python error's text is read while it is held.
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

}  // namespace

std::shared_ptr<KeyValueStore> PythonKeyValueStore(nb::object store) {
  return std::make_shared<PyKeyValueStore>(std::move(store));
}

}  // namespace cuxla::bindings
