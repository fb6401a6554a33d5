"""The OpenAI-compatible proxy that trains on live conversations: wire format, sessions, journal, server."""
