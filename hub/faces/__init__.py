"""What people and agents drive: the click CLI (`cli`, `cli_common`, `cli_tools`), the hub's own MCP
server (`mcp_server`), `hub watch` (`watch`) and `hub doctor` (`doctor`). The top floor: nothing imports it."""
