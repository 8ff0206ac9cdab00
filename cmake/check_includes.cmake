# cmake -DROOT=<source root> -DLIST=<file holding a ;-list of files> [-DSTAMP=<file>] -P check_includes.cmake
#
# Parses every #include of every listed file and fails, naming file, line and the rule, on an
# include its layer may not use (cmake/layers.cmake), or on a quoted include that names no
# file of the project.  Writes STAMP when everything is allowed.
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/layers.cmake)

file(READ "${LIST}" files)
string(STRIP "${files}" files)
set(problems "")
foreach(file IN LISTS files)
  file(RELATIVE_PATH rel "${ROOT}" "${file}")
  gculaunch_layer_of_path("${rel}" layer)
  if(layer STREQUAL "")
    string(APPEND problems "${rel}: not inside any layer of cmake/layers.cmake\n")
    continue()
  endif()
  set(allowed ${GCULAUNCH_LAYER_ALLOW_${layer}})
  # One list element per line.  ';', backslashes and brackets would confuse CMake's list splitting; no
  # include directive needs them.
  file(READ "${file}" content)
  string(REGEX REPLACE "[][;]" "_" content "${content}")
  string(REPLACE "\\" "_" content "${content}")
  string(REPLACE "\n" ";" lines "${content}")
  set(number 0)
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*([<\"])([^>\"]+)[>\"]")
      continue()
    endif()
    set(name "${CMAKE_MATCH_2}")
    set(quoted FALSE)
    if(CMAKE_MATCH_1 STREQUAL "\"")
      set(quoted TRUE)
      if(NOT EXISTS "${ROOT}/${name}")
        string(APPEND problems
               "${rel}:${number}: #include \"${name}\" names no file of the project "
               "(project includes are written from the repository root)\n")
        continue()
      endif()
    endif()
    gculaunch_group_of_include("${name}" ${quoted} group)
    if(group STREQUAL "")
      string(APPEND problems
             "${rel}:${number}: #include ${name} belongs to no group of cmake/layers.cmake\n")
    elseif(NOT group IN_LIST allowed)
      list(JOIN allowed ", " allowed_text)
      string(APPEND problems
             "${rel}:${number}: layer '${layer}' may not include ${name} (${group}); "
             "it may include: ${allowed_text}\n")
    endif()
  endforeach()
endforeach()

if(NOT problems STREQUAL "")
  # One plain line each (an error message would be re-wrapped, splitting "file:line" from its
  # rule).
  message("include rules broken (cmake/layers.cmake):")
  string(REGEX REPLACE "\n$" "" problems "${problems}")
  string(REPLACE ";" "<semicolon>" problems "${problems}")
  string(REPLACE "\n" ";" problem_lines "${problems}")
  foreach(problem IN LISTS problem_lines)
    string(REPLACE "<semicolon>" ";" problem "${problem}")
    message("  ${problem}")
  endforeach()
  message(FATAL_ERROR "include rules broken: see the lines above")
endif()
if(DEFINED STAMP)
  file(TOUCH "${STAMP}")
endif()
