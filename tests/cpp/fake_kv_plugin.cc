// tests/cpp/fake_kv_plugin.cc — a PJRT plugin whose PJRT_Client_Create only
// exercises the key-value callbacks it is given, as a multi-process client
// would, and reports what it saw as its error (it makes no client).
#include <cstddef>
#include <string>

#include "xla/pjrt/c/pjrt_c_api.h"

struct PJRT_Error {
  PJRT_Error_Code code;
  std::string message;
};

namespace {

void DestroyError(PJRT_Error_Destroy_Args* args) { delete args->error; }

void ErrorMessage(PJRT_Error_Message_Args* args) {
  args->message = args->error->message.data();
  args->message_size = args->error->message.size();
}

PJRT_Error* ErrorCode(PJRT_Error_GetCode_Args* args) {
  args->code = args->error->code;
  return nullptr;
}

PJRT_Error* MakeError(PJRT_Error_Code code, const char* message, size_t size) {
  return new PJRT_Error{code, std::string(message, size)};
}

PJRT_CallbackError make_error = &MakeError;

PJRT_Error* Initialize(PJRT_Plugin_Initialize_Args*) { return nullptr; }

int64_t Option(const PJRT_Client_Create_Args* args, const std::string& name) {
  for (size_t i = 0; i < args->num_options; ++i)
    if (std::string(args->create_options[i].name, args->create_options[i].name_size) == name)
      return args->create_options[i].int64_value;
  return -1;
}

// put "fake/node<id>", get it back, try-get an absent key; any callback
// error is passed on as it is.
PJRT_Error* CreateClient(PJRT_Client_Create_Args* args) {
  if (args->kv_put_callback == nullptr || args->kv_get_callback == nullptr || args->kv_try_get_callback == nullptr)
    return new PJRT_Error{PJRT_Error_Code_FAILED_PRECONDITION, "fake kv plugin: no key-value callbacks"};
  const std::string node = std::to_string(Option(args, "node_id"));
  const std::string key = "fake/node" + node, value = "hello from " + node;

  PJRT_KeyValuePutCallback_Args put{PJRT_KeyValuePutCallback_Args_STRUCT_SIZE, nullptr, key.data(), key.size(),
                                    value.data(), value.size(), &make_error, args->kv_put_user_arg};
  if (PJRT_Error* error = args->kv_put_callback(&put)) return error;

  PJRT_KeyValueGetCallback_Args get{};
  get.struct_size = PJRT_KeyValueGetCallback_Args_STRUCT_SIZE;
  get.key = key.data();
  get.key_size = key.size();
  get.timeout_in_ms = 1000;
  get.callback_error = &make_error;
  get.user_arg = args->kv_get_user_arg;
  if (PJRT_Error* error = args->kv_get_callback(&get)) return error;
  const std::string read(get.value, get.value_size);
  get.value_deleter_callback(get.value);

  PJRT_KeyValueTryGetCallback_Args try_get{};
  try_get.struct_size = PJRT_KeyValueTryGetCallback_Args_STRUCT_SIZE;
  const std::string absent = "fake/absent";
  try_get.key = absent.data();
  try_get.key_size = absent.size();
  try_get.callback_error = &make_error;
  try_get.user_arg = args->kv_try_get_user_arg;
  PJRT_Error* missing = args->kv_try_get_callback(&try_get);
  const std::string try_get_result = missing == nullptr ? "found" : missing->code == PJRT_Error_Code_NOT_FOUND ? "NOT_FOUND" : "error";
  delete missing;
  return new PJRT_Error{PJRT_Error_Code_UNAVAILABLE,
                        "fake kv plugin: node " + node + " of " + std::to_string(Option(args, "num_nodes")) +
                            " read '" + read + "'; try-get of an absent key: " + try_get_result};
}

PJRT_Api MakeApi() {
  PJRT_Api api{};
  api.struct_size = offsetof(PJRT_Api, PJRT_Client_Destroy);  // up to PJRT_Client_Create
  api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  api.pjrt_api_version.major_version = PJRT_API_MAJOR;
  api.pjrt_api_version.minor_version = PJRT_API_MINOR;
  api.PJRT_Error_Destroy = &DestroyError;
  api.PJRT_Error_Message = &ErrorMessage;
  api.PJRT_Error_GetCode = &ErrorCode;
  api.PJRT_Plugin_Initialize = &Initialize;
  api.PJRT_Client_Create = &CreateClient;
  return api;
}

const PJRT_Api kApi = MakeApi();

}  // namespace

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() { return &kApi; }
