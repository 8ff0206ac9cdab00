// StoreMain: `gculaunch store --host H --port P` runs the rendezvous store alone.
#pragma once

#include <string>
#include <vector>

namespace gculaunch::rendezvous {

/// Runs the standalone store with the arguments after "store".  Returns the exit code.
int StoreMain(const std::vector<std::string>& args);

}  // namespace gculaunch::rendezvous
