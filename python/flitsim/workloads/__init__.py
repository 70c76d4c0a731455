"""Workloads: request distributions, traces, tokenizer-aware token counting, DiT requests.

- LLM: :func:`llmperf_workload` (LLMPerf-style synthetic, closed or open loop),
  :func:`load_trace` (CSV replay; ``"azure-conv-2023"`` is shipped), :func:`length_summary`,
  :func:`compare_length_distributions`; all produce / take :class:`LlmWorkload`.
- Tokenizers: :func:`token_lengths`, :func:`chars_per_token`, :func:`tokenizer_ratio`,
  :func:`convert_workload`, :func:`convert_tokens_per_s`, :func:`token_length_summary`.
- DiT: :class:`DitWorkload`, :func:`dit_workload`.
"""

from flitsim.workloads.dit import DitWorkload, dit_workload
from flitsim.workloads.llm import (
    LLMPerfSpec,
    LlmWorkload,
    arrival_times_s,
    llmperf_workload,
    sample_positive_int_lengths,
)
from flitsim.workloads.tokens import (
    TokenizerRatio,
    chars_per_token,
    convert_tokens_per_s,
    convert_workload,
    load_tokenizer,
    token_length_summary,
    token_lengths,
    tokenizer_ratio,
)
from flitsim.workloads.trace import (
    SUMMARY_STATS,
    TRACES,
    compare_length_distributions,
    length_summary,
    load_trace,
    trace_path,
)

__all__ = [
    "DitWorkload", "dit_workload", "LLMPerfSpec", "LlmWorkload", "arrival_times_s", "llmperf_workload",
    "sample_positive_int_lengths", "TokenizerRatio", "chars_per_token", "convert_tokens_per_s",
    "convert_workload", "load_tokenizer", "token_length_summary", "token_lengths", "tokenizer_ratio",
    "SUMMARY_STATS", "TRACES", "compare_length_distributions", "length_summary", "load_trace", "trace_path",
]
