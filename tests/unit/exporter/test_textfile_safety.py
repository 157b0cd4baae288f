"""The textfile writer cannot be turned against the files around it: its temporary file has a name
nobody can plant beforehand, and a target that is a link, a FIFO or a device is refused, never
replaced (the file and the thing it would have clobbered stay as they were)."""

from __future__ import annotations

import os
import stat

import pytest
from prometheus_client import CollectorRegistry, Counter

from kvset.exporter.textfile import check_textfile_target, write_textfile


@pytest.fixture
def registry():
    r = CollectorRegistry()
    Counter("kvset_test_total", "a counter", registry=r).inc(3)
    return r


def test_a_link_planted_at_the_old_temporary_name_is_not_followed(tmp_path, registry):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    victim.chmod(0o600)
    target = tmp_path / "kvset.prom"
    # the name the writer used to take (predictable: the pid), and a few like it
    for name in (f".kvset.prom.{os.getpid()}.tmp", ".kvset.prom.tmp"):
        (tmp_path / name).symlink_to(victim)
    write_textfile(target, registry)
    assert victim.read_text() == "precious" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert "kvset_test_total 3.0" in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    left = {p.name for p in tmp_path.iterdir()} - {"victim", "kvset.prom"}
    assert left == {f".kvset.prom.{os.getpid()}.tmp", ".kvset.prom.tmp"}  # only the planted links


def test_a_fifo_or_a_link_at_the_target_is_refused_and_kept(tmp_path, registry):
    fifo = tmp_path / "fifo.prom"
    os.mkfifo(fifo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("kept")
    link = tmp_path / "link.prom"
    link.symlink_to(elsewhere)
    for target, kind in ((fifo, "a FIFO"), (link, "a symbolic link")):
        with pytest.raises(ValueError, match=kind):
            check_textfile_target(target)
        with pytest.raises(OSError, match=f"{kind}, not a regular file"):
            write_textfile(target, registry)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink() and elsewhere.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "fifo.prom", "link.prom"]


def test_a_regular_file_is_replaced_whole(tmp_path, registry):
    target = tmp_path / "kvset.prom"
    target.write_text("old\n")
    check_textfile_target(target)
    write_textfile(target, registry)
    assert "old" not in target.read_text() and "kvset_test_total 3.0" in target.read_text()
