"""tqdm's shared write lock, replaced: used by conftest.py's state check (a lock left held by
a killed forked child) and by the forked children of tests/adapters/test_atomic.py."""

from __future__ import annotations


def replace_tqdm_locks(make_lock) -> None:
    """Put a new lock ``make_lock()`` where tqdm keeps its shared one: in the class that new
    bars use and in every tqdm class that already holds a write lock."""
    from tqdm import std

    std.TqdmDefaultWriteLock.mp_lock = make_lock()
    classes = [std.tqdm]
    while classes:
        cls = classes.pop()
        classes.extend(cls.__subclasses__())
        if "_lock" in vars(cls):
            cls._lock = std.TqdmDefaultWriteLock()
