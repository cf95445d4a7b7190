"""One import shim for the PaddleNLP family's BERT: `paddleformers` or `paddlenlp`.

paddleformers 0.4.x (PaddleNLP's successor line; 1.0 dropped BERT) installs beside
paddlepaddle 3.3.1 and is the default; paddlenlp 2.8 / 3.0b imports only with pins
(aistudio-sdk 0.2.6, datasets 2.21.0, pyarrow 17.0.0). Both expose the same three names under
`<package>.transformers`, which is all the workload uses.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from ampbench.config import ConfigError
from ampbench.core.install import install_hint

Source = Literal["paddleformers", "paddlenlp"]
SOURCES: tuple[Source, ...] = ("paddleformers", "paddlenlp")
INSTALL_HINT = {
    "paddleformers": install_hint("bert"),
    "paddlenlp": "pip install paddlenlp==2.8.1 aistudio-sdk==0.2.6 datasets==2.21.0 pyarrow==17.0.0",
}


@dataclass(frozen=True)
class BertAPI:
    """The classes the workload needs, and where they came from (recorded in the trial)."""

    source: Source
    version: str
    config_cls: Any
    model_cls: Any
    tokenizer_cls: Any


def installed_sources() -> list[Source]:
    """Sources whose package is importable, without importing them (that costs seconds)."""
    return [s for s in SOURCES if importlib.util.find_spec(s) is not None]


def load_bert_api(source: Source = "paddleformers") -> BertAPI:
    """Import BertConfig / BertForSequenceClassification / BertTokenizer from `source`."""
    if source not in SOURCES:
        raise ConfigError("[workload]", "source", f"unknown {source!r}; use one of {', '.join(SOURCES)}")
    if importlib.util.find_spec(source) is None:
        others = [s for s in installed_sources() if s != source]
        alt = f", or set workload.source = {others[0]!r} (installed)" if others else ""
        raise ConfigError("[workload]", "source", f"{source} is not installed: {INSTALL_HINT[source]}{alt}")
    try:
        mod = importlib.import_module(f"{source}.transformers")
        api = BertAPI(
            source=source,
            version=_version(source),
            config_cls=mod.BertConfig,
            model_cls=mod.BertForSequenceClassification,
            tokenizer_cls=mod.BertTokenizer,
        )
    except (ImportError, AttributeError) as e:
        raise ConfigError(
            "[workload]", "source",
            f"{source} is installed but its BERT does not import ({type(e).__name__}: {e}); {INSTALL_HINT[source]}",
        ) from None
    return api


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"
