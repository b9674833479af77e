# The command-line convention every petdaq binary follows (common/cli.h): CLI11, one
# version string from the project version, a man page made with help2man from --help and
# --version at build time, and bash completion.
find_package(CLI11 REQUIRED)
find_program(PETDAQ_HELP2MAN help2man)
if(NOT PETDAQ_HELP2MAN)
  message(STATUS "petdaq: man pages are not built (help2man missing)")
endif()

# petdaq_common: the small library below both petdaqd and the tools (header-only): the
# command-line convention (common/cli.h) and the stop signals (common/stop_signal.h). It
# reads core/settings.h's backend names, nothing that needs linking.
add_library(petdaq_common INTERFACE)
target_include_directories(petdaq_common INTERFACE ${PROJECT_SOURCE_DIR})
target_link_libraries(petdaq_common INTERFACE CLI11::CLI11)
target_compile_definitions(petdaq_common INTERFACE PETDAQ_VERSION="${PROJECT_VERSION}")

# petdaq_cli_program(<target> "<one line that says what it does>" [INSTALL])
# Links the convention, registers the binary for the conformance test
# (tests/tools/cli_conformance.sh) and, with INSTALL, installs it with its man page and its
# bash completion.
function(petdaq_cli_program target description)
  cmake_parse_arguments(ARG "INSTALL" "" "" ${ARGN})
  target_link_libraries(${target} PRIVATE petdaq_common)
  set_property(GLOBAL APPEND PROPERTY PETDAQ_CLI_PROGRAMS ${target})
  if(NOT ARG_INSTALL)
    return()
  endif()
  install(TARGETS ${target} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/common/petdaq-completion.bash
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME ${target})
  if(PETDAQ_HELP2MAN)
    set(page ${CMAKE_BINARY_DIR}/man/${target}.1)
    add_custom_command(OUTPUT ${page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
      COMMAND ${PETDAQ_HELP2MAN} --no-info --no-discard-stderr --section=1
              --name=${description} --output=${page} $<TARGET_FILE:${target}>
      DEPENDS ${target}
      COMMENT "help2man ${target}.1" VERBATIM)
    add_custom_target(${target}-man ALL DEPENDS ${page})
    install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  endif()
endfunction()

# petdaq_cli_script(<name> <file> "<one line that says what it does>")
# A program written in Python (shebang /usr/bin/python3) that follows the same convention
# (python/petdaq/cli.py): registered for the conformance test, its man page made with
# help2man from `file` (run at build time), its bash completion installed. The caller
# installs the program itself.
function(petdaq_cli_script name file description)
  set_property(GLOBAL APPEND PROPERTY PETDAQ_CLI_SCRIPTS ${file})
  install(FILES ${PROJECT_SOURCE_DIR}/common/petdaq-completion.bash
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME ${name})
  # help2man runs the program at build time: only where it runs here (its Python modules).
  execute_process(COMMAND ${file} --version RESULT_VARIABLE runs OUTPUT_QUIET ERROR_QUIET)
  if(PETDAQ_HELP2MAN AND NOT runs EQUAL 0)
    message(STATUS "petdaq: no man page for ${name} (it does not run here: its Python modules?)")
  endif()
  if(PETDAQ_HELP2MAN AND runs EQUAL 0)
    set(page ${CMAKE_BINARY_DIR}/man/${name}.1)
    add_custom_command(OUTPUT ${page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
      COMMAND ${CMAKE_COMMAND} -E env PYTHONDONTWRITEBYTECODE=1
              ${PETDAQ_HELP2MAN} --no-info --no-discard-stderr --section=1
              --name=${description} --output=${page} ${file}
      DEPENDS ${file}
      COMMENT "help2man ${name}.1" VERBATIM)
    add_custom_target(${name}-man ALL DEPENDS ${page})
    install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  endif()
endfunction()
