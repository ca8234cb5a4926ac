"""One module per schema revision; never edit a released one, add a new revision."""
