# The allocator of the daemon and the CLI (GPUPIPE_MALLOC): jemalloc by default. A small job is
# a few hundred allocations in gRPC, protobuf and the engine, among them buffers of a few KiB;
# glibc's malloc consolidates its fast bins before every such buffer, where jemalloc's
# per-thread caches serve both (bench/results/service-h200.md, "The allocator"). The CLI gets
# the same, so the bench's client and its echo floor (the CLI's own process) run on the
# daemon's allocator. Sanitizer builds keep the system's, which AddressSanitizer replaces.
set(GPUPIPE_MALLOC "jemalloc" CACHE STRING "Allocator of gpupiped and gpupipe: jemalloc or system")
set_property(CACHE GPUPIPE_MALLOC PROPERTY STRINGS jemalloc system)
if(NOT GPUPIPE_MALLOC MATCHES "^(jemalloc|system)$")
  message(FATAL_ERROR "gpupipe: GPUPIPE_MALLOC is jemalloc or system, not '${GPUPIPE_MALLOC}'")
endif()
set(GPUPIPE_MALLOC_LIBRARY "")
if(GPUPIPE_MALLOC STREQUAL "jemalloc" AND NOT GPUPIPE_SANITIZE)
  find_library(GPUPIPE_JEMALLOC_LIBRARY NAMES jemalloc)
  if(NOT GPUPIPE_JEMALLOC_LIBRARY)
    message(FATAL_ERROR "gpupipe: jemalloc not found: install libjemalloc-dev "
                        "(scripts/install-deps.sh) or configure with -DGPUPIPE_MALLOC=system")
  endif()
  set(GPUPIPE_MALLOC_LIBRARY ${GPUPIPE_JEMALLOC_LIBRARY})
endif()

# Links `target` (an executable) with the chosen allocator.
function(gpupipe_link_allocator target)
  if(GPUPIPE_MALLOC_LIBRARY)
    target_link_libraries(${target} PRIVATE ${GPUPIPE_MALLOC_LIBRARY})
  endif()
endfunction()
