# Runs `${CCLAB} ${ARGS}` and checks its exit status. A failing run (STATUS
# non-zero) must print exactly one line on stderr, matching REGEX, and
# nothing on stdout (bad input is refused before any output); a successful
# one must print something on stdout matching REGEX (if given).
# ENV, if given, is VAR=value pairs separated by '|' to run it with.
#   cmake -DCCLAB=path -DARGS="bench --ranks 0" -DSTATUS=2 -DREGEX=... -P cli_test.cmake
separate_arguments(args UNIX_COMMAND "${ARGS}")
set(env_command "")
if(DEFINED ENV AND NOT ENV STREQUAL "")
  string(REPLACE "|" ";" env_pairs "${ENV}")
  set(env_command "${CMAKE_COMMAND}" -E env ${env_pairs})
endif()
execute_process(COMMAND ${env_command} "${CCLAB}" ${args}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)

# With NO_GPU_REGEX (GPU backends), a run may instead fail the way it must
# without a usable GPU: status 1 and one stderr line matching NO_GPU_REGEX.
if(DEFINED NO_GPU_REGEX AND NOT status EQUAL 0)
  set(STATUS 1)
  set(REGEX "${NO_GPU_REGEX}")
endif()

function(fail why)
  message(FATAL_ERROR "cclab ${ARGS}: ${why}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endfunction()

if(NOT status STREQUAL "${STATUS}")
  fail("exit status ${status}, expected ${STATUS}")
endif()
if(STATUS EQUAL 0)
  if(NOT REGEX STREQUAL "" AND NOT out MATCHES "${REGEX}")
    fail("stdout does not match '${REGEX}'")
  endif()
  return()
endif()
string(REGEX MATCHALL "\n" newlines "${err}")
list(LENGTH newlines lines)
if(NOT lines EQUAL 1)
  fail("stderr has ${lines} lines, expected one")
endif()
if(NOT err MATCHES "^cclab: .*${REGEX}")
  fail("stderr does not match '^cclab: .*${REGEX}'")
endif()
if(NOT out STREQUAL "" AND NOT DEFINED NO_GPU_REGEX)
  fail("a refused run printed on stdout")
endif()
