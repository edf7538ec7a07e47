# Compile options shared by every minfer target: warnings, CPU baseline, sanitizers.
add_library(minfer_options INTERFACE)
add_library(minfer::options ALIAS minfer_options)
target_compile_options(minfer_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
if(MINFER_CPU_ARCH AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  target_compile_options(minfer_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-march=${MINFER_CPU_ARCH}>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-march=${MINFER_CPU_ARCH}>)
endif()
if(MINFER_SANITIZE)
  target_compile_options(minfer_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer>)
  target_link_options(minfer_options INTERFACE -fsanitize=address,undefined)
endif()
