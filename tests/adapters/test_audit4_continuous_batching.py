"""transformers' continuous batching is refused at its call, with a typed error.

Before: ``model.generate_batch(...)`` of an adapted model ran its paged-cache loop in a thread,
where the adapters' runtime raised ``AdapterError ... got PagedAttentionCache``; transformers
logged "Requests ['req_0', 'req_1'] failed during generation" and ``generate_batch`` returned
results with empty ``generated_tokens``: no exception reached the caller.
"""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, inject, remove
from adapters.exceptions import AdapterError
from tests.adapters._tiny import tiny_causal_lm

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")


def test_generate_batch_and_the_paged_cache_are_refused_until_remove():
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4))
    config = transformers.GenerationConfig(max_new_tokens=3, do_sample=False, eos_token_id=-1)
    with pytest.raises(AdapterError, match="continuous batching .* not supported"):
        model.generate_batch(inputs=[[3, 4, 5]], generation_config=config, progress_bar=False)
    with pytest.raises(AdapterError, match="continuous batching"):
        model.generate(torch.tensor([[3, 4, 5]]), cache_implementation="paged",
                       max_new_tokens=3, do_sample=False)
    remove(model)
    assert "init_continuous_batching" not in vars(model)
