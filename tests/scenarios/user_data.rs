//! Scenario 5, the user-data half of the project's invariant (a host function and its user data
//! reach CUDA unchanged): caller-owned user data. A pointer made from an integer, to storage
//! the caller owns, reaches the host function unchanged: the same address, and the bytes read
//! through it are the caller's current bytes (not a copy taken at launch).

use std::ffi::c_void;
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::lock;
use crate::binding::Binding;
use crate::check::{Checker, Failure, Mismatches, Ran, wrong_expectations};
use crate::resources::{Context, Stream};

/// The bytes before the caller changes them.
pub const FIRST: u64 = 0x0123_4567_89ab_cdef;
/// The bytes after.
pub const SECOND: u64 = 0xfedc_ba98_7654_3210;

/// The caller's storage: the value the host function reads, and where it records.
#[derive(Debug, Default)]
pub struct Owned {
    value: AtomicU64,
    seen: Mutex<Vec<(usize, [u8; 8])>>,
}

/// Records the address it got and the 8 bytes read through it.
///
/// # Safety
/// `data` must point at a live [`Owned`].
unsafe extern "C" fn read_through(data: *mut c_void) {
    // SAFETY: the caller passes a live `Owned`.
    let owned = unsafe { &*data.cast::<Owned>() };
    let bytes = owned.value.load(Ordering::SeqCst).to_ne_bytes();
    lock(&owned.seen).push((data.addr(), bytes));
}

/// What each call saw, and the address the caller passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The integer the caller turned into the user-data pointer.
    pub address: usize,
    /// Each call: (address it got, bytes it read).
    pub calls: Vec<(usize, [u8; 8])>,
}

/// Three calls, each with the caller's address: a stream launch and a graph launch with
/// [`FIRST`], then a graph launch after the caller wrote [`SECOND`].
pub fn expected(address: usize) -> Vec<(usize, [u8; 8])> {
    vec![
        (address, FIRST.to_ne_bytes()),
        (address, FIRST.to_ne_bytes()),
        (address, SECOND.to_ne_bytes()),
    ]
}

/// Launches `read_through` with the integer-made pointer on a stream, then in a captured graph
/// twice, changing the bytes between the two graph launches.
pub fn observe<B: Binding>() -> Result<Observation, Failure> {
    let _ctx = Context::<B>::enter(0)?;
    let owned = Box::new(Owned::default());
    owned.value.store(FIRST, Ordering::SeqCst);
    // The caller keeps the storage and hands CUDA an integer-sized pointer to it.
    let address: usize = ptr::from_ref::<Owned>(&*owned).expose_provenance();
    let data: *mut c_void = ptr::with_exposed_provenance_mut(address);
    let stream = Stream::<B>::new()?;
    // SAFETY (both launches): `owned` outlives the stream, whose drop waits for its work.
    unsafe { stream.launch_host_func(read_through, data) }?;
    stream.sync()?;
    let capture = stream.begin_capture()?;
    // SAFETY: as above.
    unsafe { stream.launch_host_func(read_through, data) }?;
    let graph = capture.end()?;
    let exec = graph.instantiate()?;
    exec.launch(&stream)?;
    stream.sync()?;
    owned.value.store(SECOND, Ordering::SeqCst);
    exec.launch(&stream)?;
    stream.sync()?;
    let calls = lock(&owned.seen).clone();
    Ok(Observation { address, calls })
}

/// Scenario 5's check.
pub fn check(expected: &[(usize, [u8; 8])], seen: &Observation) -> Result<(), Mismatches> {
    let mut c = Checker::new();
    c.eq("host function calls", expected.len(), seen.calls.len());
    for (i, (want, got)) in expected.iter().zip(&seen.calls).enumerate() {
        c.eq(
            format!("address the host function got, call {i}"),
            want.0,
            got.0,
        );
        c.eq(format!("bytes read through it, call {i}"), want.1, got.1);
    }
    c.finish()
}

/// The trial.
pub fn run<B: Binding>() -> Result<Ran, Failure> {
    let seen = observe::<B>()?;
    let mut want = expected(seen.address);
    if wrong_expectations() {
        // As if CUDA had copied the bytes at capture time.
        want[2].1 = FIRST.to_ne_bytes();
    }
    check(&want, &seen)?;
    Ok(Ran::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_passes_itself() {
        let seen = Observation {
            address: 0x1000,
            calls: expected(0x1000),
        };
        assert_eq!(check(&expected(0x1000), &seen), Ok(()));
    }

    #[test]
    fn a_changed_address_or_stale_bytes_are_reported() {
        let mut calls = expected(0x1000);
        calls[1].0 = 0x2000;
        calls[2].1 = FIRST.to_ne_bytes();
        let seen = Observation {
            address: 0x1000,
            calls,
        };
        let text = check(&expected(0x1000), &seen).unwrap_err().to_string();
        assert!(
            text.starts_with(
                "address the host function got, call 1: expected 4096, seen 8192; bytes read \
                 through it, call 2: expected ["
            ),
            "{text}"
        );
    }

    #[test]
    fn read_through_records_address_and_bytes() {
        let owned = Owned::default();
        owned.value.store(SECOND, Ordering::SeqCst);
        let data = super::super::user_data(&owned);
        // SAFETY: `owned` is live.
        unsafe { read_through(data) };
        assert_eq!(
            lock(&owned.seen).as_slice(),
            &[(data.addr(), SECOND.to_ne_bytes())]
        );
    }
}
