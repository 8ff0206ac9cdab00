// gculaunch entry point (placeholder until the launcher core lands).
#include <cstdio>

int main() {
  std::puts("gculaunch " GCULAUNCH_VERSION);
  return 0;
}
