"""``model.save_pretrained(d, push_to_hub=True)`` of an adapted model uploads the adapter
checkpoint too.

transformers uploads the folder's new files at the end of its own ``save_pretrained``; the
adapted model's ``save_pretrained`` wrote ``hrm_adapter.safetensors`` / ``hrm_config.json``
only after that, so they stayed local and the hub repository lacked them (``load_adapter`` of a
download found no adapter checkpoint). They are now written just before the upload. The hub is
replaced by fakes that record what would be uploaded (no network).
"""

from __future__ import annotations

import os
import types

import pytest
import torch

from adapters import HRMConfig, inject, load_adapter
from adapters.io import CONFIG_NAME, WEIGHTS_NAME
from tests.adapters._tiny import tiny_causal_lm

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")
modeling_utils = pytest.importorskip("transformers.modeling_utils", reason="extra 'hf' missing")
hub = pytest.importorskip("transformers.utils.hub", reason="extra 'hf' not installed")


@pytest.fixture
def uploads(monkeypatch):
    """The files each upload would send, by repository."""
    sent: dict[str, list[str]] = {}

    class _Card:
        def save(self, path):
            with open(path, "w") as f:
                f.write("card\n")

    def upload(self, working_dir, repo_id, files_timestamps, **kwargs):
        sent[repo_id] = sorted(
            f for f in os.listdir(working_dir)
            if f not in files_timestamps
            or os.path.getmtime(os.path.join(working_dir, f)) > files_timestamps[f])

    api = types.SimpleNamespace(create_repo=lambda repo_id, **kw: types.SimpleNamespace(
        repo_id=repo_id))
    for module in (modeling_utils, hub):  # save_pretrained(push_to_hub=True), push_to_hub
        monkeypatch.setattr(module, "hf_api", lambda: api)
        monkeypatch.setattr(module, "create_and_tag_model_card", lambda *a, **k: _Card())
    monkeypatch.setattr(transformers.PreTrainedModel, "_upload_modified_files", upload)
    return sent


def test_save_pretrained_with_push_to_hub_uploads_the_adapter_checkpoint(uploads, tmp_path):
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.5))
    model.save_pretrained(tmp_path / "repo", push_to_hub=True, repo_id="me/repo")
    assert {WEIGHTS_NAME, CONFIG_NAME, "model.safetensors"} <= set(uploads["me/repo"])
    # what was uploaded loads back
    ids = torch.tensor([[3, 14, 15, 9, 2, 6]])
    again = load_adapter(tiny_causal_lm("llama"), tmp_path / "repo")
    with torch.no_grad():
        assert torch.equal(again(ids).logits, model(ids).logits)
    assert "_upload_modified_files" not in model.__dict__  # nothing left on the instance


def test_push_to_hub_uploads_the_adapter_checkpoint(uploads):
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4))
    model.push_to_hub("me/other")  # saves into a temporary folder through save_pretrained
    assert {WEIGHTS_NAME, CONFIG_NAME} <= set(uploads["me/other"])
