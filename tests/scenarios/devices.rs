//! Scenario 6: several devices. On every visible device, two graphs, each with its own stream,
//! device buffer (its value copied there before the host node) and host slot (copied back from
//! the buffer); every host function observes exactly its own value, and the set of calls is
//! exact. Written for any device count; with fewer than two devices it reports
//! why it did not run.

use std::ffi::c_void;
use std::sync::Mutex;

use super::{lock, user_data};
use crate::binding::Binding;
use crate::check::{Checker, During, Failure, Mismatches, Ran, wrong_expectations};
use crate::resources::{
    Context, DeviceBuffer, Exec, Graph, PinnedBuffer, Stream, note_cleanup_failure,
};

/// Graphs per device.
pub const GRAPHS_PER_DEVICE: usize = 2;

/// One host-function call: (device, graph, value it read from its host slot).
pub type Call = (usize, usize, u32);

/// The value of graph `graph` on device `device`: distinct for every pair (up to 2^20
/// devices).
pub fn value(device: usize, graph: usize) -> u32 {
    let device = u32::try_from(device & 0xf_ffff).unwrap_or(0);
    let graph = u32::try_from(graph & 0xff).unwrap_or(0);
    0xa000_0000 | (device << 8) | graph
}

/// Why the scenario cannot run with `devices` devices, if it cannot.
pub fn skip_reason(devices: usize) -> Option<String> {
    (devices < 2).then(|| {
        format!("needs 2 or more CUDA devices, {devices} visible: run it on a multi-GPU machine")
    })
}

/// Where the host functions record.
#[derive(Debug, Default)]
pub struct Log {
    calls: Mutex<Vec<Call>>,
}

/// The user data of one graph's host node.
#[derive(Debug)]
struct SlotInfo<'a> {
    log: &'a Log,
    device: usize,
    graph: usize,
    slot: *const u32,
}

/// Reads the host slot and records it with its device and graph.
///
/// # Safety
/// `data` must point at a live [`SlotInfo`] whose slot is live.
unsafe extern "C" fn read_slot(data: *mut c_void) {
    // SAFETY: the caller passes a live `SlotInfo`; the copy into the slot completed before
    // this host node started.
    let (info, value) = unsafe {
        let info = &*data.cast::<SlotInfo<'_>>();
        (info, info.slot.read_volatile())
    };
    lock(&info.log.calls).push((info.device, info.graph, value));
}

/// One graph with everything it uses; fields drop in this order (the stream waits first).
struct Lane<'a, B: Binding> {
    exec: Exec<B>,
    _graph: Graph<B>,
    stream: Stream<B>,
    _info: Box<SlotInfo<'a>>,
    _buffer: DeviceBuffer<B>,
    _src: PinnedBuffer<B>,
    _slot: PinnedBuffer<B>,
}

/// A device's lanes, dropped with the device current again.
struct DeviceLanes<'a, B: Binding> {
    lanes: Vec<Lane<'a, B>>,
    ctx: Context<B>,
}

impl<B: Binding> Drop for DeviceLanes<'_, B> {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.make_current() {
            note_cleanup_failure(&e);
        }
    }
}

/// Captures copy-to-device, copy-to-host and the host node into a graph of its own.
fn lane<'a, B: Binding>(log: &'a Log, device: usize, graph: usize) -> Result<Lane<'a, B>, Failure> {
    let slot = PinnedBuffer::<B>::new(4)?;
    let src = PinnedBuffer::<B>::new(4)?;
    src.write_u32(value(device, graph));
    let buffer = DeviceBuffer::<B>::new(4)?;
    let info = Box::new(SlotInfo {
        log,
        device,
        graph,
        slot: slot.as_ptr().cast_const().cast(),
    });
    let stream = Stream::<B>::new()?;
    let capture = stream.begin_capture()?;
    // SAFETY: the buffers and `info` end up in the lane after the stream, so they outlive its
    // work; on an early return the stream (declared last) drops first.
    unsafe {
        stream.copy_to_device(&buffer, &src)?;
        stream.copy_to_host(&slot, &buffer)?;
        stream.launch_host_func(read_slot, user_data(&*info))?;
    }
    let g = capture.end()?;
    let exec = g.instantiate()?;
    Ok(Lane {
        exec,
        _graph: g,
        stream,
        _info: info,
        _buffer: buffer,
        _src: src,
        _slot: slot,
    })
}

/// What the run saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// Devices used.
    pub devices: usize,
    /// Every call, sorted.
    pub calls: Vec<Call>,
}

/// The contract: one call per (device, graph), each with its own value.
pub fn expected(devices: usize) -> Vec<Call> {
    (0..devices)
        .flat_map(|d| (0..GRAPHS_PER_DEVICE).map(move |g| (d, g, value(d, g))))
        .collect()
}

