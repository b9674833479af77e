# The CUDA backend: start-up and collect, the stage, the per-slice launches with their
# kernels, the CUB device-wide calls and the device workspace, one translation unit each (CI
# compiles them on two cores), linked with the core library and the CUDA runtime.
add_library(petdaq_gpu STATIC ${CMAKE_CURRENT_SOURCE_DIR}/gpu_backend.cu
                              ${CMAKE_CURRENT_SOURCE_DIR}/slice_stage.cu
                              ${CMAKE_CURRENT_SOURCE_DIR}/slice_compute.cu
                              ${CMAKE_CURRENT_SOURCE_DIR}/cub_calls.cu
                              ${CMAKE_CURRENT_SOURCE_DIR}/device_workspace.cu
                              ${CMAKE_CURRENT_SOURCE_DIR}/image_kernels.cu)
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
