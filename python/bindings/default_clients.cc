// python/bindings/default_clients.cc — one client per platform for the whole
// process, made on first use: the default client, and where DLPack imports of
// a platform's tensors go unless told otherwise.
#include "default_clients.h"

#include <deque>
#include <mutex>
#include <optional>
#include <string_view>

#include "client.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

struct PlatformClient {
  std::string platform;
  nb::object client;
  std::shared_ptr<const ClientState> state;
};

// Never destroyed: its Python objects may not outlive finalization, and
// imports may use a client until the process ends. Read with the GIL held;
// clients are made under `making`, which is taken without the GIL (making
// a client releases it: a thread waiting for the lock with the GIL would
// hold up the one making it).
struct Registry {
  std::mutex making;
  std::deque<PlatformClient> clients;  // a deque: entries stay where they are
  std::optional<std::string> default_platform;
};

Registry& Clients() {
  static auto* registry = new Registry();
  return *registry;
}

const PlatformClient* Find(const Registry& registry, std::string_view platform) {
  for (const PlatformClient& entry : registry.clients)
    if (entry.platform == platform) return &entry;
  return nullptr;
}

const PlatformClient& EntryOf(const std::string& platform) {
  Registry& registry = Clients();
  if (const PlatformClient* found = Find(registry, platform)) return *found;
  std::unique_lock<std::mutex> lock(registry.making, std::defer_lock);
  {
    nb::gil_scoped_release release;
    lock.lock();
  }
  if (const PlatformClient* found = Find(registry, platform)) return *found;  // made meanwhile
  nb::object client = nb::type<Client>()(platform);
  std::shared_ptr<const ClientState> state = nb::cast<const Client&>(client).state();
  return registry.clients.emplace_back(PlatformClient{platform, std::move(client), std::move(state)});
}

}  // namespace

std::vector<std::string> PackageDirs() {
  std::vector<std::string> dirs;
  const nb::handle path(PySys_GetObject("path"));  // borrowed
  if (!path.is_valid()) return dirs;
  for (nb::handle entry : path)
    if (nb::isinstance<nb::str>(entry) && nb::len(entry) != 0) dirs.push_back(nb::cast<std::string>(entry));
  return dirs;
}

const std::string& DefaultPlatform() {
  Registry& registry = Clients();
  if (!registry.default_platform) registry.default_platform = pjrt::ChoosePlugin("", "", PackageDirs()).platform;
  return *registry.default_platform;
}

nb::object ClientForPlatform(const std::string& platform) { return EntryOf(platform).client; }

nb::object DefaultClient() { return ClientForPlatform(DefaultPlatform()); }

const std::shared_ptr<const ClientState>& DefaultState(const std::string& platform) { return EntryOf(platform).state; }

void RegisterDefaultClients(nb::module_& m) {
  m.def("package_dirs", &PackageDirs, "Where installed Python packages (and so PJRT plugins) may be.");
  m.def("default_platform", &DefaultPlatform, "The platform default_client() picks.");
  m.def("client_for_platform", [](nb::handle platform) { return ClientForPlatform(PlatformName(platform)); },
        "platform"_a.none(),
        "The process-wide client of `platform`, made on first use: the default client when it is of "
        "that platform, and where DLPack imports of that platform's tensors go unless told otherwise.");
  m.def("default_client", &DefaultClient,
        "The client made on first use: CUDA if a GPU and its plugin are there, else CPU.");
}

}  // namespace cuxla::bindings
