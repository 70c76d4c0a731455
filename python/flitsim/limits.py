"""Bounds on inputs, in one place: what the engine can represent and what can
be simulated in reasonable time. Inputs beyond them are refused with a
ConfigError naming the input and the limit, before anything is allocated or
simulated (the Rust engine checks the same bounds again)."""

MAX_DEVICES = 1 << 20
"""Most GPUs / devices of a fabric or task graph (``MAX_ENDPOINTS`` in
rust/src/fabric/spec.rs; the largest scale-up domain built is 576 GPUs)."""

MAX_TIME_PS = 2**63 - 1
"""Latest simulated time (``engine::MAX_TIME_PS``, ~106 days): every time fits
int64 without going negative."""

MAX_TASKS = 1 << 23
"""Most tasks one task graph may hold (~8.4 M; each costs ~0.5 KB while the
graph is built in Python, and each is at least one engine event)."""

MAX_SEQ_TOKENS = 1 << 24
"""Longest sequence a schedule lowers (16 Mi tokens; the longest published
context windows are ~10 M tokens, Llama 4 Scout)."""

MAX_PARALLEL_DEGREE = 4096
"""Largest tensor / sequence parallel degree (far above any scale-up domain)."""
