#include "launcher/run/failure_signature.h"

#include "base/text.h"
#include "launcher/run/exit_summary.h"

namespace gculaunch {

namespace {

// `line` cut to `max` bytes, moved back to the start of a UTF-8 character.
std::string Cut(std::string line, std::size_t max) {
  if (line.size() <= max) return line;
  std::size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) --end;
  line.resize(end);
  return line;
}

}  // namespace

std::string LastLine(std::string_view text) {
  std::string last;
  for (const std::string& line : Split(text, '\n')) {
    std::string trimmed = Trim(line);
    if (!trimmed.empty()) last = std::move(trimmed);
  }
  return Cut(std::move(last), kMaxSignatureLine);
}

std::string SignatureOf(const WorkerExit& exit, std::string_view line) {
  std::string signature = exit.Describe();
  if (!line.empty()) signature += ": " + std::string(line);
  return signature;
}

std::string AttemptSignature(const std::vector<RankRecord>& records, int restart_count,
                             const AttemptErrorFiles& files) {
  SummaryInput in;
  in.restarts = restart_count;
  for (const RankRecord& r : records) {
    if (r.restart_count != restart_count) continue;
    in.records.push_back(r);
    if (auto text = files.text.find(r.local_rank); text != files.text.end()) {
      in.error_files[{restart_count, r.local_rank}] = text->second;
    }
    if (auto mtime = files.mtime_ns.find(r.local_rank); mtime != files.mtime_ns.end()) {
      in.error_file_mtime_ns[{restart_count, r.local_rank}] = mtime->second;
    }
  }
  const std::optional<RootCause> cause = FindRootCause(in);
  if (!cause) return "";
  std::string line;
  if (cause->from_error_file) {
    line = LastLine(cause->message);
    if (line.empty()) line = LastLine(cause->traceback);
  } else {
    line = LastLine(Join(cause->stderr_tail, "\n"));
  }
  return SignatureOf(cause->exit, line);
}

AttemptErrorFiles ReadAttemptErrorFiles(const std::vector<RankRecord>& records, int restart_count) {
  AttemptErrorFiles files;
  for (const RankRecord& r : records) {
    if (r.restart_count != restart_count || !r.error_text || !r.exit || r.exit->success()) {
      continue;
    }
    files.text[r.local_rank] = *r.error_text;
    files.mtime_ns[r.local_rank] = r.error_file_mtime_ns;
  }
  return files;
}

}  // namespace gculaunch
