"""The SWE env: a repository in a sandbox, file edits as actions, graded by its real tests."""
