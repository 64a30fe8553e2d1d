"""Issue 16's acceptance figures on tiny random GPT-2, Llama, Qwen2 and Mistral models.

Four measurements per family (2 layers, width 32, vocabulary 64; no downloads), each the
quantity a test of the default suite asserts, measured here and written down:

1. **Reload** (item 1): ``save_pretrained`` of an adapted model (gates 0.5), then HF's own
   ``AutoModelForCausalLM.from_pretrained``: max |logit difference| against the base model
   (the adapter keys are reported as unexpected, counted here), then ``load_adapter`` of the
   checkpoint written beside it: max |logit difference| against the adapted model; and
   ``save_adapter`` / ``load_adapter`` into a fresh base.
2. **bf16 / fp16 cached vs full** (item 5): teacher-forced on the same 4 x 24 tokens, a prefill
   of 6 then one token per call with the KV cache (what greedy ``generate`` does) against one
   full forward; ``max |cached - full| / max |full|`` for the base model and the adapted one
   (the adapters of ``tests/adapters/test_dtype.py``, perturbed so the branch matters), their
   ratio, and the adapted model in float32 for reference.
3. **Graph breaks** (item 6): ``torch._dynamo.explain`` of a plain forward without a cache, and
   separately of a cached prefill plus one decode step (``DynamicCache`` made inside the traced
   function), base model and adapted model (gates 0.5).
4. **SIGKILL** (item 10): the kill harness of ``tests/adapters/test_atomic.py`` on each model's
   adapter checkpoint (``--kills`` kills; a child overwrites one checkpoint in a loop and is
   killed at a random moment; the folder must load, every tensor from one save, the previous
   or the new one), and the same number of kills of the old in-place writer on Llama as the
   control that shows the harness can fail.

The helpers come from the tests (``tests.adapters``), so the figures are those of the code the
tests check. One thread: ``torch.set_num_threads`` and BLAS/OpenMP pools pinned with
threadpoolctl. Result files: ``benchmarks/results/peft_acceptance.{md,json}``.

Run: ``python benchmarks/peft_acceptance.py [--kills 30] [--no-save]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import platform
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import torch
from threadpoolctl import threadpool_info, threadpool_limits

from adapters import HRMConfig, find_adapters, inject, load_adapter, save_adapter

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
KINDS = ("gpt2", "llama", "qwen2", "mistral")
IDS = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(1))


def _open(model, gate: float = 0.5):
    with torch.no_grad():
        for a in find_adapters(model).values():
            a.adapter.gate.fill_(gate)
    return model


def _logits(model, ids=IDS) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


def reload_figures(kind: str) -> dict:
    """Item 1: save_pretrained -> from_pretrained (+ load_adapter), save/load_adapter."""
    import transformers

    from tests.adapters._tiny_lm import tiny_lm

    model = tiny_lm(kind)
    base = _logits(model)
    _open(inject(model, HRMConfig(d_state=4)))
    adapted = _logits(model)
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        hf_log = logging.getLogger("transformers")
        level = hf_log.level
        hf_log.setLevel(logging.ERROR)  # the load report lists the adapter keys
        try:
            loaded, info = transformers.AutoModelForCausalLM.from_pretrained(
                d, output_loading_info=True)
        finally:
            hf_log.setLevel(level)
        loaded.eval()
        d_base = (_logits(loaded) - base).abs().max().item()
        load_adapter(loaded, d)
        d_adapted = (_logits(loaded) - adapted).abs().max().item()
    with tempfile.TemporaryDirectory() as d:
        save_adapter(model, d)
        fresh = load_adapter(tiny_lm(kind), d)
        d_adapter_only = (_logits(fresh) - adapted).abs().max().item()
    n_adapter_keys = sum(k.startswith("hrm_adapters.") for k in model.state_dict())
    return {"from_pretrained_vs_base": d_base,
            "from_pretrained_plus_load_adapter_vs_adapted": d_adapted,
            "save_load_adapter_vs_adapted": d_adapter_only,
            "adapter_effect": (adapted - base).abs().max().item(),
            "unexpected_keys_reported": len(info["unexpected_keys"]),
            "adapter_keys": n_adapter_keys,
            "missing_keys": sorted(info["missing_keys"])}


def dtype_figures(kind: str) -> dict:
    """Item 5: cached vs full forward under bf16 and fp16, base and adapted."""
    from tests.adapters._tiny_lm import tiny_lm
    from tests.adapters.test_dtype import SEQ, _adapted, cached_vs_full_gap

    out = {}
    for low in (torch.bfloat16, torch.float16):
        base = tiny_lm(kind).to(low)
        model = _adapted(kind).to(low)
        with torch.no_grad():
            ref = base(SEQ).logits.float()
            effect = float((model(SEQ).logits.float() - ref).abs().max() / ref.abs().max())
        base_gap, ours = cached_vs_full_gap(base, SEQ, 6), cached_vs_full_gap(model, SEQ, 6)
        f32 = cached_vs_full_gap(copy.deepcopy(model).float(), SEQ, 6)
        out[str(low).removeprefix("torch.")] = {
            "base": base_gap, "adapted": ours, "ratio": ours / base_gap,
            "adapted_float32": f32, "branch_effect": effect}
    return out


def graph_break_figures(kind: str) -> dict:
    """Item 6: graph breaks of a plain forward and of cached prefill + one decode step."""
    from transformers import DynamicCache

    from tests.adapters._tiny_lm import tiny_lm

    def no_cache(model, x):
        return model(x, use_cache=False).logits

    def with_cache(model, x):
        cache = DynamicCache(config=model.config)
        prefill = model(x, cache=cache).logits
        step = model(x[:, -1:], cache=cache).logits
        return prefill, step

    out = {}
    for arm in ("base", "adapted"):
        model = tiny_lm(kind)
        if arm == "adapted":
            _open(inject(model, HRMConfig(d_state=4)))
        for name, fn in (("no_cache", no_cache), ("cache", with_cache)):
            torch._dynamo.reset()
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                explained = torch._dynamo.explain(fn)(model, IDS[:, :7])
            out[f"{arm}_{name}"] = {
                "graph_breaks": explained.graph_break_count,
                "graphs": explained.graph_count,
                "reasons": sorted({str(r.reason).splitlines()[0]
                                   for r in explained.break_reasons})}
    torch._dynamo.reset()
    return out


def kill_figures(kind: str, kills: int, *, old_writer: bool = False) -> dict:
    """Item 10: ``kills`` SIGKILLs of a child overwriting one adapter checkpoint."""
    from tests.adapters.test_atomic import kill_loop, naive_save
    from tests.adapters.test_four_architectures import _ModelWriter

    class OldWriter(_ModelWriter):
        def save(self, model, directory):
            naive_save(model, directory)

    writer = (OldWriter if old_writer else _ModelWriter)(kind)
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # format-1 folders of the old writer warn on load
        outcome = kill_loop(Path(d), kills, seed=1600 + KINDS.index(kind), writer=writer)
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in outcome.items()}


def _git_head() -> str:
    """The checked-out commit, with ``+changes`` when tracked files differ from it."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def _fmt(x: float) -> str:
    return "0" if x == 0 else f"{x:.2e}"


