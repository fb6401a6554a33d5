"""Serving the policy: the embedded CPU server (batcher, prefix cache, transformers policy), the HTTP
client every agent and trainer talks to, and launching or attaching to a backend (`backend`)."""
