//! Scenario 7: order and visibility. A host function enqueued after an async device-to-host
//! copy sees the copied data; work enqueued after a host function does not start before the
//! host function returns.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering, fence};
use std::time::Duration;

use super::{user_data, wait_for};
use crate::binding::Binding;
use crate::check::{Checker, Failure, Hex, Mismatches, Ran, wrong_expectations};
use crate::resources::{Context, DeviceBuffer, Event, PinnedBuffer, Stream};

/// Bytes copied in the visibility half.
pub const COPY_BYTES: usize = 1 << 20;
/// The byte the device buffer is set to.
pub const PATTERN: u8 = 0x5a;

/// What the inspecting host function saw.
#[derive(Debug)]
struct Inspect {
    slot: *const u8,
    len: usize,
    calls: AtomicU32,
    differing: AtomicUsize,
    first: AtomicU32,
}

/// Counts the bytes of the host slot that are not [`PATTERN`].
///
/// # Safety
/// `data` must point at a live [`Inspect`] whose slot holds `len` bytes.
unsafe extern "C" fn inspect(data: *mut c_void) {
    // SAFETY: the caller passes a live `Inspect`; the copy into the slot completed before this
    // host function started, and nothing else writes the slot now.
    let (state, bytes) = unsafe {
        let state = &*data.cast::<Inspect>();
        (state, std::slice::from_raw_parts(state.slot, state.len))
    };
    let differing = bytes.iter().filter(|&&b| b != PATTERN).count();
    state.differing.store(differing, Ordering::SeqCst);
    state.first.store(
        bytes.first().map_or(u32::MAX, |&b| u32::from(b)),
        Ordering::SeqCst,
    );
    state.calls.fetch_add(1, Ordering::SeqCst);
}

/// What the visibility half saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopySeen {
    /// Host-function calls.
    pub calls: u32,
    /// Bytes of the slot the host function found different from [`PATTERN`].
    pub differing: usize,
    /// The first byte it read.
    pub first: u32,
}

/// The contract: one call, every byte copied.
pub fn copy_expected() -> CopySeen {
    CopySeen {
        calls: 1,
        differing: 0,
        first: u32::from(PATTERN),
    }
}

/// Sets a device buffer to [`PATTERN`], copies it asynchronously into a zeroed page-locked
/// slot, then enqueues the inspecting host function, all on one stream.
pub fn observe_copy<B: Binding>() -> Result<CopySeen, Failure> {
    let _ctx = Context::<B>::enter(0)?;
    let slot = PinnedBuffer::<B>::new(COPY_BYTES)?;
    let buffer = DeviceBuffer::<B>::new(COPY_BYTES)?;
    let state = Inspect {
        slot: slot.as_ptr().cast_const().cast(),
        len: slot.len(),
        calls: AtomicU32::new(0),
        differing: AtomicUsize::new(0),
        first: AtomicU32::new(u32::MAX),
    };
    let stream = Stream::<B>::new()?;
    // SAFETY: the buffers and `state` outlive the stream, whose drop waits for its work.
    unsafe {
        stream.memset(&buffer, PATTERN)?;
        stream.copy_to_host(&slot, &buffer)?;
        stream.launch_host_func(inspect, user_data(&state))?;
    }
    stream.sync()?;
    Ok(CopySeen {
        calls: state.calls.load(Ordering::SeqCst),
        differing: state.differing.load(Ordering::SeqCst),
        first: state.first.load(Ordering::SeqCst),
    })
}

/// The visibility half's check.
pub fn check_copy(expected: &CopySeen, seen: &CopySeen) -> Result<(), Mismatches> {
    let mut c = Checker::new();
    c.eq("host-function calls", expected.calls, seen.calls);
    c.eq(
        format!("bytes of the {COPY_BYTES}-byte copy the host function found unlike {PATTERN:#x}"),
        expected.differing,
        seen.differing,
    );
    c.eq(
        "first byte the host function read",
        expected.first,
        seen.first,
    );
    c.finish()
}

/// The trial of the visibility half.
pub fn copy_visible<B: Binding>() -> Result<Ran, Failure> {
    let seen = observe_copy::<B>()?;
    let mut want = copy_expected();
    if wrong_expectations() {
        want.differing = 1;
    }
    check_copy(&want, &seen)?;
    Ok(Ran::Passed)
}

