"""A user's Flower app (see pyproject.toml)."""
