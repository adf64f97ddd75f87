#include "pjrt/plugin.h"

#include <dlfcn.h>
#include <elf.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "pjrt/text.h"
#include "pjrt/xla_environment.h"

namespace cuxla::pjrt {
namespace {

namespace fs = std::filesystem;

// Where each platform's plugin lives inside an installed Python package, and
// what installs it.
struct KnownPlugin {
  const char* platform;
  const char* package_path;
  const char* install;
};
constexpr KnownPlugin kKnownPlugins[] = {
    {"cuda", "jax_plugins/xla_cuda13/xla_cuda_plugin.so", "pip install 'jax[cuda13]'"},  // jax-cuda13-pjrt
    {"cuda", "jax_plugins/xla_cuda12/xla_cuda_plugin.so", "pip install 'jax[cuda12]'"},  // jax-cuda12-pjrt
    {"cpu", "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", "pip install xla-cpu-pjrt"},     // xla-cpu-pjrt
};

[[noreturn]] void Refuse(const std::string& path, const std::string& why) {
  throw Error(ErrorKind::kValue, "cannot load PJRT plugin " + path + ": " + why);
}

// Why dlopen refused an ELF file built for another machine, which glibc
// reports as "No such file or directory"; empty if that is not the reason.
std::string ForeignArchitecture(const std::string& file) {
  Elf64_Ehdr header{};
  std::ifstream in(file, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(&header), sizeof(header)) ||
      std::string_view(reinterpret_cast<const char*>(header.e_ident), SELFMAG) != ELFMAG)
    return {};
#if defined(__x86_64__)
  constexpr uint16_t kOwnMachine = EM_X86_64;
#elif defined(__aarch64__)
  constexpr uint16_t kOwnMachine = EM_AARCH64;
#else
  return {};
#endif
  if (header.e_ident[EI_CLASS] == ELFCLASS64 && header.e_machine == kOwnMachine) return {};
  return "it is built for another architecture (ELF class " + std::to_string(header.e_ident[EI_CLASS]) +
         ", machine " + std::to_string(header.e_machine) + "; this process is ELF class " +
         std::to_string(ELFCLASS64) + ", machine " + std::to_string(kOwnMachine) + ")";
}

// Opens the plugin file `canonical`; errors name `path`, as the caller gave it.
std::shared_ptr<const Plugin> Open(const std::string& canonical, const std::string& path) {
  // RTLD_LOCAL: two plugins each carry their own copy of XLA's symbols.
  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    const std::string foreign = ForeignArchitecture(canonical);
    Refuse(path, !foreign.empty() ? foreign : err ? err : "dlopen failed");
  }
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) Refuse(path, "it is not a PJRT plugin (no GetPjrtApi symbol)");
  const PJRT_Api* raw = get_api();
  if (raw == nullptr) Refuse(path, "GetPjrtApi returned null");
  if (raw->struct_size < offsetof(PJRT_Api, PJRT_Plugin_Initialize))
    Refuse(path, "its PJRT_Api table is " + std::to_string(raw->struct_size) +
                     " bytes, too small to be a PJRT plugin");

  auto plugin = std::make_shared<const Plugin>(Api(raw, canonical));
  const Api& api = plugin->api();
  if (api.major() != PJRT_API_MAJOR)
    Refuse(path, "it implements PJRT C API " + api.version() + ", cuxla needs major version " +
                     std::to_string(PJRT_API_MAJOR));
  if (api.Has(&PJRT_Api::PJRT_Plugin_Initialize)) {
    auto args = CUXLA_PJRT_ARGS(PJRT_Plugin_Initialize_Args);
    CUXLA_PJRT_CALL(api, PJRT_Plugin_Initialize, &args);
  }
  return plugin;
}

std::string ValueText(const PJRT_NamedValue& value) {
  switch (value.type) {
    case PJRT_NamedValue_kString:
      return std::string(value.string_value, value.value_size);
    case PJRT_NamedValue_kInt64:
      return std::to_string(value.int64_value);
    case PJRT_NamedValue_kInt64List:
      return ListText(std::span(value.int64_array_value, value.value_size));
    case PJRT_NamedValue_kFloat:
      return std::to_string(value.float_value);
    case PJRT_NamedValue_kBool:
      return value.bool_value ? "true" : "false";
  }
  return "?";
}

// The extension of `type` in the plugin's chain, if it is at least `min_size` bytes.
const PJRT_Extension_Base* FindExtension(const PJRT_Api* api, PJRT_Extension_Type type,
                                         size_t min_size) {
  for (const PJRT_Extension_Base* ext = api->extension_start; ext != nullptr; ext = ext->next)
    if (ext->type == type) return ext->struct_size >= min_size ? ext : nullptr;
  return nullptr;
}

}  // namespace

Plugin::Plugin(Api api)
    : api_(std::move(api)),
      stream_extension_(reinterpret_cast<const PJRT_Stream_Extension*>(FindExtension(
          api_.raw(), PJRT_Extension_Type_Stream, PJRT_Stream_Extension_STRUCT_SIZE))),
      ffi_extension_(api_.minor() < PJRT_API_MINOR
                         ? nullptr
                         : reinterpret_cast<const PJRT_FFI_Extension*>(FindExtension(
                               api_.raw(), PJRT_Extension_Type_FFI, PJRT_FFI_Extension_STRUCT_SIZE))) {}

