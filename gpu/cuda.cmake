add_library(petdaq_gpu STATIC ${CMAKE_CURRENT_SOURCE_DIR}/gpu_backend.cu)
target_link_libraries(petdaq_gpu PUBLIC petdaq_core CUDA::cudart)
set_target_properties(petdaq_gpu PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
