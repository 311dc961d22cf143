"""A toy inference runtime: just enough structure to show what plugins can do to it."""
