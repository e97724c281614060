"""The Downloads page: the session's output, trace and timings as files."""
