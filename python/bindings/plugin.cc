// python/bindings/plugin.cc — PJRT plugins as Python sees them: cuxla.Plugin,
// where each platform's plugin is (find_plugin, choose_plugin), the known
// platforms, the PJRT C API version built against, and the CUDA driver.
#include <string>
#include <vector>

#include "bindings.h"

namespace cuxla::bindings {

using namespace nb::literals;

void RegisterPlugin(nb::module_& m) {
  m.attr("PJRT_HEADER_VERSION") =
      nb::make_tuple(static_cast<int>(PJRT_API_MAJOR), static_cast<int>(PJRT_API_MINOR));

  m.def("cuda_driver", [] {
    const cuda::DriverStatus& s = pjrt::CudaDriver();
    nb::dict d;
    d["available"] = s.available;
    d["version"] = s.version;
    d["device_count"] = s.device_count;
    d["why_not"] = s.why_not;
    return d;
  }, "The CUDA driver as found at run time.");

  m.def("known_platforms", &pjrt::KnownPlatforms);

  m.def("find_plugin", [](const std::string& platform, const std::vector<std::string>& dirs) {
    pjrt::PluginSearch search = pjrt::FindPlugin(platform, dirs);
    nb::list tried;
    for (const auto& c : search.candidates) tried.append(nb::make_tuple(c.path, c.outcome));
    return nb::make_tuple(search.found, tried);
  }, "platform"_a, "package_dirs"_a,
     "Where `platform`'s plugin is: (path or None, [(path, outcome), ...]).");

  m.def("choose_plugin", [](const std::string& platform, const std::string& plugin,
                            const std::vector<std::string>& dirs) {
    pjrt::PluginChoice choice = pjrt::ChoosePlugin(platform, plugin, dirs);
    return nb::make_tuple(choice.platform, choice.path);
  }, "platform"_a, "plugin"_a, "package_dirs"_a);

  nb::class_<pjrt::Plugin>(m, "Plugin")
      .def_static("load", &pjrt::Plugin::Load, "path"_a,
                  "Loads (once per process) the PJRT plugin at `path`.")
      .def_prop_ro("path", &pjrt::Plugin::path)
      .def_prop_ro("api_version", [](const pjrt::Plugin& p) {
        return nb::make_tuple(p.api().major(), p.api().minor());
      })
      .def("attributes", &pjrt::Plugin::Attributes);
}

}  // namespace cuxla::bindings