/// The value the gated host function writes into the flag just before it returns.
pub const MAGIC: u32 = 0xc0ff_ee01;
/// The result slot's value before any copy reached it.
pub const SENTINEL: u32 = 0xffff_ffff;
/// How long the host function waits for the test thread to open its gate.
pub const GATE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the host function still sleeps after the gate opened, before writing the flag.
pub const HOLD: Duration = Duration::from_millis(50);
/// How long the test thread watches the held stream.
pub const WATCH: Duration = Duration::from_millis(20);

/// The gated host function's state.
#[derive(Debug)]
struct Gate {
    open: AtomicBool,
    timed_out: AtomicBool,
    calls: AtomicU32,
    flag: *mut u32,
}

/// Waits for the test thread to open the gate (bounded), sleeps [`HOLD`], then writes
/// [`MAGIC`] into the page-locked flag and returns.
///
/// # Safety
/// `data` must point at a live [`Gate`] whose flag is live.
unsafe extern "C" fn gated(data: *mut c_void) {
    // SAFETY: the caller passes a live `Gate`.
    let gate = unsafe { &*data.cast::<Gate>() };
    if wait_for(GATE_TIMEOUT, || gate.open.load(Ordering::SeqCst)).is_none() {
        gate.timed_out.store(true, Ordering::SeqCst);
    }
    std::thread::sleep(HOLD);
    // SAFETY: the flag is live; the copy that reads it is ordered after this function.
    unsafe { gate.flag.write_volatile(MAGIC) };
    fence(Ordering::SeqCst);
    gate.calls.fetch_add(1, Ordering::SeqCst);
}

/// Opens the gate when dropped, so that an early return never leaves the host function
/// waiting out its timeout.
struct Opener<'a>(&'a Gate);

impl Opener<'_> {
    fn open(&self) {
        self.0.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Opener<'_> {
    fn drop(&mut self) {
        self.open();
    }
}

/// What the ordering half saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderSeen {
    /// Whether the event after the later work had completed, at once and after [`WATCH`],
    /// while the host function was held.
    pub later_work_done_while_held: [bool; 2],
    /// The result slot while the host function was held.
    pub result_while_held: u32,
    /// Host-function returns while it was held.
    pub returns_while_held: u32,
    /// The result slot after synchronising.
    pub result_after: u32,
    /// Host-function returns in all.
    pub returns: u32,
    /// Whether the host function gave up waiting for its gate.
    pub gate_timed_out: bool,
}

/// The contract.
pub fn order_expected() -> OrderSeen {
    OrderSeen {
        later_work_done_while_held: [false, false],
        result_while_held: SENTINEL,
        returns_while_held: 0,
        result_after: MAGIC,
        returns: 1,
        gate_timed_out: false,
    }
}

/// Enqueues the gated host function, then (later work) a copy of its flag to the device and
/// back into a result slot, and an event. While the host function is held, the event must not
/// complete and the result slot must keep [`SENTINEL`]; after it returns, the slot must hold
/// [`MAGIC`], which the host function wrote just before returning.
pub fn observe_order<B: Binding>() -> Result<OrderSeen, Failure> {
    let _ctx = Context::<B>::enter(0)?;
    let flag = PinnedBuffer::<B>::new(4)?;
    let result = PinnedBuffer::<B>::new(4)?;
    result.write_u32(SENTINEL);
    let buffer = DeviceBuffer::<B>::new(4)?;
    let gate = Gate {
        open: AtomicBool::new(false),
        timed_out: AtomicBool::new(false),
        calls: AtomicU32::new(0),
        flag: flag.as_ptr().cast(),
    };
    let event = Event::<B>::new()?;
    let stream = Stream::<B>::new()?;
    let opener = Opener(&gate);
    // SAFETY: the buffers and `gate` outlive the stream, whose drop waits for its work; the
    // opener (dropped before the stream) releases the host function on every path.
    unsafe {
        stream.launch_host_func(gated, user_data(&gate))?;
        stream.copy_to_device(&buffer, &flag)?;
        stream.copy_to_host(&result, &buffer)?;
    }
    stream.record(&event)?;
    let at_once = event.is_complete()?;
    std::thread::sleep(WATCH);
    let later = event.is_complete()?;
    let result_while_held = result.read_u32();
    let returns_while_held = gate.calls.load(Ordering::SeqCst);
    opener.open();
    stream.sync()?;
    Ok(OrderSeen {
        later_work_done_while_held: [at_once, later],
        result_while_held,
        returns_while_held,
        result_after: result.read_u32(),
        returns: gate.calls.load(Ordering::SeqCst),
        gate_timed_out: gate.timed_out.load(Ordering::SeqCst),
    })
}

