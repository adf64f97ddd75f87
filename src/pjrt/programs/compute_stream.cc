// pjrt/programs/compute_stream.cc — the probe that learns the CUDA stream XLA runs a device's programs on.
#include "pjrt/programs/compute_stream.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/array.h"
#include "pjrt/executable.h"

namespace cuxla::pjrt {
namespace {

constexpr std::string_view kTarget = "cuxla_record_compute_stream";
constexpr std::string_view kPlatform = "CUDA";  // XLA FFI's name for CUDA GPUs

// Runs the handler for its side effect, then returns a value to wait for.
constexpr std::string_view kProbe = R"(
func.func public @main() -> tensor<i32> {
  stablehlo.custom_call @cuxla_record_compute_stream() {api_version = 4 : i32, has_side_effect = true} : () -> ()
  %done = stablehlo.constant dense<0> : tensor<i32>
  return %done : tensor<i32>
}
)";

// Where the handler leaves the stream; probes run one at a time.
std::atomic<intptr_t> recorded_stream{0};
std::mutex probe_mutex;

// Registers the handler with `plugin`'s FFI extension, once per plugin.
void RegisterHandler(const pjrt::Plugin& plugin) {
  static std::vector<const pjrt::Plugin*> registered;  // under probe_mutex
  if (std::find(registered.begin(), registered.end(), &plugin) != registered.end()) return;
  const PJRT_FFI_Extension* ffi = plugin.ffi_extension();
  if (ffi == nullptr || ffi->register_handler == nullptr)
    throw Error(ErrorKind::kRuntime, "the plugin (PJRT C API " + plugin.api().version() +
                                         ") has no FFI extension to register handlers with");
  PJRT_FFI_Register_Handler_Args args{};
  args.struct_size = PJRT_FFI_Register_Handler_Args_STRUCT_SIZE;
  args.target_name = kTarget.data();
  args.target_name_size = kTarget.size();
  args.handler = reinterpret_cast<void*>(&RecordComputeStream);
  args.platform_name = kPlatform.data();
  args.platform_name_size = kPlatform.size();
  args.traits = static_cast<PJRT_FFI_Handler_TraitsBits>(0);  // never inside a CUDA graph
  plugin.api().Check(ffi->register_handler(&args), "PJRT_FFI_Register_Handler");
  registered.push_back(&plugin);
}

}  // namespace

XLA_FFI_Error* RecordComputeStream(XLA_FFI_CallFrame* frame) noexcept {
  // At registration XLA asks, through a metadata extension, which FFI
  // version the handler speaks and what it allows (nothing extra).
  for (XLA_FFI_Extension_Base* ext = frame->extension_start; ext != nullptr; ext = ext->next) {
    if (ext->type != XLA_FFI_Extension_Metadata) continue;
    XLA_FFI_Metadata* metadata = reinterpret_cast<XLA_FFI_Metadata_Extension*>(ext)->metadata;
    metadata->api_version.major_version = XLA_FFI_API_MAJOR;
    metadata->api_version.minor_version = XLA_FFI_API_MINOR;
    metadata->traits = 0;
    return nullptr;
  }
  XLA_FFI_Stream_Get_Args args{};
  args.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  args.ctx = frame->ctx;
  if (XLA_FFI_Error* error = frame->api->XLA_FFI_Stream_Get(&args)) return error;  // fails the probe's run
  recorded_stream.store(reinterpret_cast<intptr_t>(args.stream));
  return nullptr;
}

ComputeStream ProbeComputeStream(const ClientState& state, const Device& device) {
  if (state.platform != Platform::kCuda) return {0, "not a CUDA client"};
  if (const char* off = std::getenv("CUXLA_COMPUTE_STREAM"); off != nullptr && std::string_view(off) == "0")
    return {0, "turned off by CUXLA_COMPUTE_STREAM=0"};
  std::lock_guard<std::mutex> lock(probe_mutex);
  try {
    RegisterHandler(*state.plugin);
  } catch (const Error& error) {
    return {0, error.what()};
  }
  try {
    recorded_stream.store(0);
    std::vector<Array> done = state.programs->Compiled(kProbe, device)->Execute({});
    done.front().BlockUntilReady();
  } catch (const Error& error) {
    return {0, std::string("the probe program failed: ") + error.what()};
  }
  const intptr_t stream = recorded_stream.load();
  if (stream == 0) return {0, "the probe program ran but reported no stream"};
  return {stream, {}};
}

}  // namespace cuxla::pjrt
