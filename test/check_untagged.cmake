# Lists the test cases that match FILTER (every registered tag excluded) and
# fails if there is any: such a test case would never run under ctest.
execute_process(COMMAND "${TEST_BINARY}" "${FILTER}" --list-test-names-only
                OUTPUT_VARIABLE names RESULT_VARIABLE rc)
string(STRIP "${names}" names)
if(names)
  message(FATAL_ERROR "test cases without a registered tag (add the tag to NIMBLE_TEST_TAGS "
                      "in test/CMakeLists.txt):\n${names}")
endif()
message(STATUS "every test case carries a registered tag")
