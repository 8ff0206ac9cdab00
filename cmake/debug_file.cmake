# The executable's debug information, kept apart (docs/packaging.md, "Debug file").
#
# gculaunch_split_debug(TARGET): after every link of TARGET, cmake/split_debug.cmake copies its
# debug sections and symbols into <file>.debug (objcopy --only-keep-debug) and gives the
# executable a .gnu_debuglink naming that file; both carry the same GNU build id
# (-Wl,--build-id).  The executable in the build keeps its own debug information, so a
# debugger on build/launcher/gculaunch needs nothing else.  What is shipped is stripped (the
# wheel, the .deb, `cmake --install --strip`) and finds its debug file again by build id or by
# the debuglink.
#
# The debug file is installed only as the component "dbg", which a plain `cmake --install`
# leaves out: `cmake --install build --component dbg`, or the gculaunch-dbg package, puts it at
# lib/debug/.build-id/<first two hex digits>/<the rest>.debug, where gdb, eu-stack and
# systemd-coredump look for it.
function(gculaunch_split_debug target)
  if(NOT CMAKE_OBJCOPY OR NOT CMAKE_READELF)
    message(FATAL_ERROR "objcopy and readelf are missing; they write gculaunch's debug file "
                        "(fix: apt-get install binutils)")
  endif()
  target_link_options(${target} PRIVATE -Wl,--build-id=sha1)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DBINARY=$<TARGET_FILE:${target}> -DOBJCOPY=${CMAKE_OBJCOPY}
            -DREADELF=${CMAKE_READELF} -P ${PROJECT_SOURCE_DIR}/cmake/split_debug.cmake
    COMMENT "Writing the debug file of ${target}"
    VERBATIM)
  install(CODE "
    file(STRINGS \"$<TARGET_FILE:${target}>.build-id\" id LIMIT_COUNT 1)
    string(SUBSTRING \"\${id}\" 0 2 head)
    string(SUBSTRING \"\${id}\" 2 -1 tail)
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/debug/.build-id/\${head}\"
         TYPE FILE RENAME \"\${tail}.debug\" FILES \"$<TARGET_FILE:${target}>.debug\")"
    COMPONENT dbg EXCLUDE_FROM_ALL)
endfunction()
