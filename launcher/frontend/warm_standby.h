// Warm ranks (--warm-ranks): the standby hook's files and where they go.
//
// The hook itself is launcher/frontend/python/warm_standby/sitecustomize.py (its opening
// comment says what a standby does); it is compiled into the binary and the launch writes it
// once per run into WarmStandbyDir().  The standbys (launcher/run/standby_pool.h) get that
// directory first on their PYTHONPATH; a cold rank never does.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/frontend/types.h"

namespace gculaunch {

/// The hook's files as (file name, text), generated at build time from
/// launcher/frontend/python/warm_standby/*.py and python/_gculaunch_site.py by
/// cmake/embed_files.cmake, sorted by file name.
const std::vector<std::pair<std::string_view, std::string_view>>& WarmStandbyFiles();

/// "<rank_file_root>/warm-standby": the hook's directory for a run.
std::string WarmStandbyDir(const RankRuntime& runtime);

/// "<rank_file_root>/standbys": where standbys say they are ready (private, like every rank
/// file).
std::string StandbyReadyDir(const RankRuntime& runtime);

}  // namespace gculaunch
