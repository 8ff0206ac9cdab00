// OneLine: keeps text that came from users (flag values, environment
// variables, YAML scalars, file names) from breaking gculaunch's promise of
// one-line messages: control characters become visible escapes ("\n").
//
// Used at the exits of the front end (ParseCli, ParseDeviceProfile,
// MakeLaunchSpec) on every Error and note.  Thread safety: pure functions.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "base/error.h"

namespace gculaunch {

/// `text` with \n, \r, \t and other control characters written as escapes.
inline std::string OneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

/// The same error with OneLine() applied to both sentences.
inline Error OneLine(const Error& error) {
  return Error{OneLine(error.what), OneLine(error.hint), error.exit_code};
}

}  // namespace gculaunch
