"""The paper's experiment harness: HRM adapters vs iso-parameter LoRA on a frozen backbone.

Run the main job with ``python -m benchmarks.hrm`` (from the repository root; ``--help`` lists
the options). It is built on the ``adapters`` library and is not part of it:

- :mod:`benchmarks.hrm.tasks` -- synthetic tasks (in-context DFA execution, parity), the
  character corpus and the shared vocabulary;
- :mod:`benchmarks.hrm.backbone` -- the frozen backbones (a tiny character GPT-2 pretrained
  and cached by the project, SmolLM2-135M);
- :mod:`benchmarks.hrm.train` -- the training loop and the metrics (accuracy, bits/char);
- :mod:`benchmarks.hrm.lora` -- the iso-parameter peft LoRA baseline;
- :mod:`benchmarks.hrm.presets` -- experiment sizes and the test-set seed;
- :mod:`benchmarks.hrm.experiment` -- the main job (``run_experiment``) and its results
  table;
- :mod:`benchmarks.hrm.__main__` -- the command line.

The real-LM study of issue 18 (SmolLM2-135M, frozen):

- :mod:`benchmarks.hrm.smollm` -- the model, the pydoc splits and windows, the exact cache of
  the hidden states entering the adapted blocks;
- :mod:`benchmarks.hrm.lm_study` -- four arms, dev-chosen learning rates, resumable cells,
  paired bootstrap (``python -m benchmarks.hrm.lm_study``); :mod:`benchmarks.hrm.lm_report`
  -- its tables;
- :mod:`benchmarks.hrm.lm_demo` -- the main job on SmolLM2 (``make demo``);
- :mod:`benchmarks.hrm.dfa_bayes` -- the exact Bayes ladder of the DFA task;
  :mod:`benchmarks.hrm.grid_stats` -- the committed tiny-backbone grid re-read with it.
"""
