// pjrt/key_value_store.cc — PJRT's key-value callbacks over a cuxla::KeyValueStore.
#include "pjrt/key_value_store.h"

#include <cstring>
#include <exception>

namespace cuxla::pjrt {
namespace {

void DeleteValue(char* value) noexcept { delete[] value; }

// Hands `value` to PJRT, which copies it and frees it with DeleteValue.
template <class Args>
void HandOut(const std::string& value, Args* args) {
  args->value = new char[value.size()];
  std::memcpy(args->value, value.data(), value.size());
  args->value_size = value.size();
  args->value_deleter_callback = &DeleteValue;
}

// The plugin's error for a failure of the store (PJRT copies the message).
PJRT_Error* Failure(PJRT_CallbackError* make_error, PJRT_Error_Code code, const std::string& message) {
  return (*make_error)(code, message.data(), message.size());
}

// Runs `call`; any exception becomes the plugin's error with its message:
// the callbacks are C functions, which no exception may leave.
template <class Call>
PJRT_Error* Guarded(PJRT_CallbackError* make_error, std::string_view what, Call call) noexcept {
  try {
    return call();
  } catch (const std::exception& e) {
    return Failure(make_error, PJRT_Error_Code_UNKNOWN, "cuxla key-value store " + std::string(what) + ": " + e.what());
  } catch (...) {
    return Failure(make_error, PJRT_Error_Code_UNKNOWN, "cuxla key-value store " + std::string(what) + " failed");
  }
}

PJRT_Error* Get(PJRT_KeyValueGetCallback_Args* args) noexcept {
  return Guarded(args->callback_error, "get", [&]() -> PJRT_Error* {
    auto* store = static_cast<KeyValueStore*>(args->user_arg);
    const std::string value = store->Get(std::string_view(args->key, args->key_size),
                                         std::chrono::milliseconds(args->timeout_in_ms));
    HandOut(value, args);
    return nullptr;
  });
}

PJRT_Error* TryGet(PJRT_KeyValueTryGetCallback_Args* args) noexcept {
  return Guarded(args->callback_error, "try-get", [&]() -> PJRT_Error* {
    auto* store = static_cast<KeyValueStore*>(args->user_arg);
    const std::string_view key(args->key, args->key_size);
    const std::optional<std::string> value = store->TryGet(key);
    if (!value) return Failure(args->callback_error, PJRT_Error_Code_NOT_FOUND, "key " + std::string(key) + " not found");
    HandOut(*value, args);
    return nullptr;
  });
}

PJRT_Error* Put(PJRT_KeyValuePutCallback_Args* args) noexcept {
  return Guarded(args->callback_error, "put", [&]() -> PJRT_Error* {
    auto* store = static_cast<KeyValueStore*>(args->user_arg);
    store->Put(std::string_view(args->key, args->key_size), std::string_view(args->value, args->value_size));
    return nullptr;
  });
}

}  // namespace

void SetKeyValueCallbacks(PJRT_Client_Create_Args& args, KeyValueStore& store) {
  args.kv_get_callback = &Get;
  args.kv_get_user_arg = &store;
  args.kv_try_get_callback = &TryGet;
  args.kv_try_get_user_arg = &store;
  args.kv_put_callback = &Put;
  args.kv_put_user_arg = &store;
}

}  // namespace cuxla::pjrt
