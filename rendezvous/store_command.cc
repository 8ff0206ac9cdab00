#include "rendezvous/store_command.h"

#include <cstdio>

namespace gculaunch::rendezvous {

// Placeholder: replaced by the rendezvous store.
int StoreMain(const std::vector<std::string>& /*args*/) {
  std::fputs("gculaunch: the store is not built yet\n", stderr);
  return 70;
}

}  // namespace gculaunch::rendezvous
