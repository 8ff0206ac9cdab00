// The compiled parts of spdlog and fmt, built once.
//
// Debian ships neither library as a static archive, and the executable links fully
// statically, so both used to be header-only (SPDLOG_HEADER_ONLY, FMT_HEADER_ONLY): every
// source that logs then compiled all of spdlog's and fmt's non-template code again, about 7 s
// of CPU per source on the 2-core machine (issue 42).  Instead, every source sees the
// declarations only (SPDLOG_COMPILED_LIB, set on the gculaunch_spdlog target) and this file
// holds the one copy of the definitions: the -inl.h files the headers would have included,
// and the template instantiations those headers leave to a library (the sink types
// gculaunch and its tests use, fmt's locale helpers).
#if !defined(SPDLOG_COMPILED_LIB) || defined(SPDLOG_HEADER_ONLY) || defined(FMT_HEADER_ONLY)
#error "vendor/spdlog_fmt.cc is the compiled part of spdlog and fmt: build it with SPDLOG_COMPILED_LIB only"
#endif

#include <fmt/format-inl.h>
#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/console_globals.h>
#include <spdlog/details/file_helper-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/details/periodic_worker-inl.h>
#include <spdlog/details/registry-inl.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/ansicolor_sink-inl.h>
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/basic_file_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>
#include <spdlog/sinks/stdout_color_sinks-inl.h>
#include <spdlog/sinks/stdout_sinks-inl.h>
#include <spdlog/spdlog-inl.h>

#include <mutex>

// fmt: the templates format.h declares extern when it is not header-only.
namespace fmt {
inline namespace v9 {
namespace detail {
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto thousands_sep_impl<wchar_t>(locale_ref) -> thousands_sep_result<wchar_t>;
template auto decimal_point_impl(locale_ref) -> char;
template auto decimal_point_impl(locale_ref) -> wchar_t;
}  // namespace detail
}  // namespace v9
}  // namespace fmt

// spdlog: the sinks' class templates, for the mutex types gculaunch's sinks use.
template class spdlog::sinks::base_sink<std::mutex>;
template class spdlog::sinks::base_sink<spdlog::details::null_mutex>;
// The scale harness (bench/scale) logs each simulated node to a file.
template class spdlog::sinks::basic_file_sink<std::mutex>;
template class spdlog::sinks::basic_file_sink<spdlog::details::null_mutex>;
template class spdlog::sinks::stdout_sink_base<spdlog::details::console_mutex>;
template class spdlog::sinks::stdout_sink_base<spdlog::details::console_nullmutex>;
template class spdlog::sinks::stdout_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::stdout_sink<spdlog::details::console_nullmutex>;
template class spdlog::sinks::stderr_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::stderr_sink<spdlog::details::console_nullmutex>;
