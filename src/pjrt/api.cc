#include "pjrt/api.h"

#include <string>
#include <utility>

namespace cuxla::pjrt {
namespace {

ErrorKind KindOf(PJRT_Error_Code code) {
  switch (code) {
    case PJRT_Error_Code_INVALID_ARGUMENT:
    case PJRT_Error_Code_OUT_OF_RANGE:
      return ErrorKind::kValue;
    case PJRT_Error_Code_RESOURCE_EXHAUSTED:
      return ErrorKind::kMemory;
    default:
      return ErrorKind::kRuntime;
  }
}

}  // namespace

void Discard(const Api* api, PJRT_Error* error) noexcept {
  if (error == nullptr || !api->Has(&PJRT_Api::PJRT_Error_Destroy)) return;
  auto args = CUXLA_PJRT_ARGS(PJRT_Error_Destroy_Args);
  args.error = error;
  api->raw()->PJRT_Error_Destroy(&args);
}

Api::Api(const PJRT_Api* api, std::string plugin_path)
    : api_(api), plugin_path_(std::move(plugin_path)) {}

std::string Api::version() const {
  return std::to_string(major()) + "." + std::to_string(minor());
}

void Api::ThrowMissing(const char* name) const {
  throw Error(ErrorKind::kRuntime,
              std::string(name) + " is not provided by PJRT plugin " + plugin_path_ +
                  ", which implements PJRT C API " + version() + "; it needs a plugin of PJRT C API " +
                  std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR) +
                  " (the version cuxla was built against) or one older that has it");
}

void Api::Check(PJRT_Error* error, const char* entry) const {
  if (error == nullptr) return;
  auto message_args = CUXLA_PJRT_ARGS(PJRT_Error_Message_Args);
  message_args.error = error;
  api_->PJRT_Error_Message(&message_args);
  std::string message(message_args.message, message_args.message_size);

  PJRT_Error_Code code = PJRT_Error_Code_UNKNOWN;
  if (Has(&PJRT_Api::PJRT_Error_GetCode)) {
    auto code_args = CUXLA_PJRT_ARGS(PJRT_Error_GetCode_Args);
    code_args.error = error;
    Discard(this, api_->PJRT_Error_GetCode(&code_args));
    code = code_args.code;
  }
  Discard(this, error);
  throw Error(KindOf(code), std::string(entry) + ": " + message);
}

void Await(const Api& api, PJRT_Event* event, const char* what) {
  EventPtr owned(event, EventDestroy{&api});
  auto args = CUXLA_PJRT_ARGS(PJRT_Event_Await_Args);
  args.event = event;
  api.Check(api.Get(&PJRT_Api::PJRT_Event_Await, "PJRT_Event_Await")(&args), what);
}

}  // namespace cuxla::pjrt
