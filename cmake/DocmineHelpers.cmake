# dm_add_test(NAME <name> SOURCES <files...> [LIBS <targets...>] [LABELS <labels...>]
#             [RANKS <n...>] [GPU] [ARGS <args...>] [TIMEOUT <s>])
# Builds a CUnit (or plain) test program and registers it with ctest.
#  - RANKS 1 2 4: registers one ctest per rank count, run under mpiexec (label mpi added).
#  - GPU: label gpu; the program returns 77 (DM_TEST_SKIP) when no device is present, which ctest
#    reports as skipped.
# Every test runs with kernel tuning off and a tuning database of its own in the build tree:
# tests check results, and a test that wants tuning sets the mode itself.
set(DM_TEST_ENV "DOCMINE_SOURCE_DIR=${PROJECT_SOURCE_DIR};DOCMINE_TUNE=off;DOCMINE_TUNING_DB=${PROJECT_BINARY_DIR}/test-tuning.tsv")

function(dm_add_test)
  cmake_parse_arguments(T "GPU" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;RANKS;ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE dm_testutil ${T_LIBS})
  target_compile_options(${T_NAME} PRIVATE $<$<COMPILE_LANGUAGE:C>:${DM_C_WARNINGS}>)
  set(_labels ${T_LABELS})
  if(T_GPU)
    list(APPEND _labels gpu)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(T_RANKS)
    list(APPEND _labels mpi)
    foreach(_n ${T_RANKS})
      add_test(NAME ${T_NAME}_np${_n}
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${_n} $<TARGET_FILE:${T_NAME}> ${T_ARGS}
               WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
      set_tests_properties(${T_NAME}_np${_n} PROPERTIES LABELS "${_labels}" TIMEOUT ${T_TIMEOUT}
                           SKIP_RETURN_CODE 77 PROCESSORS ${_n}
                           ENVIRONMENT "${DM_TEST_ENV}")
    endforeach()
  else()
    add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS} WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${_labels}" TIMEOUT ${T_TIMEOUT}
                         SKIP_RETURN_CODE 77
                         ENVIRONMENT "${DM_TEST_ENV}")
  endif()
endfunction()

# dm_module(<name> C_SOURCES <...> CUDA_SOURCES <...> LIBS <...>)
# Defines the static library dm_<name>; CUDA sources only when DOCMINE_CUDA is ON.
function(dm_module name)
  cmake_parse_arguments(M "" "" "C_SOURCES;CUDA_SOURCES;LIBS" ${ARGN})
  set(_src ${M_C_SOURCES})
  if(DOCMINE_CUDA)
    list(APPEND _src ${M_CUDA_SOURCES})
  endif()
  add_library(dm_${name} STATIC ${_src})
  target_include_directories(dm_${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(dm_${name} PUBLIC ${M_LIBS})
  target_compile_options(dm_${name} PRIVATE $<$<COMPILE_LANGUAGE:C>:${DM_C_WARNINGS}>
                         $<$<COMPILE_LANGUAGE:CUDA>:${DM_CUDA_WARNINGS}>)
  if(DOCMINE_CUDA)
    set_target_properties(dm_${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                          POSITION_INDEPENDENT_CODE ON)
    target_link_libraries(dm_${name} PUBLIC CUDA::cudart)
  endif()
endfunction()
