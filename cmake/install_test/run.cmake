# Install test, run by CTest as `cmake -D... -P run.cmake`:
#   1. install the build tree BUILD_DIR into WORK_DIR/prefix;
#   2. configure the consumer project SOURCE_DIR against that prefix only;
#   3. build it and run it (it exits 0 only if the library answered correctly).
# Inputs: BUILD_DIR, SOURCE_DIR, WORK_DIR; optional GENERATOR (default Ninja),
# CXX_COMPILER, SANITIZE (the CCLAB_SANITIZE the library was built with: an
# instrumented static library needs the sanitizer runtime at link time).

foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "install test: ${var} is not set")
  endif()
endforeach()
if(NOT GENERATOR)
  set(GENERATOR Ninja)
endif()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")

# run_stage(<name> <command>...): runs the command, and on failure stops the
# test with the stage name and everything the command printed.
function(run_stage stage)
  message(STATUS "install test: ${stage}")
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE result
    OUTPUT_VARIABLE output
    ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "install test: stage '${stage}' failed (${result}).\n"
      "Command: ${ARGN}\n${output}")
  endif()
  set(stage_output "${output}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

run_stage("install ${BUILD_DIR}"
  "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")

set(configure_args
  -S "${SOURCE_DIR}" -B "${consumer_build}" -G "${GENERATOR}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  # Only the fresh prefix may satisfy find_package(cclab).
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(SANITIZE)
  list(APPEND configure_args "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()
run_stage("configure consumer" "${CMAKE_COMMAND}" ${configure_args})

run_stage("build consumer" "${CMAKE_COMMAND}" --build "${consumer_build}")

run_stage("run consumer" "${consumer_build}/cclab_consumer")
string(STRIP "${stage_output}" printed)
message(STATUS "install test: consumer printed '${printed}'")
