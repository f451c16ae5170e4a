//! Scenario 2, the older callback API beside host functions: `cuStreamAddCallback` /
//! `cudaStreamAddCallback` on two streams. The callback only records what it saw (its user data,
//! the status, the stream, an order number); the test thread checks after synchronising, so a
//! wrong expectation fails.

use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{label, lock, user_data};
use crate::binding::Binding;
use crate::check::{Checker, Failure, Mismatches, Ran, wrong_expectations};
use crate::resources::{Context, Stream};

/// Streams used.
pub const STREAMS: usize = 2;
/// Callbacks added to each stream.
pub const PER_STREAM: usize = 3;

/// What one callback call saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The order of the call among all calls (0, 1, ...), taken inside the callback.
    pub order: u32,
    /// The user data it got (the address of its [`Tag`]).
    pub tag: usize,
    /// The status argument (`CUresult` / `cudaError_t`).
    pub status: u32,
    /// The stream argument.
    pub stream: usize,
}

/// Where the callbacks record.
#[derive(Debug, Default)]
pub struct Log {
    next: AtomicU32,
    records: Mutex<Vec<Record>>,
}

/// The user data of one callback: which log to record in.
#[derive(Debug)]
pub struct Tag<'a> {
    log: &'a Log,
}

/// Records one callback call; what the bindings' stream callbacks call.
///
/// # Safety
/// `data` must point at a live [`Tag`].
pub unsafe fn record(stream: *mut c_void, status: u32, data: *mut c_void) {
    // SAFETY: the caller passes a live `Tag`.
    let tag = unsafe { &*data.cast::<Tag<'_>>() };
    let order = tag.log.next.fetch_add(1, Ordering::SeqCst);
    lock(&tag.log.records).push(Record {
        order,
        tag: data.addr(),
        status,
        stream: stream.addr(),
    });
}

/// What the run saw, with the handles and tags needed to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The streams, in order.
    pub streams: Vec<usize>,
    /// For each stream, its tags in the order the callbacks were added.
    pub tags: Vec<Vec<usize>>,
    /// Every callback call, in the order they were recorded.
    pub records: Vec<Record>,
}

/// What the check expects: per stream, the tags in enqueue order, each with status 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    /// The streams, in order.
    pub streams: Vec<usize>,
    /// For each stream, the tags its callbacks must see, in this order.
    pub tags: Vec<Vec<usize>>,
    /// The status every callback must see (`CUDA_SUCCESS` / `cudaSuccess`).
    pub status: u32,
}

impl Expectation {
    /// The contract: every callback ran once, in its stream's order, with success.
    pub fn from(seen: &Observation) -> Self {
        Self {
            streams: seen.streams.clone(),
            tags: seen.tags.clone(),
            status: 0,
        }
    }
}

/// Adds [`PER_STREAM`] callbacks to each of [`STREAMS`] streams, interleaved, and synchronises.
pub fn observe<B: Binding>() -> Result<Observation, Failure> {
    let _ctx = Context::<B>::enter(0)?;
    let log = Log::default();
    lock(&log.records).reserve(STREAMS * PER_STREAM);
    let tags: Vec<Vec<Tag<'_>>> = (0..STREAMS)
        .map(|_| (0..PER_STREAM).map(|_| Tag { log: &log }).collect())
        .collect();
    let streams = (0..STREAMS)
        .map(|_| Stream::<B>::new())
        .collect::<Result<Vec<_>, _>>()?;
    for seq in 0..PER_STREAM {
        for (stream, tags) in streams.iter().zip(&tags) {
            // SAFETY: the tags and the log outlive the streams, whose drop waits for them.
            unsafe { stream.add_recording_callback(user_data(&tags[seq])) }?;
        }
    }
    for stream in &streams {
        stream.sync()?;
    }
    let records = lock(&log.records).clone();
    Ok(Observation {
        streams: streams.iter().map(|s| s.raw().0.addr()).collect(),
        tags: tags
            .iter()
            .map(|t| t.iter().map(|tag| user_data(tag).addr()).collect())
            .collect(),
        records,
    })
}

