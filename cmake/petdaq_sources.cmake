# The core library's sources, named once: the main build (core/CMakeLists.txt) and the fuzz
# project (tests/fuzz/project, built by clang on its own) both compile this list, so a
# source added to or split out of the core reaches both.
get_filename_component(PETDAQ_CORE_DIR ${CMAKE_CURRENT_LIST_DIR}/../core ABSOLUTE)
set(PETDAQ_CORE_SOURCES
  settings.cpp
  settings_parse.cpp
  settings_reader.cpp
  net_address.cpp
  crystal_health.cpp
  geometry.cpp
  counters.cpp
  calibration.cpp
  convert.cpp
  coincidence.cpp
  randoms.cpp
  dead_time.cpp
  order.cpp
  slicer.cpp
  slicer_frames.cpp
  source_clocks.cpp
  chunk_summary.cpp
  cpu_backend.cpp
  cpu_stages.cpp
  cpu_store.cpp
  cpu_take.cpp
  parallel_engine.cpp
  histograms.cpp
  histogram_layout.cpp
  histogram_file.cpp
  figures.cpp
  image.cpp
  message_builder.cpp
  message_arena.cpp
  plm_file.cpp
  plm_sink.cpp
  phase_timer.cpp
)
list(TRANSFORM PETDAQ_CORE_SOURCES PREPEND ${PETDAQ_CORE_DIR}/)
