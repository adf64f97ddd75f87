// tests/cpp/test_env.h — what the C++ tests share: the platform under test
// (CUXLA_TEST_PLATFORM, default "cpu"), its plugin and one client, scoped
// environment variables, and checks on thrown cuxla::Errors.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuxla/cuxla.h"

namespace cuxla::test {

inline std::string TestPlatform() {
  const char* platform = std::getenv("CUXLA_TEST_PLATFORM");
  return platform != nullptr && *platform != '\0' ? platform : "cpu";
}

// CUXLA_PACKAGE_DIRS split at ':' (ctest sets it to Python's sys.path).
inline std::vector<std::string> PackageDirs() {
  std::vector<std::string> dirs;
  const char* joined = std::getenv("CUXLA_PACKAGE_DIRS");
  if (joined == nullptr) return dirs;
  std::stringstream stream(joined);
  for (std::string dir; std::getline(stream, dir, ':');)
    if (!dir.empty()) dirs.push_back(dir);
  return dirs;
}

// The plugin file the library chooses for the test platform.
inline const std::string& PluginPath() {
  static const std::string path = ChoosePlugin(TestPlatform(), "", PackageDirs()).path;
  return path;
}

// One client of the test platform for the whole test binary: clients are
// heavy (a CUDA client owns the card's streams and allocator).
// Never destroyed: at exit the plugin's own statics may already be gone, and
// destroying its client and executables then can crash.
inline std::shared_ptr<Client> TestClient() {
  static const auto* client =
      new std::shared_ptr<Client>(Client::Create(Plugin::Load(PluginPath()), TestPlatform(), {}));
  return *client;
}

// Sets (or, with nullopt, unsets) an environment variable for one scope and
// restores its previous value, so a failing assertion leaks nothing.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    Set(value);
  }
  ~ScopedEnv() { Set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void Set(const std::optional<std::string>& value) const {
    if (value)
      setenv(name_, value->c_str(), 1);
    else
      unsetenv(name_);
  }

  const char* name_;
  std::optional<std::string> old_;
};

// The cuxla::Error `call` throws; nullopt (and a test failure) if it throws none.
template <class Call>
std::optional<Error> ThrownError(Call&& call) {
  try {
    std::forward<Call>(call)();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "expected a cuxla::Error, none was thrown";
  return std::nullopt;
}

inline ::testing::AssertionResult Contains(std::string_view text, std::string_view part) {
  if (text.find(part) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// Host values of C++ type T, copied to `device` as `dtype`.
template <class T>
Array Upload(Client& client, const std::vector<T>& values, std::vector<int64_t> dims,
             DType dtype, const Device& device) {
  HostBuffer host;
  host.data = values.data();
  host.dtype = dtype;
  host.dims = std::move(dims);
  return client.FromHost(host, device);
}

inline Array UploadFloats(Client& client, const std::vector<float>& values,
                          std::vector<int64_t> dims) {
  return Upload(client, values, std::move(dims), DType::kFloat32, client.devices().front());
}

// The array's elements in row-major order, read as T (whose size must be the
// array's element size).
template <class T>
std::vector<T> Download(const Array& array) {
  std::vector<T> values(static_cast<size_t>(array.size()));
  array.CopyToHost(values.data(), values.size() * sizeof(T));
  return values;
}

}  // namespace cuxla::test
