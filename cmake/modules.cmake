# tw_module(NAME SOURCES... DEPS...): one static library per src/ directory.
# Includes are rooted at src/, so code writes #include "tsdb/head.h".
function(tw_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(tw_${name} STATIC ${M_SOURCES})
  target_compile_options(tw_${name} PRIVATE ${TW_FUZZ_COVERAGE})
  target_include_directories(tw_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(tw_${name} PUBLIC ${M_DEPS})
endfunction()

# tw_test(NAME SOURCES... DEPS...): one GoogleTest binary, registered with CTest.
function(tw_test name)
  cmake_parse_arguments(T "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  # The code under test is the libraries', built at the preset's -O2 -g (release) or -O1 with
  # ASan (asan). A test's own sources (gtest templates) compile at -O0: db_test.cc takes 10.7 s
  # against 13.6 s at -O1 -g1 and 18 s at -O2 -g in release, and 10 s against 31 s under ASan,
  # where they are still checked by the sanitizers. Line tables keep failures' stacks readable.
  target_compile_options(${name} PRIVATE $<$<CONFIG:RelWithDebInfo>:-O0 -g1> $<$<CONFIG:Debug>:-O0>)
  target_link_libraries(${name} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "TW_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()

# tw_bench(NAME SOURCES... DEPS...): one Google Benchmark binary (not run by ctest).
function(tw_bench name)
  if(NOT TW_BUILD_BENCH)
    return()
  endif()
  cmake_parse_arguments(B "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${B_SOURCES})
  target_link_libraries(${name} PRIVATE ${B_DEPS} benchmark::benchmark benchmark::benchmark_main)
endfunction()
