#include "launcher/frontend/warm_standby.h"

namespace gculaunch {

std::string WarmStandbyDir(const RankRuntime& runtime) {
  return runtime.rank_file_root + "/warm-standby";
}

std::string StandbyReadyDir(const RankRuntime& runtime) {
  return runtime.rank_file_root + "/standbys";
}

}  // namespace gculaunch