std::shared_ptr<const Plugin> Plugin::Load(const std::string& path) {
  CheckXlaEnvironment();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) Refuse(path, "no such file");
  const std::string key = fs::canonical(path, ec).string();

  // Plugins are kept for the life of the process: PJRT objects made by one
  // must never outlive its code, and XLA plugins do not support dlclose.
  static std::mutex mutex;
  static auto* loaded = new std::map<std::string, std::shared_ptr<const Plugin>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded->find(key);
  if (it != loaded->end()) return it->second;
  auto plugin = Open(key, path);
  loaded->emplace(key, plugin);
  return plugin;
}

std::vector<std::pair<std::string, std::string>> Plugin::Attributes() const {
  std::vector<std::pair<std::string, std::string>> result;
  if (!api_.Has(&PJRT_Api::PJRT_Plugin_Attributes)) return result;
  auto args = CUXLA_PJRT_ARGS(PJRT_Plugin_Attributes_Args);
  CUXLA_PJRT_CALL(api_, PJRT_Plugin_Attributes, &args);
  for (size_t i = 0; i < args.num_attributes; ++i) {
    const PJRT_NamedValue& value = args.attributes[i];
    result.emplace_back(std::string(value.name, value.name_size), ValueText(value));
  }
  return result;
}

const std::vector<std::string>& KnownPlatforms() {
  static const std::vector<std::string> platforms = {"cuda", "cpu"};
  return platforms;
}

std::optional<std::string> PlatformOfPluginFile(std::string_view path) {
  const std::string name = fs::path(path).filename().string();
  for (const KnownPlugin& known : kKnownPlugins)
    if (fs::path(known.package_path).filename() == name) return known.platform;
  return std::nullopt;
}

PluginSearch FindPlugin(std::string_view platform, const std::vector<std::string>& package_dirs) {
  PluginSearch search{std::string(platform), std::nullopt, {}};
  auto consider = [&](const std::string& path) {
    std::error_code ec;
    bool exists = fs::is_regular_file(path, ec);
    bool take = exists && !search.found;
    search.candidates.push_back(
        {path, take ? "found" : exists ? "also present, not used" : "no such file"});
    if (take) search.found = path;
  };
  if (const char* env = std::getenv("CUXLA_PJRT_PLUGIN"); env != nullptr && *env != '\0') {
    consider(env);
    // An explicit plugin is taken as it is, or not at all: nothing else is
    // looked at, so a mistyped path is never replaced by another plugin.
    if (!search.found) search.candidates.back().outcome = "no such file (from CUXLA_PJRT_PLUGIN)";
    return search;
  }
  for (const KnownPlugin& known : kKnownPlugins) {
    if (platform != known.platform) continue;
    for (const std::string& dir : package_dirs) {
      if (dir.empty()) continue;
      std::error_code ec;
      if (!fs::is_directory(fs::path(dir) / fs::path(known.package_path).parent_path(), ec))
        continue;  // the package is not in this directory: nothing worth listing
      consider((fs::path(dir) / known.package_path).string());
    }
  }
  if (!search.found) {
    std::string where;
    for (const KnownPlugin& known : kKnownPlugins)
      if (platform == known.platform) where += std::string(where.empty() ? "" : ", ") + known.package_path;
    search.candidates.push_back(
        {where.empty() ? "(no known package)" : where,
         where.empty() ? "cuxla knows no plugin package for platform '" + search.platform + "'"
                       : "not under any of the " + std::to_string(package_dirs.size()) +
                             " package directories searched"});
  }
  return search;
}

const cuda::DriverStatus& CudaDriver() noexcept { return cuda::Driver(); }

PluginChoice ChoosePlugin(const std::string& platform, const std::string& plugin_path,
                          const std::vector<std::string>& package_dirs) {
  if (!plugin_path.empty()) {
    if (!platform.empty()) return {platform, plugin_path};
    if (auto known = PlatformOfPluginFile(plugin_path)) return {*known, plugin_path};
    std::error_code ec;
    if (!fs::is_regular_file(plugin_path, ec)) Refuse(plugin_path, "no such file");
    throw Error(ErrorKind::kValue, "cannot tell the platform of PJRT plugin " + plugin_path +
                                       ": pass platform='cuda' or 'cpu'");
  }
  std::string chosen = platform;
  if (chosen.empty()) {
    const bool gpu = CudaDriver().available && FindPlugin("cuda", package_dirs).found;
    chosen = gpu ? "cuda" : "cpu";
  }
  PluginSearch search = FindPlugin(chosen, package_dirs);
  if (search.found) return {chosen, *search.found};
  if (const char* env = std::getenv("CUXLA_PJRT_PLUGIN"); env != nullptr && *env != '\0')
    throw Error(ErrorKind::kValue, std::string("CUXLA_PJRT_PLUGIN=") + env + ": no such file");
  std::string looked;
  for (const PluginCandidate& candidate : search.candidates)
    looked += "\n  " + candidate.path + ": " + candidate.outcome;
  std::string install;
  for (const KnownPlugin& known : kKnownPlugins)
    if (chosen == known.platform && install.empty()) install = std::string(" (") + known.install + " installs one)";
  throw Error(ErrorKind::kNoDevice, "no PJRT plugin found for platform '" + chosen + "'" + install + "; looked at:" + looked);
}

}  // namespace cuxla::pjrt
