"""End to end: the real `kvset-top --demo` in a tmux pane (a real terminal), read back with capture-pane."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import ROOT

TMUX = shutil.which("tmux")

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

# What each of the four main panels shows once the demo has fed it: a number with its unit.
PANEL_NUMBERS = {
    # y ticks, then x ticks (the axis starts where the curve starts to rise)
    "hit-rate curve": re.compile(r"100%┤(?:.*\n)+.*│\s+\d+[kM]?\s+\d+[kM]?\s"),
    "working sets": re.compile(r"95 % cov\s+≤?[\d.,]+k?(?: blk)?\s"),
    "thrashing": re.compile(r"\+25 % cap [+-]?\d+\.\d pt"),
    "page churn": re.compile(r"accesses/s .*\s[\d.,]+[kM]?/s"),
}


def tmux(socket: str, *args: str) -> str:
    # env=os.environ on purpose: the process-level environment can carry COLUMNS=80/LINES=24 set
    # behind os.environ's back (seen under pytest), which the pane would inherit and which Textual
    # (through shutil.get_terminal_size) prefers over the real pane size.
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [TMUX, "-L", socket, *args], capture_output=True, text=True, timeout=10, check=True, env=env
    ).stdout


def test_demo_in_a_real_terminal_shows_numbers_in_all_four_panels():
    socket = f"kvset-e2e-{os.getpid()}"
    command = f"exec {sys.executable} -m kvset_tui --demo --no-mouse"
    env_cwd = str(ROOT)
    tmux(socket, "new-session", "-d", "-s", "top", "-x", "120", "-y", "40", "-c", env_cwd, command)
    try:
        pid = int(tmux(socket, "display-message", "-p", "-t", "top", "#{pane_pid}").strip())
        deadline = time.monotonic() + 60
        screen = ""
        missing = list(PANEL_NUMBERS)
        while time.monotonic() < deadline:
            screen = tmux(socket, "capture-pane", "-p", "-t", "top")
            missing = [name for name, rx in PANEL_NUMBERS.items() if not rx.search(screen)]
            if not missing:
                break
            time.sleep(0.5)
        assert not missing, f"panels without numbers: {missing}\n{screen}"
        assert "DEMO" in screen and "● demo" in screen  # the banner and a healthy source
        tmux(socket, "send-keys", "-t", "top", "q")
        for _ in range(100):  # q ends the process (and with it the pane)
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists(), "kvset-top did not exit on q"
    finally:
        subprocess.run([TMUX, "-L", socket, "kill-server"], capture_output=True, timeout=10, check=False)


def test_exits_when_its_terminal_goes_away_even_if_sighup_never_arrives():
    """An SSH drop or a killed pane hangs the tty up. A parent (make, a wrapper) may keep SIGHUP from
    the app; here it is ignored outright, so only noticing the dead terminal can end the app."""
    socket = f"kvset-hup-{os.getpid()}"
    command = f"sh -c 'trap \"\" HUP; exec {sys.executable} -m kvset_tui --demo --no-mouse'"
    tmux(socket, "new-session", "-d", "-s", "top", "-x", "100", "-y", "30", "-c", str(ROOT), command)
    try:
        pid = int(tmux(socket, "display-message", "-p", "-t", "top", "#{pane_pid}").strip())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "accesses" not in tmux(
            socket, "capture-pane", "-p", "-t", "top"
        ):
            time.sleep(0.3)
        tmux(socket, "kill-session", "-t", "top")  # the pane's tty hangs up
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
        alive = Path(f"/proc/{pid}").exists()
        if alive:
            os.kill(pid, 9)
        assert not alive, "kvset-top kept running on a hung-up terminal"
    finally:
        subprocess.run([TMUX, "-L", socket, "kill-server"], capture_output=True, timeout=10, check=False)


@pytest.mark.parametrize("signame", ["TERM", "HUP"])
def test_kill_restores_the_terminal_as_q_does(tmp_path, signame):
    """`kill PID` (SIGTERM, as timeout and systemd send) and SIGHUP end the app through its own exit:
    the pane is back on the shell's main screen, with the cursor shown and mouse reporting off."""
    socket = f"kvset-sig-{signame.lower()}-{os.getpid()}"
    pidfile = tmp_path / "pid"
    flags = "#{alternate_on} #{cursor_flag} #{mouse_any_flag}"
    tmux(socket, "new-session", "-d", "-s", "top", "-x", "100", "-y", "30", "-c", str(ROOT), "sh")
    try:
        # the shell starts kvset-top in the foreground (mouse on) and prints its exit status afterwards
        line = f"sh -c 'echo $$ > {pidfile}; exec {sys.executable} -m kvset_tui --demo'; echo EXIT=$?"
        tmux(socket, "send-keys", "-t", "top", line, "Enter")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "accesses" not in tmux(
            socket, "capture-pane", "-p", "-t", "top"
        ):
            time.sleep(0.3)
        running = tmux(socket, "display-message", "-p", "-t", "top", flags).split()
        assert running == ["1", "0", "1"], running  # the app owns the screen: alternate, no cursor, mouse
        pid = int(pidfile.read_text())
        os.kill(pid, getattr(signal, f"SIG{signame}"))
        code = 128 + getattr(signal, f"SIG{signame}")
        screen = ""
        for _ in range(100):
            screen = tmux(socket, "capture-pane", "-p", "-t", "top")
            if f"EXIT={code}" in screen:
                break
            time.sleep(0.1)
        assert f"EXIT={code}" in screen, screen
        assert tmux(socket, "display-message", "-p", "-t", "top", flags).split() == ["0", "1", "0"]
    finally:
        subprocess.run([TMUX, "-L", socket, "kill-server"], capture_output=True, timeout=10, check=False)
