// pjrt/plugin.h — finding, loading and initialising PJRT plugins: one handle
// per plugin file for the whole process, never unloaded.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuda/driver.h"
#include "pjrt/api.h"
#include "xla/pjrt/c/pjrt_c_api_ffi_extension.h"
#include "xla/pjrt/c/pjrt_c_api_stream_extension.h"

namespace cuxla::pjrt {

class Plugin {
 public:
  // Loads the plugin at `path` (dlopen, GetPjrtApi, PJRT_Plugin_Initialize),
  // refusing another major PJRT version. Loading the same file again returns
  // the same Plugin. Throws a ValueError-kind Error naming the path and cause,
  // or CUXLA_LOG when it is not a log level.
  static std::shared_ptr<const Plugin> Load(const std::string& path);

  const Api& api() const noexcept { return api_; }
  const std::string& path() const noexcept { return api_.plugin_path(); }
  // The plugin's attributes (xla_version, stablehlo versions...), as text.
  std::vector<std::pair<std::string, std::string>> Attributes() const;
  // The stream extension (CUDA plugins), or null when the plugin has none.
  const PJRT_Stream_Extension* stream_extension() const noexcept { return stream_extension_; }
  // The FFI extension with handler registration, or null when the plugin has
  // none or is older than the header cuxla is built against (whose
  // registration arguments are laid out differently).
  const PJRT_FFI_Extension* ffi_extension() const noexcept { return ffi_extension_; }

  explicit Plugin(Api api);

 private:
  Api api_;
  const PJRT_Stream_Extension* stream_extension_;  // owned by the plugin
  const PJRT_FFI_Extension* ffi_extension_;        // owned by the plugin
};

// One place looked at while searching for a platform's plugin.
struct PluginCandidate {
  std::string path;
  std::string outcome;  // "found", or why it was not taken
};

struct PluginSearch {
  std::string platform;
  std::optional<std::string> found;       // the first usable path
  std::vector<PluginCandidate> candidates;  // everything looked at, in order
};

// The platforms cuxla knows where to find plugins for: "cuda", "cpu".
const std::vector<std::string>& KnownPlatforms();

// The platform a plugin file is for, judged by its file name; nullopt when the
// name is not one of the known plugins'.
std::optional<std::string> PlatformOfPluginFile(std::string_view path);

// Looks for `platform`'s plugin: $CUXLA_PJRT_PLUGIN alone when it is set (for
// any platform), else each known package layout under each of `package_dirs`
// (e.g. Python's sys.path). Only checks that the file exists; Load() tells if
// it works.
PluginSearch FindPlugin(std::string_view platform, const std::vector<std::string>& package_dirs);

// The CUDA driver as found at run time (with the reason when it is not):
// what ChoosePlugin's default platform depends on.
const cuda::DriverStatus& CudaDriver() noexcept;

// The plugin a client is made from.
struct PluginChoice {
  std::string platform;
  std::string path;
};

// With `plugin_path`: that file, for `platform` or else the platform its file
// name tells. Without: the plugin FindPlugin finds for `platform`, where an
// empty platform means "cuda" when the CUDA driver sees a device and the CUDA
// plugin is found, else "cpu". Throws a ValueError-kind Error naming the file
// when `plugin_path` (of no known name, without a platform) or
// $CUXLA_PJRT_PLUGIN is no file, else a NoDevice-kind Error listing every
// place looked at when nothing fits.
PluginChoice ChoosePlugin(const std::string& platform, const std::string& plugin_path,
                          const std::vector<std::string>& package_dirs);

}  // namespace cuxla::pjrt
