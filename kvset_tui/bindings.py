"""kvset-top's keys: each binding's tooltip is its line in the help screen, which reads the live
bindings (kvset_tui.help_screen), and its id is what `--keymap` rebinds (kvset_tui.keymap)."""

from __future__ import annotations

from textual.binding import Binding, BindingType

APP_BINDINGS: list[BindingType] = [
    Binding("question_mark", "help", "Help", id="kvset.help", tooltip="this help"),
    Binding(
        "p",
        "toggle_pause",
        "Pause",
        id="kvset.pause",
        tooltip="pause the display; analysis goes on, pause again shows the latest",
    ),
    Binding(
        "space",
        "toggle_replay_pause",
        "Pause replay",
        show=False,
        id="kvset.replay_pause",
        tooltip="pause the replay itself (no more is read); again resumes",
    ),
    Binding(
        "plus",
        "change_replay_speed(2.0)",
        "Faster",
        show=False,
        id="kvset.speed_up",
        tooltip="replay twice as fast (up to 4096x)",
    ),
    Binding(
        "minus",
        "change_replay_speed(0.5)",
        "Slower",
        show=False,
        id="kvset.speed_down",
        tooltip="replay half as fast (down to 1/64x)",
    ),
    Binding("w", "cycle_window", "Window", id="kvset.window", tooltip="cycle the window: 1m, 5m, 1h, all"),
    *(
        Binding(key, f"show_window('{label}')", label, show=False, id=f"kvset.window_{label}", tooltip=tip)
        for key, label, tip in (
            ("1", "1m", "the last minute"),
            ("5", "5m", "the last 5 minutes"),
            ("h", "1h", "the last hour"),
            ("a", "all", "all time"),
        )
    ),
    Binding(
        "u",
        "cycle_units",
        "Units",
        id="kvset.units",
        tooltip="cycle units: blocks, tokens, GiB (GiB needs --model)",
    ),
    Binding("l", "toggle_log", "Log/lin", id="kvset.log", tooltip="log or linear capacity axis"),
    *(
        Binding(key, f"move_cursor({steps})", label, show=False, id=f"kvset.cursor_{name}", tooltip=tip)
        for key, steps, label, name, tip in (
            (
                "left",
                -1,
                "Cursor",
                "left",
                "the curve's cursor to a smaller capacity (at the pool first)",
            ),
            ("right", 1, "Cursor", "right", "the curve's cursor to a larger capacity"),
            (
                "shift+left",
                -8,
                "Cursor",
                "halve",
                "the cursor to half the capacity (a doubling on a log axis)",
            ),
            ("shift+right", 8, "Cursor", "double", "the cursor to twice the capacity"),
        )
    ),
    Binding(
        "c",
        "type_capacity",
        "Capacity",
        show=False,
        id="kvset.cursor_type",
        tooltip="type a capacity for the cursor (blocks, or GiB with --model)",
    ),
    Binding(
        "escape",
        "clear_cursor",
        "No cursor",
        show=False,
        id="kvset.cursor_clear",
        tooltip="hide the cursor",
    ),
    Binding(
        "t",
        "cycle_targets",
        "Targets",
        id="kvset.targets",
        tooltip="cycle target sets: coverage, absolute",
    ),
    Binding(
        "r",
        "cycle_rank",
        "Rank",
        id="kvset.rank",
        tooltip="cycle the rank: merged, rank 0, rank 1, ... (curve, working sets)",
    ),
    Binding(
        "b",
        "cycle_principals",
        "By",
        show=False,
        id="kvset.principals_by",
        tooltip="cycle the Principals panel's level: tenant, session, adapter (those --by asked for)",
    ),
    Binding(
        "e",
        "export",
        "Export",
        id="kvset.export",
        tooltip="export the snapshot as JSON, the screen as SVG, the curve as CSV",
    ),
    Binding("q", "quit", "Quit", id="kvset.quit", tooltip="quit"),
    # On-call muscle memory: ctrl+c ends a `top`, so it ends this one too.
    Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="kvset.interrupt", tooltip="quit"),
]
