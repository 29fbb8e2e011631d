"""ragline over the Model Context Protocol: `ragline mcp` (stdio) and ``/mcp`` on
`ragline serve` (streamable HTTP); tools in :mod:`ragline.mcp.server`."""
