"""Theme data for kvset-top (shipped in the wheel as kvset_tui.themes)."""
