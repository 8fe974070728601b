"""One pane per tab (advisor/tui/tabs.py lists them): each composes its widgets, handles their
events and offers them as typed properties."""
