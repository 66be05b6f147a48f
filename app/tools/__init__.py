"""Tools the server runs itself: MCP servers, as sessions and the operator name them."""
