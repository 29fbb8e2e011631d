"""Language-level text helpers: detection and per-language keyword analysis."""
