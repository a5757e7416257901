"""The agent tools of the MCP server (agents.mcp_server), one module per area as the API's views
are: each module's `register` adds its tools to a server."""
