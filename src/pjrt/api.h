// pjrt/api.h — calling a plugin's PJRT_Api: argument structs, guards on the
// plugin's function table, PJRT_Error -> cuxla::Error, and one RAII owner per
// PJRT object kind.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>

#include "base/error.h"
#include "xla/pjrt/c/pjrt_c_api.h"

namespace cuxla::pjrt {

// The one place an args struct is made: zeroed, struct_size set to the size
// this header declares (its PJRT_STRUCT_SIZE), extension_start null.
template <class T>
T MakeArgs(size_t struct_size) noexcept {
  T args{};
  args.struct_size = struct_size;
  return args;
}
#define CUXLA_PJRT_ARGS(type) ::cuxla::pjrt::MakeArgs<type>(type##_STRUCT_SIZE)

// A plugin's function table with its version. Every call goes through Fn(),
// which checks that the plugin's table is long enough to hold the entry.
class Api {
 public:
  Api(const PJRT_Api* api, std::string plugin_path);

  const PJRT_Api* raw() const noexcept { return api_; }
  int major() const noexcept { return api_->pjrt_api_version.major_version; }
  int minor() const noexcept { return api_->pjrt_api_version.minor_version; }
  const std::string& plugin_path() const noexcept { return plugin_path_; }
  std::string version() const;  // "0.81"

  // True when the plugin's table holds a non-null entry at `field`.
  template <class Fn>
  bool Has(Fn* PJRT_Api::*field) const noexcept {
    return EntryFits(reinterpret_cast<const char*>(&(api_->*field)) -
                     reinterpret_cast<const char*>(api_)) &&
           api_->*field != nullptr;
  }

  // The entry at `field`; throws naming `name` and the versions when the
  // plugin is too old to have it.
  template <class Fn>
  Fn* Get(Fn* PJRT_Api::*field, const char* name) const {
    if (!Has(field)) ThrowMissing(name);
    return api_->*field;
  }

  // Turns a PJRT_Error into a cuxla::Error (destroying it); no-op on null.
  void Check(PJRT_Error* error, const char* entry) const;

 private:
  bool EntryFits(std::ptrdiff_t offset) const noexcept {
    return offset >= 0 && static_cast<size_t>(offset) + sizeof(void*) <= api_->struct_size;
  }
  [[noreturn]] void ThrowMissing(const char* name) const;

  const PJRT_Api* api_;  // owned by the plugin, which is never unloaded
  std::string plugin_path_;
};

// Calls PJRT entry `fn` with `args` on `api` and throws on error.
#define CUXLA_PJRT_CALL(api, fn, args) \
  (api).Check((api).Get(&PJRT_Api::fn, #fn)(args), #fn)

// The args of PJRT entry `entry` (called `name`) once called with `field`
// set to `value`: the many entries that take one object and fill in fields.
template <class Args, class Field>
Args Query(const Api& api, PJRT_Error* (*PJRT_Api::*entry)(Args*), const char* name, size_t struct_size,
           Field Args::*field, std::type_identity_t<Field> value) {
  Args args = MakeArgs<Args>(struct_size);
  args.*field = value;
  api.Check(api.Get(entry, name)(&args), name);
  return args;
}
#define CUXLA_PJRT_QUERY(api, fn, field, value) \
  ::cuxla::pjrt::Query((api), &PJRT_Api::fn, #fn, fn##_Args_STRUCT_SIZE, &fn##_Args::field, (value))

// Destroys a PJRT_Error that nobody can report (from a destroy call).
void Discard(const Api* api, PJRT_Error* error) noexcept;

// RAII owners: each keeps the Api it came from (which outlives it: plugins are
// never unloaded) and calls its kind's destroy entry exactly once.
template <class Object, class Args, size_t kStructSize, PJRT_Error* (*PJRT_Api::*kEntry)(Args*),
          Object* Args::*kField>
struct Destroyer {
  const Api* api;
  void operator()(Object* object) const noexcept {
    Args args = MakeArgs<Args>(kStructSize);
    args.*kField = object;
    Discard(api, (api->raw()->*kEntry)(&args));
  }
};
#define CUXLA_PJRT_DESTROYER(object, entry, field) \
  ::cuxla::pjrt::Destroyer<object, entry##_Args, entry##_Args_STRUCT_SIZE, &PJRT_Api::entry, &entry##_Args::field>
using ClientDestroy = CUXLA_PJRT_DESTROYER(PJRT_Client, PJRT_Client_Destroy, client);
using BufferDestroy = CUXLA_PJRT_DESTROYER(PJRT_Buffer, PJRT_Buffer_Destroy, buffer);
using EventDestroy = CUXLA_PJRT_DESTROYER(PJRT_Event, PJRT_Event_Destroy, event);
using LoadedExecutableDestroy =
    CUXLA_PJRT_DESTROYER(PJRT_LoadedExecutable, PJRT_LoadedExecutable_Destroy, executable);
using ExecutableDestroy = CUXLA_PJRT_DESTROYER(PJRT_Executable, PJRT_Executable_Destroy, executable);
using ClientPtr = std::unique_ptr<PJRT_Client, ClientDestroy>;
using BufferPtr = std::unique_ptr<PJRT_Buffer, BufferDestroy>;
using EventPtr = std::unique_ptr<PJRT_Event, EventDestroy>;
using LoadedExecutablePtr = std::unique_ptr<PJRT_LoadedExecutable, LoadedExecutableDestroy>;
using ExecutablePtr = std::unique_ptr<PJRT_Executable, ExecutableDestroy>;

// Blocks until `event` is ready and throws its error, if any.
void Await(const Api& api, PJRT_Event* event, const char* what);

}  // namespace cuxla::pjrt
