"""Configuration of the HRM adapters: one frozen dataclass, validated, JSON round-trip.

:class:`HRMConfig` says where the adapters go (``target_modules``, ``layers_to_skip``), which
stream drives them (``reads``) and how each diagonal SSM is built (``d_state``, ``mode``,
``dt_min``, ``dt_max``, ``scan``, ``init``, ``gate_init``). It is the ``"config"`` record of
the checkpoints written by :func:`adapters.save_adapter` (``hrm_adapter.safetensors`` and its
copy ``hrm_config.json``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from adapters.exceptions import AdapterConfigError
from adapters.layer import READS
from adapters.ssm import DT_MAX, DT_MIN, MODES, SCANS

__all__ = ["HRMConfig", "ADAPTER_TYPE", "FORMAT_VERSION"]

#: Identifies an HRM adapter config in JSON (the ``adapter_type`` key).
ADAPTER_TYPE = "HRM"
#: Version of the on-disk format (3: each gate is stored with shape (1,), as the parameter now
#: is; 2: our own file names, config in the safetensors header, base-model fingerprint, gate
#: 0-dim; 1: PEFT's file names, gate 0-dim). Versions 1 and 2 are still read.
FORMAT_VERSION = 3

_INITS = ("s4d",)
_DTYPES = ("float32", "float64")
_DTYPE_ALIASES = {"float32": "float32", "fp32": "float32", "float": "float32",
                  "float64": "float64", "fp64": "float64", "double": "float64"}
_HALF_NAMES = ("bfloat16", "bf16", "float16", "fp16", "half")


@dataclass(frozen=True)
class HRMConfig:
    """Where to put the gated SSM adapters and how to build them.

    Parameters
    ----------
    d_state : int, default 32
        State size N of each diagonal SSM (after :func:`adapters.reduce`, the recorded config
        holds the largest reduced layer's N; per-layer sizes live in the modules and in the
        saved checkpoint).
    target_modules : str or sequence of str or None, default None
        Which modules get an adapter. ``None`` finds the feed-forward of every decoder block
        (the block's ``mlp``, or else its ``feed_forward``, ``ffn``, ``block_sparse_moe`` or
        ``DenseReluDense`` (T5 encoders),
        where the block sits in an ``nn.ModuleList``; OPT's ``fc1``/``fc2`` pair; the language
        model's blocks only in a vision-language model). A string is a
        regular expression that must match the whole dotted module name
        (``re.fullmatch``); a list matches names exactly or as a dotted suffix
        (``"mlp"`` matches ``"model.layers.0.mlp"`` but not ``"model.layers.0.gate_mlp"``).
    gate_init : float, default 0.0
        Initial value of each scalar gate. ``0.0`` makes the adapted model equal the base
        model exactly at initialisation.
    dt_min, dt_max : float, default 1e-3, 1e-1
        Range of the log-uniform initial step sizes,
        ``1e-4 <= dt_min <= dt_max <= 0.1`` (the clamp of the SSM's step).
    mode : {"real", "complex"}, default "real"
        Real diagonal state matrix (S4D-real) or complex modes.
    scan : {"auto", "fft", "chunked"}, default "auto"
        Parallel scan used for sequences (prefill, training).
    reads : {"mlp_input", "mlp_output"}, default "mlp_input"
        Stream that drives the SSM: the MLP's (normalised) input, as in the published
        experiments, or the MLP's output, as in the paper's equation.
    layers_to_skip : sequence of int, default ()
        Block indices that get no adapter. A module's block index is the last purely numeric
        component of its dotted name (``"transformer.h.3.mlp"`` -> 3); negative indices count
        from the end of the matched blocks.
    init : {"s4d"}, default "s4d"
        Initialisation of the continuous state matrix.
    dtype : {"float32", "float64"} or torch.dtype, default "float32"
        Parameter dtype of the adapters, independent of the (possibly bf16) base model; the
        branch output is cast back to the MLP output dtype. Accepts ``torch.float32`` /
        ``torch.float64`` and the names ``"float32"``, ``"fp32"``, ``"float"``,
        ``"float64"``, ``"fp64"``, ``"double"`` (also with a ``"torch."`` prefix); stored as
        ``"float32"`` or ``"float64"``. Half precision (``torch.bfloat16``, ``"bf16"``,
        ``torch.float16``, ``"fp16"``, ...) is refused: the poles ``ā = exp(-Δλ)`` of slow modes
        round to 1 in bfloat16. For the same reason ``model.to(torch.bfloat16)`` keeps the
        adapters' dtype (see :class:`adapters.HRMAdapter`).
    d_model : int or None, default None
        Width H of the stream the adapters read. ``None`` infers it from
        ``model.config.hidden_size`` or, for plain modules, from the matched module's first
        (``mlp_input``) or last (``mlp_output``) linear layer.

    Raises
    ------
    AdapterConfigError
        A field has an invalid value; the message names the field and the value.

    Examples
    --------
    >>> cfg = HRMConfig(d_state=16, target_modules=["mlp"], layers_to_skip=(0,))
    >>> HRMConfig.from_json(cfg.to_json()) == cfg
    True
    """

    d_state: int = 32
    target_modules: str | tuple[str, ...] | None = None
    gate_init: float = 0.0
    dt_min: float = 1e-3
    dt_max: float = 1e-1
    mode: str = "real"
    scan: str = "auto"
    reads: str = "mlp_input"
    layers_to_skip: tuple[int, ...] = field(default_factory=tuple)
    init: str = "s4d"
    dtype: str = "float32"
    d_model: int | None = None

    def __post_init__(self) -> None:
        # Normalise sequences to tuples so the config is hashable and JSON round-trips.
        if isinstance(self.target_modules, (list, tuple)):
            object.__setattr__(self, "target_modules", tuple(self.target_modules))
        if isinstance(self.layers_to_skip, (list, tuple)):
            object.__setattr__(self, "layers_to_skip", tuple(self.layers_to_skip))
        object.__setattr__(self, "dtype", _dtype_name(self.dtype))
        self.validate()

    def validate(self) -> None:
        """Check every field; raise :class:`AdapterConfigError` naming the first bad one."""
        if isinstance(self.d_state, bool) or not isinstance(self.d_state, int) or self.d_state < 1:
            raise AdapterConfigError(f"`d_state` must be a positive int; got {self.d_state!r}")
        dm = self.d_model
        if dm is not None and (isinstance(dm, bool) or not isinstance(dm, int) or dm < 1):
            raise AdapterConfigError(f"`d_model` must be None or a positive int; got {dm!r}")
        tm = self.target_modules
        if tm is not None:
            if isinstance(tm, str):
                _check_regex(tm)
            elif isinstance(tm, tuple):
                if not tm:
                    raise AdapterConfigError(
                        "`target_modules` must be None, a regex string or a non-empty list of "
                        "names; got an empty list"
                    )
                bad = [t for t in tm if not isinstance(t, str) or not t or t != t.strip(".")]
                if bad:
                    raise AdapterConfigError(
                        "`target_modules` entries must be non-empty dotted names without "
                        f"leading/trailing dots; got {bad!r}"
                    )
            else:
                raise AdapterConfigError(
                    "`target_modules` must be None, a regex string or a list of names; "
                    f"got {type(tm).__name__} {tm!r}"
                )
        for name in ("gate_init", "dt_min", "dt_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise AdapterConfigError(f"`{name}` must be a real number; got {value!r}")
            if not math.isfinite(value):
                raise AdapterConfigError(f"`{name}` must be finite; got {value!r}")
        if not DT_MIN <= self.dt_min <= self.dt_max <= DT_MAX:
            raise AdapterConfigError(
                f"`dt_min` and `dt_max` must satisfy {DT_MIN} <= dt_min <= dt_max <= {DT_MAX}; "
                f"got dt_min={self.dt_min!r}, dt_max={self.dt_max!r}"
            )
        for name, allowed in (
            ("mode", MODES),
            ("scan", SCANS),
            ("reads", READS),
            ("init", _INITS),
            ("dtype", _DTYPES),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise AdapterConfigError(f"`{name}` must be one of {allowed}; got {value!r}")
        if not isinstance(self.layers_to_skip, tuple) or any(
            isinstance(i, bool) or not isinstance(i, int) for i in self.layers_to_skip
        ):
            raise AdapterConfigError(
                f"`layers_to_skip` must be a list of ints; got {self.layers_to_skip!r}"
            )
        if len(set(self.layers_to_skip)) != len(self.layers_to_skip):
            raise AdapterConfigError(
                f"`layers_to_skip` has duplicate entries; got {self.layers_to_skip!r}"
            )

    def ssm_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`adapters.ssm.DiagonalSSM` (besides the sizes).

        Returns
        -------
        dict
            ``mode``, ``dt_min``, ``dt_max``, ``scan`` and ``init``.
        """
        return {
            "mode": self.mode,
            "dt_min": float(self.dt_min),
            "dt_max": float(self.dt_max),
            "scan": self.scan,
            "init": self.init,
        }

    def replace(self, **changes: Any) -> HRMConfig:
        """Return a copy with some fields changed (validated again).

        Parameters
        ----------
        **changes
            New values of fields, by name.

        Returns
        -------
        HRMConfig
            A new config; ``self`` is unchanged.

        Raises
        ------
        AdapterConfigError
            A new value is invalid.
        TypeError
            A name is not a field.

        Examples
        --------
        >>> HRMConfig(d_state=8).replace(d_state=4).d_state
        4
        """
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: every field plus ``adapter_type`` and ``format_version``.

        Returns
        -------
        dict of str to Any
            Tuples become lists; :meth:`from_dict` inverts it.
        """
        out: dict[str, Any] = {"adapter_type": ADAPTER_TYPE, "format_version": FORMAT_VERSION}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HRMConfig:
        """Inverse of :meth:`to_dict`; unknown keys or a foreign ``adapter_type`` raise.

        Parameters
        ----------
        data : dict
            As written by :meth:`to_dict`; ``adapter_type`` and ``format_version`` optional.

        Raises
        ------
        AdapterConfigError
            Not a dict, unknown keys, another adapter type, a newer format, or a bad field.
        """
        if not isinstance(data, dict):
            raise AdapterConfigError(f"config data must be a dict; got {type(data).__name__}")
        data = dict(data)
        kind = data.pop("adapter_type", ADAPTER_TYPE)
        if kind != ADAPTER_TYPE:
            raise AdapterConfigError(f"`adapter_type` must be {ADAPTER_TYPE!r}; got {kind!r}")
        version = data.pop("format_version", FORMAT_VERSION)
        if not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
            raise AdapterConfigError(
                f"`format_version` must be an int in [1, {FORMAT_VERSION}]; got {version!r}"
            )
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise AdapterConfigError(
                f"unknown HRMConfig keys {unknown}; known keys {sorted(known)}"
            )
        return cls(**data)

    def to_json(self, *, indent: int | None = 2) -> str:
        """Serialise to a JSON string (see :meth:`to_dict`).

        Parameters
        ----------
        indent : int or None, optional
            Passed to :func:`json.dumps`; None writes one line. Keys are sorted.

        Returns
        -------
        str
            The JSON text; :meth:`from_json` inverts it.

        Examples
        --------
        >>> config = HRMConfig(d_state=8)
        >>> HRMConfig.from_json(config.to_json()) == config
        True
        """
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> HRMConfig:
        """Parse :meth:`to_json` output; malformed JSON raises :class:`AdapterConfigError`.

        Parameters
        ----------
        text : str
            JSON of an object as written by :meth:`to_json`.

        Returns
        -------
        HRMConfig

        Raises
        ------
        AdapterConfigError
            The text is not valid JSON, or the object fails :meth:`from_dict`.
        """
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, TypeError) as exc:
            raise AdapterConfigError(f"config JSON could not be parsed: {exc}") from exc
        return cls.from_dict(data)


def _dtype_name(dtype: Any) -> str:
    """Canonical name ("float32" / "float64") of a dtype given as torch.dtype or name.

    Raises :class:`AdapterConfigError` for half precision and anything unknown.
    """
    if isinstance(dtype, torch.dtype):
        key = str(dtype).removeprefix("torch.")
    elif isinstance(dtype, str):
        key = dtype.strip().lower().removeprefix("torch.")
    else:
        raise AdapterConfigError(
            f"`dtype` must be a torch.dtype or a name such as 'float32'; got "
            f"{type(dtype).__name__} {dtype!r}"
        )
    if key in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[key]
    if key in _HALF_NAMES:
        raise AdapterConfigError(
            f"`dtype` must be float32 or float64 (torch.float32 / 'fp32', torch.float64 / "
            f"'fp64'); got {dtype!r}: adapter parameters are not kept in half precision, "
            "because the poles exp(-dt * lambda) of slow modes round to 1 in bfloat16. The base "
            "model may be bfloat16/float16: the branch runs in the adapters' dtype and its "
            "output is cast to the model's"
        )
    raise AdapterConfigError(f"`dtype` must be one of {_DTYPES}; got {dtype!r}")


def _check_regex(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise AdapterConfigError(
            f"`target_modules` string must be a valid regular expression; got {pattern!r} ({exc})"
        ) from exc