/// Sets up every device's lanes, launches them all, then synchronises them all; `Ok(Err(why))`
/// when fewer than two devices are visible.
pub fn observe<B: Binding>() -> Result<Result<Observation, String>, Failure> {
    let count = B::device_count().during("count the devices")?;
    if let Some(reason) = skip_reason(count) {
        return Ok(Err(reason));
    }
    let log = Log::default();
    let mut devices: Vec<DeviceLanes<'_, B>> = Vec::with_capacity(count);
    for d in 0..count {
        let ctx = Context::<B>::enter(d)?;
        let lanes = (0..GRAPHS_PER_DEVICE)
            .map(|g| lane::<B>(&log, d, g))
            .collect::<Result<Vec<_>, _>>()?;
        devices.push(DeviceLanes { lanes, ctx });
    }
    for device in &devices {
        device.ctx.make_current()?;
        for lane in &device.lanes {
            lane.exec.launch(&lane.stream)?;
        }
    }
    for device in &devices {
        device.ctx.make_current()?;
        for lane in &device.lanes {
            lane.stream.sync()?;
        }
    }
    let mut calls = lock(&log.calls).clone();
    calls.sort_unstable();
    Ok(Ok(Observation {
        devices: count,
        calls,
    }))
}

fn show(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .map(|(d, g, v)| format!("device{d}/graph{g}={v:#010x}"))
        .collect()
}

/// Scenario 6's check: the calls as a multiset, missing and unexpected ones named.
pub fn check(expected: &[Call], seen: &Observation) -> Result<(), Mismatches> {
    let mut missing: Vec<Call> = expected.to_vec();
    let mut extra: Vec<Call> = Vec::new();
    for call in &seen.calls {
        match missing.iter().position(|m| m == call) {
            Some(i) => {
                missing.remove(i);
            }
            None => extra.push(*call),
        }
    }
    let mut c = Checker::new();
    c.eq(
        format!("host-function calls on {} devices", seen.devices),
        expected.len(),
        seen.calls.len(),
    );
    c.eq(
        "expected calls that did not happen",
        Vec::<String>::new(),
        show(&missing),
    );
    c.eq(
        "calls that were not expected (a wrong value, or repeated)",
        Vec::<String>::new(),
        show(&extra),
    );
    c.finish()
}

/// The trial.
pub fn run<B: Binding>() -> Result<Ran, Failure> {
    let seen = match observe::<B>()? {
        Ok(seen) => seen,
        Err(reason) => return Ok(Ran::Skipped(reason)),
    };
    let mut want = expected(seen.devices);
    if wrong_expectations() {
        // As if device 0's graphs had each other's values.
        want[0].2 = value(0, 1);
        want[1].2 = value(0, 0);
    }
    check(&want, &seen)?;
    // The figures a multi-device run reports: the devices seen and the calls on each.
    let per_device: Vec<String> = (0..seen.devices)
        .map(|d| {
            let n = seen.calls.iter().filter(|c| c.0 == d).count();
            format!("device {d}: {n} calls")
        })
        .collect();
    println!(
        "{}::{:?}::several_devices: {} devices; {}",
        B::TARGET,
        B::API,
        seen.devices,
        per_device.join(", ")
    );
    Ok(Ran::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_distinct() {
        let mut all: Vec<u32> = expected(64).iter().map(|c| c.2).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 64 * GRAPHS_PER_DEVICE);
    }

    #[test]
    fn one_device_is_a_reason_to_skip_two_are_not() {
        assert_eq!(
            skip_reason(1).as_deref(),
            Some("needs 2 or more CUDA devices, 1 visible: run it on a multi-GPU machine")
        );
        assert_eq!(skip_reason(2), None);
    }

    #[test]
    fn the_contract_passes_itself_in_any_order() {
        let mut calls = expected(3);
        calls.reverse();
        let seen = Observation { devices: 3, calls };
        assert_eq!(check(&expected(3), &seen), Ok(()));
    }

    #[test]
    fn swapped_values_and_a_lost_call_are_reported() {
        let mut calls = expected(2);
        calls[0].2 = value(0, 1);
        calls[1].2 = value(0, 0);
        calls.pop();
        let seen = Observation { devices: 2, calls };
        assert_eq!(
            check(&expected(2), &seen).unwrap_err().to_string(),
            "host-function calls on 2 devices: expected 4, seen 3; expected calls that did not \
             happen: expected [], seen [\"device0/graph0=0xa0000000\", \
             \"device0/graph1=0xa0000001\", \"device1/graph1=0xa0000101\"]; calls that were not \
             expected (a wrong value, or repeated): expected [], seen \
             [\"device0/graph0=0xa0000001\", \"device0/graph1=0xa0000000\"]"
        );
    }
}