/// The ordering half's check.
pub fn check_order(expected: &OrderSeen, seen: &OrderSeen) -> Result<(), Mismatches> {
    let mut c = Checker::new();
    c.eq(
        format!("later work completed while the host function was held (at once, after {WATCH:?})"),
        expected.later_work_done_while_held,
        seen.later_work_done_while_held,
    );
    c.eq(
        "result slot while the host function was held (SENTINEL: later copies not started)",
        Hex(expected.result_while_held),
        Hex(seen.result_while_held),
    );
    c.eq(
        "host-function returns while it was held",
        expected.returns_while_held,
        seen.returns_while_held,
    );
    c.eq(
        "result slot after sync (MAGIC: the copy read the flag after the host function wrote it)",
        Hex(expected.result_after),
        Hex(seen.result_after),
    );
    c.eq("host-function returns", expected.returns, seen.returns);
    c.eq(
        format!("host function gave up waiting {GATE_TIMEOUT:?} for its gate"),
        expected.gate_timed_out,
        seen.gate_timed_out,
    );
    c.finish()
}

/// The trial of the ordering half.
pub fn later_work_waits<B: Binding>() -> Result<Ran, Failure> {
    let seen = observe_order::<B>()?;
    let mut want = order_expected();
    if wrong_expectations() {
        // As if the copies had run before the host function returned.
        want.result_after = 0;
    }
    check_order(&want, &seen)?;
    Ok(Ran::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contracts_pass_themselves() {
        assert_eq!(check_copy(&copy_expected(), &copy_expected()), Ok(()));
        assert_eq!(check_order(&order_expected(), &order_expected()), Ok(()));
    }

    #[test]
    fn a_host_function_that_ran_before_the_copy_is_reported() {
        let seen = CopySeen {
            calls: 1,
            differing: COPY_BYTES,
            first: 0,
        };
        assert_eq!(
            check_copy(&copy_expected(), &seen).unwrap_err().to_string(),
            "bytes of the 1048576-byte copy the host function found unlike 0x5a: expected 0, \
             seen 1048576; first byte the host function read: expected 90, seen 0"
        );
    }

    #[test]
    fn later_work_that_started_early_is_reported() {
        let seen = OrderSeen {
            later_work_done_while_held: [false, true],
            result_while_held: 0,
            returns_while_held: 0,
            result_after: 0,
            returns: 1,
            gate_timed_out: false,
        };
        let text = check_order(&order_expected(), &seen)
            .unwrap_err()
            .to_string();
        assert_eq!(
            text,
            "later work completed while the host function was held (at once, after 20ms): \
             expected [false, false], seen [false, true]; result slot while the host function \
             was held (SENTINEL: later copies not started): expected 0xffffffff, seen \
             0x00000000; result slot after sync (MAGIC: the copy read the flag after the host \
             function wrote it): expected 0xc0ffee01, seen 0x00000000"
        );
    }

    #[test]
    fn inspect_counts_differing_bytes() {
        let bytes = [PATTERN, PATTERN, 0, PATTERN];
        let state = Inspect {
            slot: bytes.as_ptr(),
            len: bytes.len(),
            calls: AtomicU32::new(0),
            differing: AtomicUsize::new(0),
            first: AtomicU32::new(u32::MAX),
        };
        // SAFETY: `state` and its bytes are live.
        unsafe { inspect(user_data(&state)) };
        assert_eq!(state.differing.load(Ordering::SeqCst), 1);
        assert_eq!(state.first.load(Ordering::SeqCst), u32::from(PATTERN));
    }
}
