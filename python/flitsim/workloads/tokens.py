"""Tokenizer-aware token counting with Hugging Face ``tokenizers``.

The same text is a different number of tokens under different tokenizers
(Llama-3's ~4.0 characters per token against Llama-2's ~3.2), so
a workload stated in tokens, and any tokens/s figure, is only meaningful with
its tokenizer. Conversion between tokenizers goes through characters: a corpus
measured under both gives characters per token (cpt) for each, and

    tokens_B = tokens_A x cpt_A / cpt_B,      (tokens/s)_B = (tokens/s)_A x cpt_A / cpt_B

(the same text per second). Token counts exclude special tokens (BOS/EOS), as
vLLM's benchmark counts output tokens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from flitsim.errors import config_error
from flitsim.workloads.llm import LlmWorkload

__all__ = ["load_tokenizer", "token_lengths", "chars_per_token", "TokenizerRatio", "tokenizer_ratio",
           "convert_workload", "convert_tokens_per_s", "token_length_summary"]


def load_tokenizer(tokenizer: Any) -> Any:
    """A ``tokenizers.Tokenizer`` from a ``tokenizer.json`` path (or a directory
    holding one), or the object itself. Reads from disk only.

    Raises:
        ConfigError: missing or unreadable file, or an object that is neither.
    """
    from tokenizers import Tokenizer

    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        p = os.fspath(tokenizer)
        if os.path.isdir(p):
            p = os.path.join(p, "tokenizer.json")
        if not os.path.isfile(p):
            raise config_error("tokenizer", os.fspath(tokenizer),
                               "an existing tokenizer.json file (or a directory with one), or a tokenizers.Tokenizer")
        try:
            return Tokenizer.from_file(p)
        except Exception as e:  # tokenizers raises a bare Exception on bad JSON
            raise config_error("tokenizer", p, f"a valid Hugging Face tokenizer.json ({e})") from None
    raise config_error("tokenizer", tokenizer, "a tokenizer.json path or a tokenizers.Tokenizer")


def _texts(corpus: Iterable[str]) -> list[str]:
    if isinstance(corpus, str):
        raise config_error("corpus", corpus[:40], "an iterable of strings (documents), not one string")
    texts = list(corpus)
    for t in texts:
        if not isinstance(t, str):
            raise config_error("corpus", t, "strings only")
    if not texts:
        raise config_error("corpus", [], "at least one document")
    return texts


def token_lengths(corpus: Iterable[str], tokenizer: Any) -> np.ndarray:
    """Tokens per document under ``tokenizer`` (special tokens excluded).

    Returns:
        int64 array of shape ``(len(corpus),)``.

    Raises:
        ConfigError: empty corpus, non-string documents, bad tokenizer.
    """
    tok = load_tokenizer(tokenizer)
    enc = tok.encode_batch(_texts(corpus), add_special_tokens=False)
    return np.array([len(e.ids) for e in enc], dtype=np.int64)


def chars_per_token(corpus: Iterable[str], tokenizer: Any) -> float:
    """Characters per token over the whole corpus: ``sum(len(doc)) / sum(tokens)``
    (a token-weighted ratio, so long documents count in proportion).

    Raises:
        ConfigError: as :func:`token_lengths`, or a corpus with no tokens.
    """
    texts = _texts(corpus)
    n = int(token_lengths(texts, tokenizer).sum())
    if n == 0:
        raise config_error("corpus", texts[:1], "text that produces at least one token")
    return sum(len(t) for t in texts) / n


@dataclass(frozen=True)
class TokenizerRatio:
    """Measured characters per token of two tokenizers on one corpus.

    Attributes:
        from_chars_per_token, to_chars_per_token: cpt of the source / target tokenizer.
        from_name, to_name: labels.
    """

    from_chars_per_token: float
    to_chars_per_token: float
    from_name: str = "from"
    to_name: str = "to"

    @property
    def tokens_factor(self) -> float:
        """Target tokens per source token: ``from_cpt / to_cpt``."""
        return self.from_chars_per_token / self.to_chars_per_token


def tokenizer_ratio(corpus: Iterable[str], from_tokenizer: Any, to_tokenizer: Any, *,
                    from_name: str = "from", to_name: str = "to") -> TokenizerRatio:
    """Measure both tokenizers' characters per token on ``corpus``.

    Raises:
        ConfigError: as :func:`chars_per_token`.
    """
    texts = _texts(corpus)
    return TokenizerRatio(chars_per_token(texts, from_tokenizer), chars_per_token(texts, to_tokenizer),
                          from_name, to_name)


def convert_workload(workload: LlmWorkload, ratio: TokenizerRatio) -> LlmWorkload:
    """Restate ``workload`` (counted by ``ratio.from_name``) in ``ratio.to_name``
    tokens: each nonzero length becomes ``max(1, round(tokens x from_cpt / to_cpt))``; 0 stays 0.

    Raises:
        ConfigError: if the workload's tokenizer label is not ``ratio.from_name``.
    """
    if workload.tokenizer != ratio.from_name:
        raise config_error("workload.tokenizer", workload.tokenizer, f"{ratio.from_name!r} (the ratio's source)")
    f = ratio.tokens_factor
    # A nonzero length stays >= 1 token; 0 stays 0 (not made up into 1).
    conv = [np.where(x == 0, 0, np.maximum(1, np.rint(x * f))).astype(np.int64)
            for x in (workload.requests[c].to_numpy() for c in ("input_tokens", "output_tokens"))]
    return workload.with_tokens(conv[0], conv[1], ratio.to_name)


def convert_tokens_per_s(tokens_per_s: float, ratio: TokenizerRatio) -> float:
    """A throughput counted in ``from`` tokens restated in ``to`` tokens (same
    text per second): ``tokens_per_s x from_cpt / to_cpt``. A tokenizer that packs
    more characters per token reports fewer tokens/s for the same work.

    Raises:
        ConfigError: negative throughput.
    """
    if tokens_per_s < 0:
        raise config_error("tokens_per_s", tokens_per_s, ">= 0")
    return tokens_per_s * ratio.tokens_factor


def token_length_summary(corpus: Iterable[str], tokenizers: dict[str, Any]) -> Any:
    """Per-tokenizer token-length distribution of ``corpus``: a DataFrame indexed
    by tokenizer label with ``count, mean, std, min, p25, p50, p75, p90, p95,
    p99, max`` of tokens per document and ``chars_per_token``.

    Raises:
        ConfigError: as :func:`token_lengths`.
    """
    import pandas as pd

    texts = _texts(corpus)
    chars = sum(len(t) for t in texts)
    rows = []
    for label, tok in tokenizers.items():
        x = token_lengths(texts, tok).astype(float)
        q = np.percentile(x, [25, 50, 75, 90, 95, 99])
        rows.append({"tokenizer": label, "count": len(x), "mean": x.mean(),
                     "std": x.std(ddof=1) if len(x) > 1 else np.nan, "min": x.min(),
                     **dict(zip(("p25", "p50", "p75", "p90", "p95", "p99"), q)), "max": x.max(),
                     "chars_per_token": chars / x.sum() if x.sum() else np.nan})
    return pd.DataFrame(rows).set_index("tokenizer")
