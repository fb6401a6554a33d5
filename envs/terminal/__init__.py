"""The terminal env: a task in a Docker sandbox, one shell command per step, graded by its tests."""