/// Scenario 2's check.
pub fn check(expected: &Expectation, seen: &Observation) -> Result<(), Mismatches> {
    // Names follow what was enqueued: `s1#2` is the third callback added to stream 1.
    let mut names: Vec<(usize, String)> = Vec::new();
    for (s, stream) in seen.streams.iter().enumerate() {
        names.push((*stream, format!("stream{s}")));
    }
    for (s, tags) in seen.tags.iter().enumerate() {
        for (i, tag) in tags.iter().enumerate() {
            names.push((*tag, format!("s{s}#{i}")));
        }
    }
    let known: Vec<(usize, &str)> = names.iter().map(|(a, n)| (*a, n.as_str())).collect();
    let name = |address: usize| label(address, &known);

    let mut c = Checker::new();
    let total: usize = expected.tags.iter().map(Vec::len).sum();
    c.eq("callback calls", total, seen.records.len());
    let mut orders: Vec<u32> = seen.records.iter().map(|r| r.order).collect();
    orders.sort_unstable();
    c.eq(
        "order numbers",
        (0..u32::try_from(total).unwrap_or(u32::MAX)).collect::<Vec<_>>(),
        orders,
    );
    for r in &seen.records {
        c.eq(
            format!("status seen by callback {}", name(r.tag)),
            expected.status,
            r.status,
        );
    }
    let mut by_order = seen.records.clone();
    by_order.sort_by_key(|r| r.order);
    for (stream, tags) in expected.streams.iter().zip(&expected.tags) {
        let want: Vec<String> = tags.iter().map(|t| name(*t)).collect();
        let got: Vec<String> = by_order
            .iter()
            .filter(|r| r.stream == *stream)
            .map(|r| name(r.tag))
            .collect();
        c.eq(
            format!("user data seen on {}, in call order", name(*stream)),
            want,
            got,
        );
    }
    let strangers: Vec<String> = seen
        .records
        .iter()
        .filter(|r| !expected.streams.contains(&r.stream))
        .map(|r| format!("{} on {}", name(r.tag), name(r.stream)))
        .collect();
    c.eq(
        "callbacks that saw another stream",
        Vec::<String>::new(),
        strangers,
    );
    c.finish()
}

/// The trial.
pub fn run<B: Binding>() -> Result<Ran, Failure> {
    let seen = observe::<B>()?;
    let mut expected = Expectation::from(&seen);
    if wrong_expectations() {
        expected.tags[0].reverse();
    }
    check(&expected, &seen)?;
    Ok(Ran::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a correct run looks like: streams 0x100/0x200, tags 0x10.. and 0x30..; the
    /// callbacks were added interleaved, so they ran interleaved.
    fn correct() -> Observation {
        let streams = vec![0x100, 0x200];
        let tags = vec![vec![0x10, 0x18, 0x20], vec![0x30, 0x38, 0x40]];
        let mut records = Vec::new();
        for seq in 0..PER_STREAM {
            for (stream, tags) in streams.iter().zip(&tags) {
                records.push(Record {
                    order: u32::try_from(records.len()).unwrap(),
                    tag: tags[seq],
                    status: 0,
                    stream: *stream,
                });
            }
        }
        Observation {
            streams,
            tags,
            records,
        }
    }

    #[test]
    fn a_correct_run_passes() {
        let seen = correct();
        assert_eq!(check(&Expectation::from(&seen), &seen), Ok(()));
    }

    #[test]
    fn a_wrong_expectation_fails_with_both_orders() {
        let seen = correct();
        let mut expected = Expectation::from(&seen);
        expected.tags[0].reverse();
        assert_eq!(
            check(&expected, &seen).unwrap_err().to_string(),
            "user data seen on stream0, in call order: expected [\"s0#2\", \"s0#1\", \"s0#0\"], \
             seen [\"s0#0\", \"s0#1\", \"s0#2\"]"
        );
    }

    #[test]
    fn a_failed_status_a_lost_call_and_a_foreign_stream_are_each_reported() {
        let seen = correct();
        let expected = Expectation::from(&seen);
        let mut bad = seen.clone();
        bad.records[0].status = 999;
        bad.records.pop();
        bad.records[1].stream = 0x999;
        let text = check(&expected, &bad).unwrap_err().to_string();
        for part in [
            "callback calls: expected 6, seen 5",
            "order numbers: expected [0, 1, 2, 3, 4, 5], seen [0, 1, 2, 3, 4]",
            "status seen by callback s0#0: expected 0, seen 999",
            "callbacks that saw another stream: expected [], seen [\"s1#0 on 0x999\"]",
        ] {
            assert!(text.contains(part), "{part} missing from: {text}");
        }
    }
}
