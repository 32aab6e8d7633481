# Installs the nimble build in NIMBLE_BINARY_DIR into a fresh prefix, builds the
# consumer project against it, runs both programs, and checks that the
# runtime-only program does not load LLVM.
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run(${CMAKE_COMMAND} --install "${NIMBLE_BINARY_DIR}" --prefix "${prefix}")
run(${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/runtime_consumer")
run("${WORK_DIR}/build/compiler_consumer")

run(ldd "${WORK_DIR}/build/runtime_consumer")
if(last_output MATCHES "libLLVM")
  message(FATAL_ERROR "runtime_consumer loads LLVM; nimble::runtime must not:\n${last_output}")
endif()
if(NOT last_output MATCHES "${prefix}/lib/libnimble_runtime")
  message(FATAL_ERROR "runtime_consumer does not use the installed runtime:\n${last_output}")
endif()
message(STATUS "the installed package works for both targets")
