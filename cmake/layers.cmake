# The layers of gculaunch and what each may include: the one place the architecture's
# dependency rules are written down (docs/architecture.md explains them).
#
# A file's layer follows from its path:
#   base/                                   base
#   rendezvous/{protocol,codec,store}.*     codec       (wire format and store semantics)
#   rendezvous/ (the rest)                  rendezvous  (server, sessions, client, `gculaunch store`)
#   etcd/                                   etcd        (etcd v3 client over its HTTP/JSON gateway)
#   launcher/frontend/                      frontend    (pure: flags, platform, profiles, the launch spec)
#   launcher/sys/                           sys         (processes, signals, /proc, /dev, files)
#   launcher/run/                           run         (one node's attempt: supervise, output, summary)
#   launcher/ops/                           ops         (operations: events, status, metrics, hangs)
#   launcher/cluster/etcd/                  cluster_etcd (the etcd backend's node, boards, seat)
#   launcher/cluster/ (the rest)            cluster     (several nodes: agents, coordinator, protocol,
#                                                        the built-in store's backend, the backends' table)
#   launcher/check/                         check       (`gculaunch check`)
#   launcher/app/                           app         (entry points and the job's assembly)
#   tests/, bench/                          tests       (may use everything)
#
# An include names either a project file (its layer, as above) or an external group:
#   std      C++ standard library (<string>, <cstdio>)
#   posix    C and POSIX headers (<unistd.h>, <sys/wait.h>, <linux/...>)
#   asio     Boost.Asio and Boost.System (<boost/asio/...>, <boost/system/...>)
#   process  Boost.Process (<boost/process/...>)
#   beast    Boost.Beast (<boost/beast/...>), header-only HTTP on Asio
#   openssl  OpenSSL (<openssl/...>), linked statically; TLS of the etcd client, and the
#            HMAC of the agents' proof of the job secret (rendezvous/agent_auth.cc)
#   boost    any other Boost header
#   spdlog   spdlog and fmt
#   yaml     yaml-cpp
#   cli11    CLI11
#   json     nlohmann-json
#   catch2   Catch2
# Each layer lists what it may include; everything else fails the build
# (cmake/check_includes.cmake, run for every library target).

set(GCULAUNCH_LAYER_ALLOW_base       base std)
set(GCULAUNCH_LAYER_ALLOW_codec      base codec std)
set(GCULAUNCH_LAYER_ALLOW_rendezvous base codec rendezvous std posix asio spdlog cli11 openssl)
set(GCULAUNCH_LAYER_ALLOW_etcd       base etcd std posix asio beast json openssl)
set(GCULAUNCH_LAYER_ALLOW_frontend   base frontend std yaml cli11 json)
set(GCULAUNCH_LAYER_ALLOW_sys        base frontend sys std posix asio process)
set(GCULAUNCH_LAYER_ALLOW_run
    base codec rendezvous frontend sys run std posix asio spdlog json)
set(GCULAUNCH_LAYER_ALLOW_ops
    base codec rendezvous frontend sys run ops std posix asio beast spdlog json)
set(GCULAUNCH_LAYER_ALLOW_cluster
    base codec rendezvous frontend sys run ops cluster std posix asio spdlog json)
set(GCULAUNCH_LAYER_ALLOW_cluster_etcd
    base codec rendezvous etcd frontend sys run ops cluster cluster_etcd std posix asio spdlog json)
set(GCULAUNCH_LAYER_ALLOW_check      base etcd frontend sys check std posix asio json)
set(GCULAUNCH_LAYER_ALLOW_app
    base codec rendezvous etcd frontend sys run ops cluster cluster_etcd check app
    std posix asio spdlog json cli11)
set(GCULAUNCH_LAYER_ALLOW_tests
    base codec rendezvous etcd frontend sys run ops cluster cluster_etcd check app tests
    std posix asio process beast boost openssl spdlog yaml cli11 json catch2)

# The layer of a project file, from its path relative to the source root; "" if none.
function(gculaunch_layer_of_path path out)
  set(layer "")
  if(path MATCHES "^base/")
    set(layer base)
  elseif(path MATCHES "^etcd/")
    set(layer etcd)
  elseif(path MATCHES "^rendezvous/(protocol|codec|store)\\.(h|cc)$")
    set(layer codec)
  elseif(path MATCHES "^rendezvous/")
    set(layer rendezvous)
  elseif(path MATCHES "^launcher/cluster/etcd/")
    set(layer cluster_etcd)
  elseif(path MATCHES "^launcher/(frontend|sys|run|ops|cluster|check|app)/")
    set(layer ${CMAKE_MATCH_1})
  elseif(path MATCHES "^(tests|bench)/")
    set(layer tests)
  endif()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

# The group of an include: a layer for "project" includes, an external group otherwise.
function(gculaunch_group_of_include name quoted out)
  set(group "")
  if(quoted)
    gculaunch_layer_of_path("${name}" group)
  elseif(name MATCHES "^boost/(asio|system)[/.]")
    set(group asio)
  elseif(name MATCHES "^boost/process[/.]")
    set(group process)
  elseif(name MATCHES "^boost/beast[/.]")
    set(group beast)
  elseif(name MATCHES "^boost/")
    set(group boost)
  elseif(name MATCHES "^openssl/")
    set(group openssl)
  elseif(name MATCHES "^(spdlog|fmt)/")
    set(group spdlog)
  elseif(name MATCHES "^yaml-cpp/")
    set(group yaml)
  elseif(name MATCHES "^CLI/")
    set(group cli11)
  elseif(name MATCHES "^nlohmann/")
    set(group json)
  elseif(name MATCHES "^catch2/")
    set(group catch2)
  elseif(name MATCHES "^[a-z_0-9]+$")
    set(group std)
  elseif(name MATCHES "^[a-z_0-9/]+\\.h$")
    set(group posix)
  endif()
  set(${out} "${group}" PARENT_SCOPE)
endfunction()

# Adds an include check to `target` over `files` (absolute paths): the target is not built
# while one of its files includes something its layer may not.
function(gculaunch_check_layer target)
  set(files ${ARGN})
  string(MAKE_C_IDENTIFIER "${target}" id)
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${id}.layers.stamp)
  set(list_file ${CMAKE_CURRENT_BINARY_DIR}/${id}.layers.files)
  file(GENERATE OUTPUT ${list_file} CONTENT "${files}")
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -DLIST=${list_file} -DSTAMP=${stamp}
            -P ${PROJECT_SOURCE_DIR}/cmake/check_includes.cmake
    DEPENDS ${files} ${list_file} ${PROJECT_SOURCE_DIR}/cmake/layers.cmake
            ${PROJECT_SOURCE_DIR}/cmake/check_includes.cmake
    COMMENT "Checking the includes of ${target} against cmake/layers.cmake"
    VERBATIM)
  target_sources(${target} PRIVATE ${stamp})
endfunction()
