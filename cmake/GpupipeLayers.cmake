# Layers enforced by the build: a library's include path holds only its own source folders and
# those of the libraries it links, never the whole source tree. gpupipe_layer(target PATHS ...)
# makes ${CMAKE_BINARY_DIR}/layers/<target>/<dir> a link to the source folder or file <dir> (for
# example server/engine) and puts ${CMAKE_BINARY_DIR}/layers/<target> on the target's include
# path, PUBLIC (INTERFACE for an interface library). So `#include "server/engine/engine.h"`
# compiles in gpupipe_rpc, which links the engine, and fails in the client, which does not.
function(gpupipe_layer target)
  cmake_parse_arguments(PARSE_ARGV 1 LAYER "" "" "PATHS")
  set(root "${CMAKE_BINARY_DIR}/layers/${target}")
  foreach(dir IN LISTS LAYER_PATHS)
    get_filename_component(parent "${root}/${dir}" DIRECTORY)
    file(MAKE_DIRECTORY "${parent}")
    if(NOT EXISTS "${root}/${dir}")
      file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${dir}" "${root}/${dir}" SYMBOLIC)
    endif()
  endforeach()
  get_target_property(type ${target} TYPE)
  # The build tree's path only: installed libraries (client/) name their install path apart.
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE "$<BUILD_INTERFACE:${root}>")
  else()
    target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${root}>")
  endif()
endfunction()
