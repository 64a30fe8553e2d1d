"""Packaging invariants: lti never pulls in torch; adapters names the extra without torch."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import textwrap

import lti


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )


def test_importing_every_lti_module_leaves_torch_absent():
    names = sorted(m.name for m in pkgutil.walk_packages(lti.__path__, "lti."))
    assert "lti.exceptions" in names
    code = f"""
        import importlib, sys
        for name in {names!r}:
            if name.endswith('.demo') or name.endswith('__main__'):
                continue
            importlib.import_module(name)
        bad = sorted(m for m in sys.modules
                     if m.split('.')[0] in ('torch', 'transformers', 'adapters', 'peft'))
        print('LEAKED', bad)
        sys.exit(1 if bad else 0)
    """
    proc = _run(code)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_adapters_without_torch_names_the_extra():
    # Simulate an environment without torch: a meta-path finder that refuses it.
    code = """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == 'torch' or name.startswith('torch.'):
                    raise ImportError('No module named ' + repr(name))
                return None
        sys.meta_path.insert(0, Block())
        try:
            import adapters
        except ImportError as exc:
            print(exc)
            sys.exit(0 if 'lti-adapters[torch]' in str(exc) else 2)
        sys.exit(3)
    """
    proc = _run(code)
    assert proc.returncode == 0, proc.stdout + proc.stderr
