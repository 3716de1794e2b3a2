"""robots layer."""
