"""The reference service: a multi-tenant billing API served as MCP tools and REST by mcpfusion."""