def render(res: dict, command: str) -> str:
    env = res["environment"]
    lines = [
        "```text",
        f"$ {command}",
        f"# peft_acceptance (issue 16): tiny random GPT-2 / Llama / Qwen2 / Mistral, 2 layers, "
        f"width 32, vocabulary 64; commit {env['commit']}; {env['date']}",
        f"# torch {env['torch']}, transformers {env['transformers']}, {env['machine']}, torch "
        f"threads {env['torch_threads']}; BLAS/OpenMP pools (threadpoolctl): {env['pools']}; "
        f"load average at start {env['load_average']}; {env['seconds']:.0f} s",
        "```",
        "",
        "**1. save_pretrained -> from_pretrained (max |logit difference|)**",
        "",
        "| model | from_pretrained vs base | + load_adapter vs adapted | save/load_adapter vs "
        "adapted | adapter effect | adapter keys reported unexpected |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, r in res["reload"].items():
        lines.append(f"| {kind} | {_fmt(r['from_pretrained_vs_base'])} | "
                     f"{_fmt(r['from_pretrained_plus_load_adapter_vs_adapted'])} | "
                     f"{_fmt(r['save_load_adapter_vs_adapted'])} | {r['adapter_effect']:.3f} | "
                     f"{r['unexpected_keys_reported']} of {r['adapter_keys']} |")
    lines += ["", "**5. Cached vs full forward in half precision "
              "(max |cached - full| / max |full|, same tokens)**", "",
              "| model | dtype | base | adapted | adapted / base | adapted in float32 | "
              "branch effect |", "|---|---|---:|---:|---:|---:|---:|"]
    for kind, per in res["dtype"].items():
        for low, r in per.items():
            lines.append(f"| {kind} | {low} | {r['base']:.2e} | {r['adapted']:.2e} | "
                         f"{r['ratio']:.2f} | {r['adapted_float32']:.1e} | "
                         f"{r['branch_effect']:.2f} |")
    lines += ["", "**6. Graph breaks (`torch._dynamo.explain`, graph breaks / graphs)**", "",
              "| model | base, no cache | adapted, no cache | base, cache (prefill + 1 step) | "
              "adapted, cache (prefill + 1 step) | break reasons (adapted) |",
              "|---|---:|---:|---:|---:|---|"]
    for kind, r in res["graph_breaks"].items():
        cells = [f"{r[k]['graph_breaks']} / {r[k]['graphs']}"
                 for k in ("base_no_cache", "adapted_no_cache", "base_cache", "adapted_cache")]
        reasons = sorted(set(r["adapted_no_cache"]["reasons"]) | set(r["adapted_cache"]["reasons"]))
        lines.append(f"| {kind} | " + " | ".join(cells) + f" | {'; '.join(reasons) or '-'} |")
    lines += ["", "**10. SIGKILL during save_adapter (one checkpoint overwritten in a loop)**", "",
              "| model | writer | kills | readable | previous save | new save | unreadable | "
              "stale JSON copy (warned) | saves completed |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in res["kills"]:
        o = row["outcome"]
        lines.append(f"| {row['model']} | {row['writer']} | {o.get('kills', 0)} | "
                     f"{o.get('readable', 0)} | {o.get('previous', 0)} | {o.get('new', 0)} | "
                     f"{o.get('unreadable', 0)} | {o.get('stale JSON copy (warned)', 0)} | "
                     f"{o.get('saves completed', 0)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=30, help="SIGKILLs per model (default 30)")
    p.add_argument("--no-save", action="store_true", help="print only")
    args = p.parse_args(argv)
    import transformers

    transformers.utils.logging.disable_progress_bar()
    t0 = time.perf_counter()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        pools = ", ".join(sorted({f"{i['internal_api']} ({i['num_threads']} threads)"
                                  for i in threadpool_info()})) or "none found"
        env = {"commit": _git_head(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "torch": torch.__version__, "transformers": transformers.__version__,
               "machine": platform.machine(), "torch_threads": torch.get_num_threads(),
               "pools": pools, "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg())}
        res = {"reload": {}, "dtype": {}, "graph_breaks": {}, "kills": []}
        # the kill test forks: first, before dynamo has run in this process
        for kind in KINDS:
            res["kills"].append({"model": kind, "writer": "save_adapter",
                                 "outcome": kill_figures(kind, args.kills)})
        res["kills"].append({"model": "llama", "writer": "old in-place writer (control)",
                             "outcome": kill_figures("llama", args.kills, old_writer=True)})
        print(f"kills done ({time.perf_counter() - t0:.0f} s)", flush=True)
        for kind in KINDS:
            res["reload"][kind] = reload_figures(kind)
            res["dtype"][kind] = dtype_figures(kind)
            res["graph_breaks"][kind] = graph_break_figures(kind)
            print(f"{kind}: reload, dtype and graph breaks done ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
    env["seconds"] = time.perf_counter() - t0
    res["environment"] = env
    res["kills_per_model"] = args.kills
    command = f"python benchmarks/peft_acceptance.py --kills {args.kills}"
    text = render(res, command)
    print(text)
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "peft_acceptance.md").write_text(text)
        (RESULTS / "peft_acceptance.json").write_text(json.dumps(res, indent=2) + "\n")
    return res


if __name__ == "__main__":
    main()
