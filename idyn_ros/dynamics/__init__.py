"""dynamics layer."""
