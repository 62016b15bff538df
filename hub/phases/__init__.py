"""One module per phase; each composes the rooms below it. Nothing outside `cli` and `mcp_server` imports these."""
