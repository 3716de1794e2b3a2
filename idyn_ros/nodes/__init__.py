"""nodes layer."""
