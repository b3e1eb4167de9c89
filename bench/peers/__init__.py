"""Peer servers of `bench/mcp_throughput.py`: the same invoice tool in other stacks, one ASGI `app` each."""
