"""``torch.export`` of an adapted model.

Without a KV cache (one call over the whole sequence) the exported program equals the eager
model (0.0, strict and non-strict, also on inputs other than the example). With a cache, as in
transformers' ExecuTorch recipe (``TorchExportableModuleForDecoderOnlyLM``, one token per call
on a static cache), the adapters' SSM state is carried between calls outside any graph, so an
exported decode step could not continue it. Before, export stopped deep in torch with "Could
not guard on data-dependent expression u0 > 0" at the adapters' context code; it now raises
AdapterError saying why and what works.
"""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, disable_adapter, find_adapters, inject
from adapters.exceptions import AdapterError
from tests.adapters._tiny import tiny_causal_lm

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

IDS = torch.tensor([[5, 9, 14, 3, 22, 41, 7], [1, 2, 60, 33, 8, 19, 11]])
MASK = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1] * 7])


def _adapted():
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.5))
    with torch.no_grad():
        for i, adapted in enumerate(find_adapters(model).values()):
            g = torch.Generator().manual_seed(i)
            adapted.adapter.ssm.B.add_(torch.randn(adapted.adapter.ssm.B.shape, generator=g))
    return model


@pytest.mark.parametrize("strict", [False, True])
def test_export_without_a_cache_equals_the_eager_model(strict):
    model = _adapted()
    kwargs = {"input_ids": IDS, "attention_mask": MASK, "use_cache": False}
    program = torch.export.export(model, args=(), kwargs=kwargs, strict=strict)
    other = {"input_ids": IDS.flip(0), "attention_mask": torch.ones_like(IDS), "use_cache": False}
    with torch.no_grad():
        for inputs in (kwargs, other):
            assert torch.equal(program.module()(**inputs).logits, model(**inputs).logits)


def _executorch_module(model):
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    model.generation_config.cache_implementation = "static"
    return TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=16)


def test_export_with_a_cache_is_refused_with_the_reason():
    module = _executorch_module(_adapted())
    step = {"input_ids": IDS[:1, :1], "cache_position": torch.tensor([0])}
    with pytest.raises(AdapterError, match="outside the exported graph"):
        module.export(**step, strict=False)
    # strict export (dynamo) wraps it in its own Unsupported error, our message included
    with pytest.raises(Exception, match="outside the exported graph"):  # noqa: PT011
        module.export(**step)


def test_export_inside_disable_adapter_exports_the_base_model():
    model = _adapted()
    module = _executorch_module(model)
    with disable_adapter(model):
        program = module.export(input_ids=IDS[:1, :1], cache_position=torch.tensor([0]))
        steps = [program.module()(input_ids=IDS[:1, i:i + 1], cache_position=torch.tensor([i]))
                 for i in range(IDS.shape[1])]
        with torch.no_grad():
            full = model(IDS[:1], use_cache=False).logits
    assert (torch.cat(steps, 1) - full).abs().max() < 1e-5
