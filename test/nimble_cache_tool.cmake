# tools/nimble-cache end to end: a program (readme_example) fills a fresh
# cache directory; verify passes; an entry with bytes appended is reported
# invalid (exit 1), pruned, and clear empties the directory.
# Run with -DTOOL=<nimble-cache> -DFILLER=<program> -DDIR=<scratch directory>.
file(REMOVE_RECURSE "${DIR}")

function(tool expected_rc expected_output)
  execute_process(COMMAND "${TOOL}" --dir "${DIR}" ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  message(STATUS "nimble-cache ${ARGN}: exit ${rc}\n${out}${err}")
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "nimble-cache ${ARGN}: exit ${rc}, expected ${expected_rc}")
  endif()
  if(NOT out MATCHES "${expected_output}")
    message(FATAL_ERROR "nimble-cache ${ARGN}: output does not match '${expected_output}'")
  endif()
endfunction()

tool(0 " 0 entries, 0 bytes, 0 invalid" list)  # no directory yet: an empty cache
execute_process(COMMAND ${CMAKE_COMMAND} -E env "NIMBLE_CACHE_DIR=${DIR}" "${FILLER}"
                OUTPUT_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FILLER} failed (exit ${rc})")
endif()
file(GLOB entries "${DIR}/*.nkc")
list(LENGTH entries count)
if(count EQUAL 0)
  message(FATAL_ERROR "${FILLER} stored no kernel in ${DIR}")
endif()
tool(0 " ${count} entries, [0-9]+ bytes, 0 invalid" verify)

list(GET entries 0 victim)
file(APPEND "${victim}" "x")  # no longer the size its header says
tool(1 "INVALID .*${count} entries, [0-9]+ bytes, 1 invalid" verify)
tool(0 "removed 1 invalid entries" prune)
math(EXPR left "${count} - 1")
tool(0 " ${left} entries, [0-9]+ bytes, 0 invalid" verify)
math(EXPR files "${left} + 1")  # and the secret
tool(0 "removed ${files} files" clear)
tool(0 " 0 entries, 0 bytes, 0 invalid" list)
