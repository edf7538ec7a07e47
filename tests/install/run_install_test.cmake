# Installs the build tree into a scratch prefix, then configures, builds and runs two consumers:
# the allocator alone (with every other dependency made unfindable, against this install and
# against the allocator's own standalone install) and the whole library (a program that loads
# MODEL and generates).
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)

run(${CMAKE_COMMAND} -S ${SOURCE}/alloc_only -B ${WORK_DIR}/alloc_only -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON
    -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
    -DCMAKE_DISABLE_FIND_PACKAGE_Threads=ON)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/alloc_only)
run(${WORK_DIR}/alloc_only/use_alloc)
message(STATUS "use_alloc: ${last_output}")

# The allocator built and installed on its own provides the same component of the same package.
run(${CMAKE_COMMAND} -S ${SOURCE}/../../allocator -B ${WORK_DIR}/alloc_standalone -DCMAKE_BUILD_TYPE=Release
    -DMINFER_ALLOCATOR_BUILD_TESTS=OFF -DMINFER_ALLOCATOR_BUILD_DEMO=OFF)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/alloc_standalone)
run(${CMAKE_COMMAND} --install ${WORK_DIR}/alloc_standalone --prefix ${WORK_DIR}/alloc_prefix)
run(${CMAKE_COMMAND} -S ${SOURCE}/alloc_only -B ${WORK_DIR}/alloc_only2 -DCMAKE_PREFIX_PATH=${WORK_DIR}/alloc_prefix
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/alloc_only2)
run(${WORK_DIR}/alloc_only2/use_alloc)
message(STATUS "use_alloc (standalone allocator install): ${last_output}")

run(${CMAKE_COMMAND} -S ${SOURCE}/consumer -B ${WORK_DIR}/consumer -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run(${WORK_DIR}/consumer/generate ${MODEL} "def fibonacci(n):" 8)
message(STATUS "generate: ${last_output}")
if(NOT last_output MATCHES "def fibonacci|8 tokens")
  message(FATAL_ERROR "the installed-package program generated nothing")
endif()
