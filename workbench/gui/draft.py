"""The experiment being built in the GUI, as plain data (no Qt): a spec the way TOML holds it.

The form edits this; :meth:`SpecDraft.build` validates it with the CLI's own parser, so the GUI
accepts exactly what ``workbench run`` accepts and reports the same one-line errors. Keys the form has
no widget for (``seed``, a workload's ``temperature``...) are kept as they were loaded and saved back.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.core.errors import ModelSourceError, SpecError
from workbench.spec.parse import Spec, parse_spec
from workbench.spec.writer import spec_to_toml, update_toml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["DEMO_MODEL", "SpecDraft", "is_suggested_name", "suggested_name", "unique_name"]

DEMO_MODEL = "demo:smollm2-135m"


def unique_name(base: str, taken: list[str] | set[str]) -> str:
    """``base``, else ``base-2``, ``base-3``... whichever is not taken."""
    if base not in taken:
        return base
    stem = base.rsplit("-", 1)[0] if base.rsplit("-", 1)[-1].isdigit() else base
    n = 2
    while f"{stem}-{n}" in taken:
        n += 1
    return f"{stem}-{n}"


def suggested_name(variant: dict[str, Any]) -> str:
    """A variant's name from what it is: its strategy, or for a quantization its precision
    (``int8-ort``, ``int4-weight-only``, ``q4_k_m-llama``), never a bare "variant"."""
    strategy = str(variant.get("strategy") or "baseline")
    if strategy == "onnxruntime-genai":
        return f"{variant.get('precision', 'int4')}-ort"
    if strategy == "quantized":
        method = str(variant.get("method", "auto"))
        return "quantized" if method == "auto" else method
    if strategy == "llama-cpp":
        gguf_type = str(variant.get("gguf_type", "as-is"))
        return "llama-cpp" if gguf_type == "as-is" else f"{gguf_type.lower()}-llama"
    return strategy.rsplit(":", 1)[-1].rsplit(".", 1)[-1] or "baseline"  # an import path: its last part


def is_suggested_name(name: str, variant: dict[str, Any]) -> bool:
    """Whether ``name`` is :func:`suggested_name` of ``variant`` (with or without a ``-2`` suffix): a
    name the builder chose, which follows the variant when its strategy changes."""
    base = suggested_name(variant)
    stem, _, n = name.rpartition("-")
    return name == base or (stem == base and n.isdigit())


@dataclass
class SpecDraft:
    #: top-level keys (name, repetitions, warmup, seed...)
    top: dict[str, Any] = field(default_factory=dict)
    #: ``[[variants]]`` tables as written
    variants: list[dict[str, Any]] = field(default_factory=list)
    #: ``[[workloads]]`` tables as written
    workloads: list[dict[str, Any]] = field(default_factory=list)
    #: the folder relative paths (workload files, model folders) are taken from
    base_dir: Path = field(default_factory=Path.cwd)
    #: the file it was opened from or last saved to
    path: Path | None = None
    #: that file's text: saving edits it in place, so the user's comments and layout survive
    source_text: str | None = None

    @classmethod
    def new(cls) -> SpecDraft:
        """A sensible first experiment, a comparison from the start: the demo model's baseline against
        prompt lookup on the same model (no second model to fetch), on two small workloads."""
        return cls(
            top={"name": "my experiment", "repetitions": 3, "warmup": 1},
            variants=[
                {"name": "baseline", "model": DEMO_MODEL, "strategy": "baseline"},
                {"name": "prompt-lookup", "model": DEMO_MODEL, "strategy": "prompt-lookup"},
            ],
            workloads=[{"name": "chat"}, {"name": "code"}],
        )

    @classmethod
    def from_text(cls, text: str, *, path: Path | None = None, base_dir: Path | None = None) -> SpecDraft:
        """Read spec TOML (not yet validated: a spec with a mistake can be opened and fixed)."""
        where = str(path) if path else "spec"
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SpecError(f"{where}: invalid TOML: {exc}") from None
        variants = data.pop("variants", [])
        workloads = data.pop("workloads", [])
        for key, tables in (("variants", variants), ("workloads", workloads)):
            if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
                raise SpecError(f"{where}: '{key}' must be [[{key}]] tables")
        if base_dir is None:
            base_dir = path.parent if path else Path.cwd()
        return cls(
            top=data, variants=variants, workloads=workloads, base_dir=base_dir, path=path, source_text=text
        )

    @classmethod
    def load(cls, path: Path) -> SpecDraft:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SpecError(f"spec file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"cannot read spec file {path}: {exc}") from None
        return cls.from_text(text, path=path.resolve())

    def copy(self) -> SpecDraft:
        return copy.deepcopy(self)

    # -- as a spec -------------------------------------------------------------------------------

    def to_data(self) -> dict[str, Any]:
        return {**self.top, "variants": self.variants, "workloads": self.workloads}

    def to_toml(self) -> str:
        """The spec as TOML: the opened file's text updated in place when there is one."""
        if self.source_text is not None:
            return update_toml(self.source_text, self.to_data())
        return spec_to_toml(self.to_data())

    def build(self) -> Spec:
        """Validate with the CLI's parser; raises the same one-line :class:`SpecError`."""
        return parse_spec(self.to_toml(), base_dir=self.base_dir, path=self.path)

    def save(self, path: Path) -> None:
        path = path.resolve()
        if path.parent != self.base_dir.resolve():
            self._absolute_paths()
        text = self.to_toml()
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"cannot write {path}: {exc.strerror or exc}") from None
        self.path, self.base_dir, self.source_text = path, path.parent, text

    def _absolute_paths(self) -> None:
        """Relative paths are relative to the spec's folder: moving the spec makes them absolute."""
        from workbench.sources import parse_source

        def absolute(value: str) -> str:
            p = Path(value).expanduser()
            return str((self.base_dir / p).resolve()) if not p.is_absolute() else value

        for w in self.workloads:
            if isinstance(w.get("file"), str):
                w["file"] = absolute(w["file"])
        for v in self.variants:
            for key, value in v.items():
                if key in ("name", "strategy", "dtype", "device") or not isinstance(value, str):
                    continue
                try:
                    source = parse_source(value, base_dir=self.base_dir)
                except ModelSourceError:
                    continue
                if source.path is not None:
                    v[key] = str(source.path)

    # -- editing helpers ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return str(self.top.get("name") or (self.path.stem if self.path else "experiment"))

    def variant_names(self) -> list[str]:
        return [str(v.get("name", "")) for v in self.variants]

    def workload_names(self) -> list[str]:
        return [str(w.get("name", "")) for w in self.workloads]

    def add_variant(self, variant: dict[str, Any] | None = None) -> dict[str, Any]:
        """Append ``variant`` (default: the baseline strategy on the last variant's model, else the demo
        model) under a name not taken yet: its own, else one from its strategy."""
        if variant:
            base = dict(variant)
        else:
            model = next((v["model"] for v in reversed(self.variants) if v.get("model")), DEMO_MODEL)
            base = {"model": model, "strategy": "baseline"}
        base["name"] = unique_name(str(base.get("name") or suggested_name(base)), self.variant_names())
        self.variants.append(base)
        return base

    def duplicate_variant(self, index: int) -> dict[str, Any]:
        return self.add_variant(copy.deepcopy(self.variants[index]))

    def set_builtin_workload(self, name: str, on: bool, defaults: dict[str, Any] | None = None) -> None:
        """Tick or untick a built-in workload (a table with just its name and common overrides)."""
        present = [
            w for w in self.workloads if w.get("name") == name and "file" not in w and "prompts" not in w
        ]
        if on and not present:
            self.workloads.append({"name": name, **(defaults or {})})
        elif not on:
            self.workloads = [w for w in self.workloads if not any(w is p for p in present)]

    def common_workload_value(self, key: str) -> Any:
        """The value of ``key`` when every workload (that can take it) has the same one, else None."""
        tables = self._takes(key)
        values = {repr(w.get(key)) for w in tables}
        return tables[0].get(key) if tables and len(values) == 1 else None

    def set_common_workload_value(self, key: str, value: Any) -> None:
        """Set (or, with ``None``, remove) ``key`` on every workload that can take it."""
        for w in self._takes(key):
            if value is None:
                w.pop(key, None)
            else:
                w[key] = value

    def _takes(self, key: str) -> list[dict[str, Any]]:
        # the output sweep sets its lengths with output_tokens, not max_new_tokens
        if key == "max_new_tokens":
            return [
                w for w in self.workloads if w.get("name") != "sweep-output" or "file" in w or "prompts" in w
            ]
        return list(self.workloads)
