// Names the calling thread, as top, perf, gdb and /proc/<pid>/task/<tid>/comm show it (Linux
// keeps the first 15 bytes), so that a daemon's threads tell apart by what they do.
#pragma once

#include <pthread.h>

#include <string>

namespace gpupipe {

inline void NameThisThread(std::string name) {
  if (name.size() > 15) name.resize(15);
  pthread_setname_np(pthread_self(), name.c_str());
}

}  // namespace gpupipe
