"""Tool modules of the reference service. Every `Tool` defined in a file here is served: discovery finds
it (see `mcpfusion.discovery`); adding a file adds a tool."""
