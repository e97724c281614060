"""The Overview page (its headline chart and table come from the Timings feature)."""
