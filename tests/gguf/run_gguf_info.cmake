# Runs minfer-gguf-info on FILE (with optional ARGS) and checks its exit code (EXPECT_RC) and
# that its output contains EXPECT. Prints "fixture not found" (the test's SKIP_REGULAR_EXPRESSION)
# and stops when FILE is missing and a success was expected.
if(EXPECT_RC EQUAL 0 AND NOT EXISTS "${FILE}")
  message("fixture not found at ${FILE}: skipping")
  return()
endif()
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND "${TOOL}" ${args} "${FILE}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_RC}\nstdout:\n${out}\nstderr:\n${err}")
endif()
string(FIND "${out}${err}" "${EXPECT}" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "output lacks '${EXPECT}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
