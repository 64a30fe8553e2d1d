"""Which ``lti`` a benchmark measured: shared by the benchmark scripts' result headers."""

from __future__ import annotations

import pathlib
import subprocess

__all__ = ["git_revision"]


def git_revision() -> str:
    """Git tree hash of the ``lti/`` that is imported (content-addressed, so it stays valid
    when the commit is rebased), with a mark for uncommitted changes; its path when it is
    not in a git checkout (e.g. an exported older tree on ``PYTHONPATH``)."""
    import lti as lti_pkg

    root = pathlib.Path(lti_pkg.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD:lti"], capture_output=True,
                             text=True, cwd=root, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "lti"], capture_output=True,
                               text=True, cwd=root, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"lti imported from {root}/lti (not a git checkout)"
    mark = " + uncommitted changes" if dirty else ""
    return f"lti/ tree {out.stdout.strip()}{mark} (git rev-parse --short HEAD:lti)"
