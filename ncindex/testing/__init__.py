"""ncindex/testing."""
