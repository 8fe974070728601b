"""Compatibility reports: one analysis (and a GPU x engine matrix) as Markdown, JSON or HTML."""
