// base/error.h — cuxla::Error: the one exception every floor throws, tagged with the Python exception it becomes.
#pragma once

#include <stdexcept>
#include <string>

namespace cuxla {

// Which Python exception an Error maps to (README, "Errors").
enum class ErrorKind {
  kValue,     // a bad argument: ValueError
  kBuffer,    // something DLPack cannot describe: BufferError
  kMemory,    // out of memory: MemoryError
  kRuntime,   // everything else: RuntimeError
  kCompile,   // the compiler refused a program: cuxla.CompileError, a ValueError
  kNoDevice,  // the platform has no plugin or no device here: cuxla.NoDeviceError, a RuntimeError
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace cuxla
