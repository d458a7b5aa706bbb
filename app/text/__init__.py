"""Text for the window: Markdown, TeX math, exports and small number formats (no widgets)."""
