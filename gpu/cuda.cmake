# The CUDA backend: one translation unit for the pipeline and its kernels, one for the CUB
# device-wide calls and one for the device workspace (CI compiles them on two cores), linked
# with the core library and the CUDA runtime.
add_library(petdaq_gpu STATIC ${CMAKE_CURRENT_SOURCE_DIR}/gpu_backend.cu
                              ${CMAKE_CURRENT_SOURCE_DIR}/cub_calls.cu
                              ${CMAKE_CURRENT_SOURCE_DIR}/device_workspace.cu)
if(PETDAQ_PORTABLE)
  target_link_libraries(petdaq_gpu PUBLIC petdaq_core CUDA::cudart_static)
else()
  target_link_libraries(petdaq_gpu PUBLIC petdaq_core CUDA::cudart)
endif()
set_target_properties(petdaq_gpu PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                                            POSITION_INDEPENDENT_CODE ON)
target_compile_options(petdaq_gpu PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --extended-lambda -lineinfo>)
if(PETDAQ_CUDA_SYNC_CHECK)
  target_compile_definitions(petdaq_gpu PRIVATE PETDAQ_CUDA_SYNC_CHECK=1)
endif()
