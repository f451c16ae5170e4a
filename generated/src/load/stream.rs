//! The default-stream semantics (legacy or per-thread) that functions are resolved with,
//! chosen once per process.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

use super::PER_THREAD_ENV;
use crate::error::Error;

/// Which stream the NULL stream (stream 0) means in the functions resolved from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DefaultStream {
    /// The legacy default stream, which synchronises with every other blocking stream.
    Legacy,
    /// A default stream per host thread (`_ptsz`/`_ptds` variants, nvcc's
    /// `--default-stream per-thread`).
    PerThread,
}

impl fmt::Display for DefaultStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DefaultStream::Legacy => "legacy",
            DefaultStream::PerThread => "per-thread",
        })
    }
}

const UNSET: u8 = 0;
const LEGACY: u8 = 1;
const PER_THREAD: u8 = 2;
const MODE: u8 = 3;
/// Set once a function was resolved: the mode can no longer change.
const LOCKED: u8 = 4;

static STATE: AtomicU8 = AtomicU8::new(UNSET);

fn encode(mode: DefaultStream) -> u8 {
    match mode {
        DefaultStream::Legacy => LEGACY,
        DefaultStream::PerThread => PER_THREAD,
    }
}

fn decode(state: u8) -> DefaultStream {
    if state & MODE == PER_THREAD {
        DefaultStream::PerThread
    } else {
        DefaultStream::Legacy
    }
}

/// The mode from the environment: per-thread when `CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM=1`.
fn from_env() -> u8 {
    if std::env::var_os(PER_THREAD_ENV).is_some_and(|v| v == "1") {
        PER_THREAD
    } else {
        LEGACY
    }
}

/// Selects the default-stream semantics of every function resolved from now on.
///
/// Call it before the first CUDA call. It fails with [`Error::StreamModeLocked`] once a function
/// was resolved with the other mode, since the process would then mix both; choosing the mode
/// already in force always succeeds. It takes precedence over
/// `CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM`.
pub fn set_default_stream(mode: DefaultStream) -> Result<(), Error> {
    let wanted = encode(mode);
    let mut state = STATE.load(Ordering::Acquire);
    loop {
        if state & LOCKED != 0 {
            return if state & MODE == wanted {
                Ok(())
            } else {
                Err(Error::StreamModeLocked {
                    current: decode(state),
                })
            };
        }
        match STATE.compare_exchange_weak(state, wanted, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(()),
            Err(now) => state = now,
        }
    }
}

/// The default-stream semantics in force: the one set by [`set_default_stream`], else
/// [`DefaultStream::PerThread`] when `CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM=1` at first use, else
/// [`DefaultStream::Legacy`].
pub fn default_stream() -> DefaultStream {
    let state = STATE.load(Ordering::Acquire);
    if state & MODE != UNSET {
        return decode(state);
    }
    let mode = from_env();
    match STATE.compare_exchange(state, mode, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => decode(mode),
        Err(now) => decode(now),
    }
}

/// Fixes the mode (a function is about to be resolved with it) and returns it.
pub(super) fn lock() -> DefaultStream {
    let mut state = STATE.load(Ordering::Acquire);
    loop {
        if state & LOCKED != 0 {
            return decode(state);
        }
        let mode = if state & MODE == UNSET {
            from_env()
        } else {
            state & MODE
        };
        match STATE.compare_exchange_weak(state, mode | LOCKED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return decode(mode),
            Err(now) => state = now,
        }
    }
}
