"""What people and agents drive: the click CLI (`cli`, `cli_common`, `cli_tools`), the hub's own MCP
server (`mcp_server`; its tools in `mcp_pipeline`, `mcp_rules`, `mcp_backlog`, sharing `mcp_common`),
`hub watch` (`watch`) and `hub doctor` (`doctor`). The top floor: nothing imports it."""
