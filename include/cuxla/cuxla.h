// cuxla/cuxla.h — the C++ API: load a plugin, make a client, move arrays between host, device and DLPack, compile and run.
//
// The namespace says who may use a name. cuxla:: is the public surface: the
// names declared there by the headers below, and those brought there by the
// using-declarations at the end of this file. Each floor's own workings live
// in the namespace of its folder — cuxla::pjrt (src/pjrt), cuxla::interop
// (src/interop), cuxla::cuda (src/cuda) — for the floors above it, the Python
// bindings and its own tests; they may change with any release.
#pragma once

#include "base/error.h"
#include "interop/export.h"
#include "interop/import.h"
#include "pjrt/client.h"
#include "pjrt/sharded_array.h"

namespace cuxla {

// Plugins: where each platform's is installed, and loading one.
using pjrt::ChoosePlugin;
using pjrt::FindPlugin;
using pjrt::KnownPlatforms;
using pjrt::Plugin;
using pjrt::PluginCandidate;
using pjrt::PluginChoice;
using pjrt::PluginSearch;

// DLPack in and out (docs/architecture.md, "The path of one tensor").
using interop::CopyPolicy;
using interop::DLDeviceOf;
using interop::ExportDLPack;
using interop::ExportLegacyDLPack;
using interop::ImportDLPack;
using interop::ImportOptions;
using interop::OrderConsumer;

}  // namespace cuxla
