"""The conversations sidebar."""
