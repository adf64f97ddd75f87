// tests/cpp/fake_plugin.cc — a shared library posing as a PJRT plugin of a
// given API version (FAKE_PJRT_MAJOR/MINOR) whose function table stops
// before PJRT_Client_Create: what an old or foreign plugin looks like.
#include <cstddef>

#include "xla/pjrt/c/pjrt_c_api.h"

namespace {

PJRT_Error* Initialize(PJRT_Plugin_Initialize_Args*) { return nullptr; }

PJRT_Api MakeApi() {
  PJRT_Api api{};
  api.struct_size = offsetof(PJRT_Api, PJRT_Event_Destroy);  // errors and plugin calls only
  api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  api.pjrt_api_version.major_version = FAKE_PJRT_MAJOR;
  api.pjrt_api_version.minor_version = FAKE_PJRT_MINOR;
  api.PJRT_Plugin_Initialize = &Initialize;
  return api;
}

const PJRT_Api kApi = MakeApi();

}  // namespace

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() { return &kApi; }
