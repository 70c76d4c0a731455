//! The crate's error type. Every user-facing failure is one of these; the
//! bindings map `Config` to `flitsim.ConfigError` (a `ValueError`), `Stalled` to
//! `flitsim.StalledError` (a `RuntimeError`) and `Interrupted` to
//! `KeyboardInterrupt`. Nothing in the crate panics on user input.

use thiserror::Error;

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, FlitsimError>;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum FlitsimError {
    /// A configuration value is out of range or inconsistent.
    #[error("{field} = {value}: {allowed}")]
    Config {
        /// Dotted path of the offending field, e.g. `serdes.fec.k`.
        field: String,
        /// The value the user gave, rendered as text.
        value: String,
        /// What is allowed instead.
        allowed: String,
    },
    /// The simulation made no progress while work was pending.
    #[error("simulation stalled at t = {time_ps} ps: {detail}")]
    Stalled { time_ps: u64, detail: String },
    /// The run was interrupted (Ctrl-C or a cancellation callback).
    #[error("interrupted at t = {time_ps} ps")]
    Interrupted { time_ps: u64 },
    /// Internal: a speed lever met a case its exactness argument does not
    /// cover, and the caller repeats the run without it
    /// ([`crate::taskgraph::execute_on_fabric`]); not shown to users.
    #[error("run to be repeated at t = {time_ps} ps: {detail}")]
    Retry { time_ps: u64, detail: String },
}

impl FlitsimError {
    /// Shorthand for a [`FlitsimError::Config`].
    pub fn config(field: impl Into<String>, value: impl ToString, allowed: impl Into<String>) -> Self {
        FlitsimError::Config { field: field.into(), value: value.to_string(), allowed: allowed.into() }
    }
}

/// A vector of `n` copies of `value`, or a `Config` error naming `what` when
/// the memory cannot be had: allocation failure aborts the process (no unwind,
/// nothing for Python to catch), so inputs that size tables go through here.
pub fn try_vec<T: Clone>(n: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        FlitsimError::config(what, format!("{n} entries of {} bytes", std::mem::size_of::<T>()), "a size this machine can allocate")
    })?;
    v.resize(n, value);
    Ok(v)
}

/// Return a config error unless `cond` holds.
pub(crate) fn ensure(cond: bool, field: &str, value: impl ToString, allowed: &str) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(FlitsimError::config(field, value, allowed))
    }
}
