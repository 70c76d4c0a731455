//! A cache hint: start loading the line of `slice[i]` so that a later access
//! finds it in the L1 cache. Used where the data path knows a little ahead
//! which entry of a large array it will touch (a queue's state: 250 KB of VOQ
//! state at 72 ports x 4 VCs x 72 outputs, beyond L1), so the misses of several
//! packets overlap instead of stalling one after another. A hint only: no
//! value is read or written and no result can change.

/// Prefetch the cache line holding `slice[i]` (nothing if `i` is out of
/// range, or on targets other than x86-64).
#[inline(always)]
pub(crate) fn prefetch<T>(slice: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = slice.get(i) {
        // SAFETY: `_mm_prefetch` only hints the cache: it never faults, reads
        // nothing into the program and writes nothing; the pointer is to a
        // live element. SSE is part of the x86-64 baseline.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(x as *const T as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slice, i);
}
