"""The conversational personal-agent env: a simulated user (`user`) with a hidden preference (`personas`)."""
