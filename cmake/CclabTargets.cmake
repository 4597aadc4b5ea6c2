# Per-target build settings and install rules shared by every cclab library and
# program. Options are set per target, never through global CMAKE_CXX_FLAGS.

include_guard(GLOBAL)
include(GNUInstallDirs)

# cclab_set_target_defaults(<target>)
#
# C++20 without extensions, -Wall -Wextra, position-independent code, and the
# sanitizers named in CCLAB_SANITIZE (e.g. "address,undefined" or "thread").
# Flags are limited to C++ sources so a future CUDA target can use this too.
function(cclab_set_target_defaults target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_compile_features(${target} INTERFACE cxx_std_20)
    return()
  endif()

  target_compile_features(${target} PUBLIC cxx_std_20)
  set_target_properties(${target} PROPERTIES
    CXX_EXTENSIONS OFF
    POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra>")

  if(CCLAB_SANITIZE)
    set(compile_flags -fsanitize=${CCLAB_SANITIZE} -fno-omit-frame-pointer)
    string(REPLACE "," ";" sanitizers "${CCLAB_SANITIZE}")
    if("undefined" IN_LIST sanitizers)
      # Make UBSan findings fail the test instead of scrolling past.
      list(APPEND compile_flags -fno-sanitize-recover=undefined)
    endif()
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${compile_flags}>")
    # PUBLIC so that anything in the build tree linking an instrumented static
    # library also links the runtime; BUILD_INTERFACE keeps it out of the export.
    target_link_options(${target} PUBLIC "$<BUILD_INTERFACE:-fsanitize=${CCLAB_SANITIZE}>")
  endif()
endfunction()

# cclab_install_library(<target>)
#
# Installs a library into the export set cclabTargets (exported once, by the
# top-level CMakeLists.txt, as cclab::<EXPORT_NAME>). When the calling folder
# has an include/ directory, its headers are installed too: <folder>/include/
# maps onto ${CMAKE_INSTALL_INCLUDEDIR}, so cclab/... paths are unchanged.
function(cclab_install_library target)
  install(TARGETS ${target}
    EXPORT cclabTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  if(IS_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/include")
    install(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/include/"
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
      FILES_MATCHING PATTERN "*.h")
  endif()
endfunction()

# cclab_discover_tests(<test-target> LABELS <label>... [FILTER <gtest-filter>]
#                      [PROPERTIES <name> <value>...])
#
# gtest_discover_tests() for a test binary, giving every discovered test all
# LABELS (e.g. `unit tsan`). Use it instead of passing LABELS "unit;tsan" to
# gtest_discover_tests(): CMake 3.25 splits list-valued PROPERTIES there and
# the test ends up with only the first label. Here the labels are set by a
# CTest include file that runs after gtest's own one. FILTER selects a subset
# of the binary's tests, so one binary can be called several times with
# different labels (the filters must not overlap). PROPERTIES (single values
# only, same limitation) are passed on. A binary with tests labelled `tsan`
# joins the target cclab_tsan_tests, which is all the tsan preset builds.
function(cclab_discover_tests target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "FILTER" "LABELS;PROPERTIES")
  if(NOT arg_LABELS)
    message(FATAL_ERROR "cclab_discover_tests(${target}): LABELS is required")
  endif()
  set(forwarded "")
  if(arg_PROPERTIES)
    set(forwarded PROPERTIES ${arg_PROPERTIES})
  endif()
  set(list_name ${target}_TESTS)
  if(arg_FILTER)
    list(APPEND forwarded TEST_FILTER "${arg_FILTER}")
    string(MAKE_C_IDENTIFIER "${target}_${arg_FILTER}_TESTS" list_name)
  endif()
  # Listing tests under a sanitizer on a loaded machine can take a while.
  gtest_discover_tests(${target} TEST_LIST ${list_name} DISCOVERY_TIMEOUT 60 ${forwarded})
  set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/${list_name}_labels.cmake")
  file(WRITE "${labels_file}"
    "if(${list_name})\n"
    "  set_tests_properties(\${${list_name}} PROPERTIES LABELS \"${arg_LABELS}\")\n"
    "endif()\n")
  # Appended after the include file gtest_discover_tests() just registered.
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
  if("tsan" IN_LIST arg_LABELS)
    if(NOT TARGET cclab_tsan_tests)
      add_custom_target(cclab_tsan_tests)
    endif()
    add_dependencies(cclab_tsan_tests ${target})
  endif()
endfunction()
