# Builds the consumer project against a nimble package and runs both of its
# programs, checking that the runtime-only one does not load LLVM. PACKAGE
# picks the package: "install" (the default) installs the build in
# NIMBLE_BINARY_DIR into a fresh prefix and uses that; "build" uses the build
# tree itself (-Dnimble_DIR=NIMBLE_BINARY_DIR).
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

if(NOT PACKAGE)
  set(PACKAGE install)
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
if(PACKAGE STREQUAL "build")
  set(find "-Dnimble_DIR=${NIMBLE_BINARY_DIR}")
  set(library_dir "${NIMBLE_BINARY_DIR}/lib")
else()
  set(prefix "${WORK_DIR}/prefix")
  run(${CMAKE_COMMAND} --install "${NIMBLE_BINARY_DIR}" --prefix "${prefix}")
  set(find "-DCMAKE_PREFIX_PATH=${prefix}")
  set(library_dir "${prefix}/lib")
endif()
run(${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    "${find}" -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/runtime_consumer")
run("${WORK_DIR}/build/compiler_consumer")

run(ldd "${WORK_DIR}/build/runtime_consumer")
if(last_output MATCHES "libLLVM")
  message(FATAL_ERROR "runtime_consumer loads LLVM; nimble::runtime must not:\n${last_output}")
endif()
if(NOT last_output MATCHES "${library_dir}/libnimble_runtime")
  message(FATAL_ERROR "runtime_consumer does not use the package's runtime (${library_dir}):\n${last_output}")
endif()
message(STATUS "the ${PACKAGE} package works for both targets")
