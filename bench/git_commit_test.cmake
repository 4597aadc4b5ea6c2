# The commit a `cclab bench --json` record names is the checkout's HEAD (as
# git reports it now, with or without "-dirty"), or "unknown" outside git:
# the record must not carry the commit of an earlier configure.
# Inputs: CCLAB (the program), SOURCE_DIR, WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
execute_process(
  COMMAND "${CCLAB}" bench --ranks 1 -b 1K -e 1K -n 1 -w 0 --json "${WORK_DIR}/record.json"
  RESULT_VARIABLE result
  OUTPUT_QUIET
  ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "cclab bench failed (${result}): ${err}")
endif()
file(READ "${WORK_DIR}/record.json" record)
string(JSON recorded GET "${record}" build git_commit)
execute_process(
  COMMAND git rev-parse --short HEAD
  WORKING_DIRECTORY "${SOURCE_DIR}"
  OUTPUT_VARIABLE head
  OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET
  RESULT_VARIABLE git_result)
if(NOT git_result EQUAL 0)
  set(head unknown)
endif()
if(NOT recorded MATCHES "^${head}(-dirty)?$")
  message(FATAL_ERROR "the record names commit '${recorded}', the checkout is at '${head}' "
    "(was the program built before the last commit?)")
endif()
message(STATUS "the record names ${recorded}; HEAD is ${head}")
