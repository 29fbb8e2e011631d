"""HTTP service: the JSON API, SSE chat, OpenAI-compatible endpoints and the web UI."""
