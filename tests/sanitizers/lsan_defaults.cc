// Linked into every binary of a sanitizer build (GPUPIPE_SANITIZE): LeakSanitizer's default
// suppressions, for leaks in third-party libraries that this project cannot fix. Each entry
// names its cause; anything else LeakSanitizer finds still fails the run.
extern "C" const char* __lsan_default_suppressions() {
  // c-ares 1.18 (Debian 12's) leaks the copied name of every successful host lookup made
  // through ares_getaddrinfo, as gRPC's resolver does for "localhost:PORT" targets:
  // https://github.com/c-ares/c-ares/issues/439 (fixed in later c-ares releases).
  return "leak:libcares.so\n";
}
