# Installs the libraries and headers and exports the package `minfer` (docs/library.md):
#   find_package(minfer COMPONENTS allocator) -> minfer::allocator only (allocator/CMakeLists.txt
#   installs its own export set); find_package(minfer) -> minfer::tensor, minfer::ops, ... too.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(MINFER_EXPORTED minfer_tensor minfer_gguf minfer_ops)
foreach(t minfer_tokenizer minfer_chat minfer_sampler minfer_runtime minfer_models minfer_cuda)
  if(TARGET ${t})
    list(APPEND MINFER_EXPORTED ${t})
  endif()
endforeach()
# Exported as minfer::<name without the minfer_ prefix>: minfer::tensor, minfer::ops, minfer::models ...
foreach(t ${MINFER_EXPORTED})
  string(REPLACE "minfer_" "" short ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${short})
  target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/minfer>)
endforeach()
install(TARGETS ${MINFER_EXPORTED} EXPORT minferTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(dir tensor ops gguf tokenizer chat runtime models)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/minfer/${dir}
    FILES_MATCHING PATTERN "*.h" PATTERN "cuda" EXCLUDE PATTERN "fuzz" EXCLUDE)
endforeach()
install(EXPORT minferTargets NAMESPACE minfer:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/minfer)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/minferConfig.cmake.in
  ${PROJECT_BINARY_DIR}/minferConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/minfer)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/minferConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/minferConfig.cmake ${PROJECT_BINARY_DIR}/minferConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/minfer)
