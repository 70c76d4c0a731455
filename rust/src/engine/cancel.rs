//! The process-wide cancel flag. Python runs Ctrl-C handlers on the main
//! thread only, so a simulation on a worker thread (ThreadPoolExecutor, Dask
//! threads) never sees `check_signals` fail; instead the bindings bump this
//! generation counter on SIGINT and every run polls it. A run is cancelled when
//! the generation moved after it started, so runs started afterwards are not.

use super::TimePs;
use crate::error::{FlitsimError, Result};
use std::sync::atomic::{AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Cancel every simulation running in this process, on any thread; each
/// stops within [`super::CHECK_EVERY_EVENTS`] events with `Interrupted`.
pub fn cancel_all() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// Snapshot of the cancel generation taken when a run starts.
#[derive(Debug, Clone, Copy)]
pub struct CancelToken(u64);

impl CancelToken {
    /// A token for a run starting now.
    pub fn new() -> Self {
        Self(GENERATION.load(Ordering::SeqCst))
    }

    /// True once [`cancel_all`] was called after this token was taken.
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        GENERATION.load(Ordering::Relaxed) != self.0
    }

    /// `Interrupted` at `now_ps` if cancelled.
    #[inline]
    pub fn check(&self, now_ps: TimePs) -> Result<()> {
        if self.is_cancelled() {
            Err(FlitsimError::Interrupted { time_ps: now_ps })
        } else {
            Ok(())
        }
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}
