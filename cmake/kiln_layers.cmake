# kiln_layer(NAME [ROOT dir] DIRS folder... [USES layer...])
#
# One static library, kiln_<NAME>, for one layer of ../shared/DESIGN.md's table: every .c file
# under its folders (recursively, so new files and subfolders are picked up). USES names the
# layers it may use directly (earlier kiln_layer calls) and LLVM; what they may use, it may use
# too. Folders are named as includes name them: from the repository root, or from ROOT (e.g.
# `kiln_layer(api ROOT include DIRS kiln)` for `#include "kiln/pjrt_c_api.h"`). A layer of
# headers only is an INTERFACE library.
#
# The layer compiles against an include tree of its own, ${CMAKE_BINARY_DIR}/layers/<NAME>/,
# holding symlinks to its folders and to those of the layers it may use, and nothing else: a
# file that includes "compiler/codegen/kir.h" from a layer that may not use codegen fails to
# compile ("No such file or directory"). It links only those layers, PRIVATE. The layers get
# no INTERFACE include directories, so linking one never widens what another may include.
# tests/layering/ proves both halves (see CMakeLists.txt).
function(kiln_layer name)
  cmake_parse_arguments(L "" "ROOT" "DIRS;USES" ${ARGN})
  set(root ${CMAKE_SOURCE_DIR})
  if(L_ROOT)
    set(root ${CMAKE_SOURCE_DIR}/${L_ROOT})
  endif()
  set(closure ${name})
  set(link_deps "")
  foreach(dep IN LISTS L_USES)
    if(dep STREQUAL "LLVM")
      list(APPEND closure LLVM)
      list(APPEND link_deps LLVM)
    else()
      get_property(dep_closure GLOBAL PROPERTY KILN_LAYER_CLOSURE_${dep})
      if(NOT dep_closure)
        message(FATAL_ERROR "kiln_layer(${name}): layer ${dep} is not defined before it")
      endif()
      list(APPEND closure ${dep_closure})
      list(APPEND link_deps kiln_${dep})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set_property(GLOBAL PROPERTY KILN_LAYER_CLOSURE_${name} ${closure})
  set_property(GLOBAL PROPERTY KILN_LAYER_DIRS_${name} ${L_DIRS})
  set_property(GLOBAL PROPERTY KILN_LAYER_ROOT_${name} ${root})
  set_property(GLOBAL APPEND PROPERTY KILN_LAYERS ${name})

  set(globs "")
  foreach(dir IN LISTS L_DIRS)
    list(APPEND globs ${root}/${dir}/*.c)
  endforeach()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${globs})
  if(NOT sources)
    # Headers only (e.g. include/ for the public C APIs): nothing to compile or link; the
    # layers that may use it see its folders in their include trees.
    add_library(kiln_${name} INTERFACE)
    set_target_properties(kiln_${name} PROPERTIES KILN_LAYER_CLOSURE "${closure}")
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY KILN_COMPILED_LAYERS ${name})
  add_library(kiln_${name} STATIC ${sources})

  set(tree ${CMAKE_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${tree})
  foreach(layer IN LISTS closure)
    if(layer STREQUAL "LLVM")
      target_include_directories(kiln_${name} SYSTEM PRIVATE ${LLVM_INCLUDE_DIRS})
      continue()
    endif()
    get_property(dirs GLOBAL PROPERTY KILN_LAYER_DIRS_${layer})
    get_property(layer_root GLOBAL PROPERTY KILN_LAYER_ROOT_${layer})
    foreach(dir IN LISTS dirs)
      get_filename_component(parent ${tree}/${dir} DIRECTORY)
      file(MAKE_DIRECTORY ${parent})
      file(CREATE_LINK ${layer_root}/${dir} ${tree}/${dir} SYMBOLIC)
    endforeach()
  endforeach()
  target_include_directories(kiln_${name} PRIVATE ${tree})
  target_link_libraries(kiln_${name} PRIVATE ${link_deps})
  set_target_properties(kiln_${name} PROPERTIES KILN_LAYER_CLOSURE "${closure}")
endfunction()
