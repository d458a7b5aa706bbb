"""Reusable widgets shared by more than one page. They never import controllers or workers."""
