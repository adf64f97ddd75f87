// pjrt/key_value_store.h — the key-value store the processes of one
// distributed client share, and PJRT's get / try-get / put callbacks over it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "pjrt/api.h"

namespace cuxla {

// Implemented by the user (Python: torch.distributed's store). PJRT calls it
// while it creates the client and later (when collectives first run), from
// any of its threads: implementations must be thread-safe.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // The value of `key`, waiting up to `timeout` for another process to put
  // it; throws (any std::exception) when it does not come.
  virtual std::string Get(std::string_view key, std::chrono::milliseconds timeout) = 0;
  // The value of `key`, or nullopt at once if it is absent.
  virtual std::optional<std::string> TryGet(std::string_view key) = 0;
  virtual void Put(std::string_view key, std::string_view value) = 0;
};

namespace pjrt {

// Points `args`' callbacks at `store`, which must outlive the client.
void SetKeyValueCallbacks(PJRT_Client_Create_Args& args, KeyValueStore& store);

}  // namespace pjrt
}  // namespace cuxla
