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
"""
