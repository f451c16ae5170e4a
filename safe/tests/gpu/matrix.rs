//! The safe layer's GPU matrix: C01-C14 (one callback on one stream up to every device with
//! two graphs each: order, visibility, panics, owned and borrowed streams, closures that outlive
//! their graph, capture and 10,000 replays), plus the raw path and the refusals. Each case builds
//! what it needs, checks on the test thread after synchronising (callbacks only record), and
//! destroys what it made. Trials run one at a time: a global-mode capture (C13) forbids other
//! threads' unsafe CUDA calls while it lasts.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use cuda_hostcb_safe::{CaptureMode, CaptureStatus, Error, default_panic_hook, set_panic_hook};
use hostcb_gate::trials::{Case, Completion, Failed, Outcome, done, wait_count};
use hostcb_gate::{expect_eq, expect_seq};

use crate::{Tally, counter, record, take};
use cuda_hostcb_safe::{self as safe, sys};

/// Every case.
pub fn cases() -> Vec<(&'static str, Case)> {
    vec![
        ("c01_one_callback_one_stream", c01_one_callback_one_stream),
        (
            "c02_10000_callbacks_in_order_once_each",
            c02_10000_callbacks_in_order_once_each,
        ),
        ("c03_two_streams_one_gpu", c03_two_streams_one_gpu),
        ("c04_every_gpu_two_streams", c04_every_gpu_two_streams),
        (
            "c05_two_host_threads_own_streams",
            c05_two_host_threads_own_streams,
        ),
        (
            "c06_callback_sees_the_copy_before_it",
            c06_callback_sees_the_copy_before_it,
        ),
        (
            "c07_work_after_a_callback_waits_for_it",
            c07_work_after_a_callback_waits_for_it,
        ),
        (
            "c08_panicking_callback_is_contained",
            c08_panicking_callback_is_contained,
        ),
        (
            "c09_owned_and_borrowed_streams",
            c09_owned_and_borrowed_streams,
        ),
        (
            "c10_stream_closure_dropped_once_after_its_call",
            c10_stream_closure_dropped_once_after_its_call,
        ),
        (
            "c11_graph_closure_survives_its_graph",
            c11_graph_closure_survives_its_graph,
        ),
        (
            "c12_graph_closure_dropped_once_after_last_holder",
            c12_graph_closure_dropped_once_after_last_holder,
        ),
        (
            "c13_capture_then_10000_replays",
            c13_capture_then_10000_replays,
        ),
        (
            "c14_devices_two_graphs_each_see_their_own_value",
            c14_devices_two_graphs_each_see_their_own_value,
        ),
        (
            "raw_user_data_reaches_the_callback_unchanged",
            raw_user_data_reaches_the_callback_unchanged,
        ),
        (
            "calls_inside_a_callback_are_refused_and_drops_deferred",
            calls_inside_a_callback_are_refused_and_drops_deferred,
        ),
        (
            "update_from_another_topology_names_the_reason",
            update_from_another_topology_names_the_reason,
        ),
        (
            "foreign_dependency_is_refused",
            foreign_dependency_is_refused,
        ),
    ]
}

/// How long to wait for a closure that CUDA drops asynchronously (user-object destructors).
const DROP_WAIT: Duration = Duration::from_secs(5);

/// A host pointer that callbacks may read or write (the test keeps it valid and synchronises).
#[derive(Clone, Copy)]
struct HostPtr(*mut u32);

// SAFETY: the cases keep the memory alive until the callbacks that use it have run, and never
// touch it from two threads at once.
unsafe impl Send for HostPtr {}
// SAFETY: as above.
unsafe impl Sync for HostPtr {}

impl HostPtr {
    /// The pointer (a method, so closures capture the whole `HostPtr`).
    fn get(self) -> *mut u32 {
        self.0
    }
}

/// Every contained callback panic's message, as the hook received it.
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Installs one recording hook for the whole run (the hook is process-wide); it also prints.
pub fn record_panics() {
    set_panic_hook(|report| {
        record(&PANICS, report.message().unwrap_or_default().to_owned());
        default_panic_hook(report);
    });
}

/// How many contained panics carried exactly `message`.
fn panics_with(message: &str) -> usize {
    PANICS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|m| *m == message)
        .count()
}

/// Mixed into the values the cases write, so that a value left from another case would show.
fn salt() -> u32 {
    0x9E37_79B9
}

/// The primary context of device `ordinal`, current on this thread.
fn current(ordinal: usize) -> Result<safe::Context, Failed> {
    let ctx = safe::Context::primary(ordinal)?;
    ctx.make_current()?;
    Ok(ctx)
}

/// Waits a little and for the context, so that a wrong early drop would have happened.
fn settle(ctx: &safe::Context) -> Result<(), Failed> {
    ctx.synchronize()?;
    thread::sleep(Duration::from_millis(100));
    Ok(())
}

/// A closure that counts its calls and, through what it owns, its drops. One type for every
/// use, so that an executable can be updated from a graph holding another instance.
fn bump(calls: &Arc<AtomicUsize>, drops: &Arc<AtomicUsize>) -> impl Fn() + Send + Sync + 'static {
    let calls = Arc::clone(calls);
    let tally = Tally(Arc::clone(drops));
    move || {
        let _owned = &tally;
        calls.fetch_add(1, SeqCst);
    }
}

/// Pinned host memory of `len` words, zeroed, freed on drop (in its context).
struct Pinned {
    ptr: *mut u32,
    len: usize,
    ctx: safe::Context,
}

impl Pinned {
    fn new(ctx: &safe::Context, len: usize) -> Result<Pinned, Failed> {
        let mut raw: *mut c_void = ptr::null_mut();
        with(ctx, || unsafe { sys::cuMemAllocHost(&mut raw, len * 4) })?;
        let ptr = raw.cast::<u32>();
        // SAFETY: a fresh allocation of `len` words.
        unsafe { ptr.write_bytes(0, len) };
        Ok(Pinned {
            ptr,
            len,
            ctx: ctx.clone(),
        })
    }

    fn host(&self) -> HostPtr {
        HostPtr(self.ptr)
    }

    fn read(&self) -> Vec<u32> {
        // SAFETY: `len` words, read after the stream that wrote them was synchronised.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }.to_vec()
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let p = self.ptr.cast::<c_void>();
        let _ = with(&self.ctx, || unsafe { sys::cuMemFreeHost(p) });
    }
}

/// Device memory of `bytes` bytes, freed on drop (in its context).
struct Device {
    ptr: sys::CUdeviceptr,
    ctx: safe::Context,
}

impl Device {
    fn new(ctx: &safe::Context, bytes: usize) -> Result<Device, Failed> {
        let mut ptr: sys::CUdeviceptr = 0;
        with(ctx, || unsafe { sys::cuMemAlloc(&mut ptr, bytes) })?;
        Ok(Device {
            ptr,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let p = self.ptr;
        let _ = with(&self.ctx, || unsafe { sys::cuMemFree(p) });
    }
}

/// Runs a raw call with `ctx` pushed as the current context.
fn with(
    ctx: &safe::Context,
    call: impl FnOnce() -> Result<(), cuda_hostcb::Error>,
) -> Result<(), Failed> {
    unsafe { sys::cuCtxPushCurrent(ctx.as_raw()) }?;
    let result = call();
    let mut popped: sys::CUcontext = ptr::null_mut();
    unsafe { sys::cuCtxPopCurrent(&mut popped) }?;
    Ok(result?)
}

fn c01_one_callback_one_stream(_: usize) -> Outcome {
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;
    let calls = counter();
    let c = Arc::clone(&calls);
    stream.launch(move || {
        c.fetch_add(1, SeqCst);
    })?;
    stream.synchronize()?;
    expect_eq("calls after synchronising", 1, calls.load(SeqCst))?;
    done()
}

const MANY: u32 = 10_000;

fn c02_10000_callbacks_in_order_once_each(_: usize) -> Outcome {
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;
    let log = Arc::new(Mutex::new(Vec::with_capacity(MANY as usize)));
    for i in 0..MANY {
        let log = Arc::clone(&log);
        stream.launch(move || record(&log, i))?;
    }
    stream.synchronize()?;
    let want: Vec<u32> = (0..MANY).collect();
    expect_seq("callbacks, in launch order", &want, &take(&log))?;
    done()
}

/// A stream's callbacks, as `(tag, index)` in the order they ran.
type Log = Arc<Mutex<Vec<(usize, u32)>>>;

/// Launches `n` callbacks on each stream, interleaved; each records `(tag, i)` in its
/// stream's log. Returns the logs.
fn interleave(streams: &[(usize, &safe::Stream)], n: u32) -> Result<Vec<Log>, Failed> {
    let logs: Vec<_> = streams
        .iter()
        .map(|_| Arc::new(Mutex::new(Vec::new())))
        .collect();
    for i in 0..n {
        for ((tag, stream), log) in streams.iter().zip(&logs) {
            let (tag, log) = (*tag, Arc::clone(log));
            stream.launch(move || record(&log, (tag, i)))?;
        }
    }
    Ok(logs)
}

fn c03_two_streams_one_gpu(_: usize) -> Outcome {
    let ctx = current(0)?;
    let (a, b) = (safe::Stream::new(&ctx)?, safe::Stream::new(&ctx)?);
    let logs = interleave(&[(0, &a), (1, &b)], 1000)?;
    a.synchronize()?;
    b.synchronize()?;
    for (tag, log) in logs.iter().enumerate() {
        let want: Vec<_> = (0..1000).map(|i| (tag, i)).collect();
        expect_seq(&format!("stream {tag}'s callbacks"), &want, &take(log))?;
    }
    done()
}

fn c04_every_gpu_two_streams(devices: usize) -> Outcome {
    if devices < 2 {
        return Ok(Completion::ignored_with(format!(
            "needs 2 or more devices, this machine has {devices}"
        )));
    }
    let mut lanes = Vec::new();
    for d in 0..devices {
        let ctx = current(d)?;
        let streams = [safe::Stream::new(&ctx)?, safe::Stream::new(&ctx)?];
        let logs = interleave(&[(2 * d, &streams[0]), (2 * d + 1, &streams[1])], 500)?;
        lanes.push((ctx, streams, logs));
    }
    for (ctx, streams, _) in &lanes {
        ctx.make_current()?;
        for s in streams {
            s.synchronize()?;
        }
    }
    for (d, (_, _, logs)) in lanes.iter().enumerate() {
        for (s, log) in logs.iter().enumerate() {
            let tag = 2 * d + s;
            let want: Vec<_> = (0..500).map(|i| (tag, i)).collect();
            expect_seq(&format!("device {d} stream {s}"), &want, &take(log))?;
        }
    }
    println!(
        "c04: {devices} devices; {} callbacks per device (2 streams x 500)",
        2 * 500
    );
    done()
}

fn c05_two_host_threads_own_streams(_: usize) -> Outcome {
    let ctx = current(0)?;
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let ctx = ctx.clone();
            thread::spawn(move || -> Result<Vec<(usize, u32)>, Failed> {
                ctx.make_current()?;
                let stream = safe::Stream::new(&ctx)?;
                let log = Arc::new(Mutex::new(Vec::new()));
                for i in 0..2000 {
                    let log = Arc::clone(&log);
                    stream.launch(move || record(&log, (t, i)))?;
                }
                stream.synchronize()?;
                Ok(take(&log))
            })
        })
        .collect();
    for (t, worker) in workers.into_iter().enumerate() {
        let got = worker
            .join()
            .map_err(|_| Failed::from(format!("thread {t} panicked")))??;
        let want: Vec<_> = (0..2000).map(|i| (t, i)).collect();
        expect_seq(&format!("thread {t}'s stream"), &want, &got)?;
    }
    done()
}

fn pattern(i: usize) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761) ^ salt()
}

fn c06_callback_sees_the_copy_before_it(_: usize) -> Outcome {
    const LEN: usize = 1 << 22; // 16 MiB: copies long enough to overtake if unordered
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;
    let src = Pinned::new(&ctx, LEN)?;
    let dst = Pinned::new(&ctx, LEN)?;
    let dev = Device::new(&ctx, LEN * 4)?;
    // SAFETY: `src` has LEN words and nothing else uses it yet.
    let words = unsafe { std::slice::from_raw_parts_mut(src.ptr, LEN) };
    for (i, w) in words.iter_mut().enumerate() {
        *w = pattern(i);
    }
    unsafe {
        sys::cuMemcpyHtoDAsync(dev.ptr, src.ptr.cast(), LEN * 4, stream.as_raw())?;
        sys::cuMemcpyDtoHAsync(dst.ptr.cast(), dev.ptr, LEN * 4, stream.as_raw())?;
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (out, p) = (Arc::clone(&seen), dst.host());
    stream.launch(move || {
        // SAFETY: the copy into `dst` ran before this callback; the test waits for it.
        let data = unsafe { std::slice::from_raw_parts(p.get(), LEN) };
        let wrong = data
            .iter()
            .enumerate()
            .filter(|&(i, &w)| w != pattern(i))
            .count();
        record(&out, wrong);
    })?;
    stream.synchronize()?;
    expect_eq(
        "words the callback saw that differ from the copied data",
        vec![0],
        take(&seen),
    )?;
    done()
}

fn c07_work_after_a_callback_waits_for_it(_: usize) -> Outcome {
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;
    let flag = Pinned::new(&ctx, 1)?;
    let seen = Pinned::new(&ctx, 1)?;
    let dev = Device::new(&ctx, 4)?;
    let (p, value) = (flag.host(), 0xC07 ^ salt());
    stream.launch(move || {
        thread::sleep(Duration::from_millis(100));
        // SAFETY: the test keeps `flag` alive until the stream is synchronised.
        unsafe { p.get().write_volatile(value) };
    })?;
    unsafe {
        sys::cuMemcpyHtoDAsync(dev.ptr, flag.ptr.cast(), 4, stream.as_raw())?;
        sys::cuMemcpyDtoHAsync(seen.ptr.cast(), dev.ptr, 4, stream.as_raw())?;
    }
    stream.synchronize()?;
    expect_eq(
        "value the copy after the callback read",
        vec![value],
        seen.read(),
    )?;
    done()
}

fn c08_panicking_callback_is_contained(_: usize) -> Outcome {
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;

    // A graph: a panicking node, then one that counts.
    let graph_msg = "C08 deliberate panic in a graph node".to_owned();
    let after = counter();
    let graph = safe::Graph::new(&ctx)?;
    let m = graph_msg.clone();
    let first = graph.add_host_node(&[], move || panic!("{m}"))?;
    let a = Arc::clone(&after);
    graph.add_host_node(&[first], move || {
        a.fetch_add(1, SeqCst);
    })?;
    let exec = graph.instantiate()?;
    exec.launch(&stream)?;
    let synced = stream.synchronize().map_err(|e| e.to_string());
    expect_eq("synchronising after the panic", Ok(()), synced)?;
    expect_eq(
        "hook reports of the graph panic",
        1,
        panics_with(&graph_msg),
    )?;
    expect_eq(
        "calls of the node after the panicking one",
        1,
        after.load(SeqCst),
    )?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    expect_eq(
        "hook reports after a second launch",
        2,
        panics_with(&graph_msg),
    )?;
    expect_eq("calls after a second launch", 2, after.load(SeqCst))?;
    drop((exec, graph));

    // A stream: a panicking closure, then one that counts, then a later launch.
    let stream_msg = "C08 deliberate panic in a stream callback".to_owned();
    let later = counter();
    let m = stream_msg.clone();
    stream.launch(move || panic!("{m}"))?;
    let l = Arc::clone(&later);
    stream.launch(move || {
        l.fetch_add(1, SeqCst);
    })?;
    let synced = stream.synchronize().map_err(|e| e.to_string());
    expect_eq("synchronising after the stream panic", Ok(()), synced)?;
    expect_eq(
        "hook reports of the stream panic",
        1,
        panics_with(&stream_msg),
    )?;
    expect_eq("calls of the callback after it", 1, later.load(SeqCst))?;
    let l = Arc::clone(&later);
    stream.launch(move || {
        l.fetch_add(1, SeqCst);
    })?;
    stream.synchronize()?;
    expect_eq("calls of a later launch", 2, later.load(SeqCst))?;
    done()
}

/// A raw host function: counts into the `AtomicUsize` its user data points to.
unsafe extern "C" fn count_raw(data: *mut c_void) {
    // SAFETY: the cases pass a live `AtomicUsize`.
    unsafe { &*data.cast::<AtomicUsize>() }.fetch_add(1, SeqCst);
}

fn c09_owned_and_borrowed_streams(_: usize) -> Outcome {
    let ctx = current(0)?;

    // Owned: dropped with a callback pending; CUDA still runs it, then the closure goes.
    let owned = safe::Stream::new(&ctx)?;
    expect_eq("Stream::new is owned", true, owned.is_owned())?;
    let (calls, drops) = (counter(), counter());
    let (c, tally) = (Arc::clone(&calls), Tally(Arc::clone(&drops)));
    owned.launch(move || {
        let _owned = &tally;
        thread::sleep(Duration::from_millis(50));
        c.fetch_add(1, SeqCst);
    })?;
    drop(owned);
    ctx.synchronize()?;
    wait_count(
        "calls of the pending callback of a dropped stream",
        &calls,
        1,
        DROP_WAIT,
    )?;
    wait_count("drops of its closure", &drops, 1, DROP_WAIT)?;

    // Borrowed: dropping the wrapper leaves the stream usable, and ours to destroy.
    let mut raw: sys::CUstream = ptr::null_mut();
    unsafe { sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING.0)? };
    // SAFETY: `raw` lives until the end of this case, and only this thread uses it.
    let borrowed = unsafe { safe::Stream::borrow_raw(raw) };
    expect_eq("borrow_raw is owned", false, borrowed.is_owned())?;
    let c = Arc::clone(&calls);
    borrowed.launch(move || {
        c.fetch_add(1, SeqCst);
    })?;
    borrowed.synchronize()?;
    drop(borrowed);
    let raw_calls = AtomicUsize::new(0);
    let data = ptr::from_ref(&raw_calls).cast_mut().cast::<c_void>();
    unsafe {
        sys::cuLaunchHostFunc(raw, Some(count_raw), data)?;
        sys::cuStreamSynchronize(raw)?;
    }
    expect_eq("calls through the borrowed stream", 2, calls.load(SeqCst))?;
    expect_eq(
        "calls on the raw stream after the wrapper's drop",
        1,
        raw_calls.load(SeqCst),
    )?;
    let destroyed = unsafe { sys::cuStreamDestroy(raw) }.map_err(|e| e.to_string());
    expect_eq("destroying the raw stream ourselves", Ok(()), destroyed)?;
    done()
}

/// Records "call" and "drop" in order, and counts drops.
struct Noted(Arc<Mutex<Vec<&'static str>>>, Arc<AtomicUsize>);

impl Drop for Noted {
    fn drop(&mut self) {
        record(&self.0, "drop");
        self.1.fetch_add(1, SeqCst);
    }
}

fn c10_stream_closure_dropped_once_after_its_call(_: usize) -> Outcome {
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;

    let (events, drops) = (Arc::new(Mutex::new(Vec::new())), counter());
    let noted = Noted(Arc::clone(&events), Arc::clone(&drops));
    let e = Arc::clone(&events);
    stream.launch(move || {
        let _owned = &noted;
        record(&e, "call");
    })?;
    stream.synchronize()?;
    wait_count("drops of the launched closure", &drops, 1, DROP_WAIT)?;
    expect_eq("events", vec!["call", "drop"], take(&events))?;

    // launch_fn on a plain stream: once, then dropped.
    let (calls, fn_drops) = (counter(), counter());
    stream.launch_fn(bump(&calls, &fn_drops))?;
    stream.synchronize()?;
    expect_eq("calls of a launch_fn closure", 1, calls.load(SeqCst))?;
    wait_count("drops of the launch_fn closure", &fn_drops, 1, DROP_WAIT)?;

    // Many: each dropped exactly once.
    let many = counter();
    for _ in 0..1000 {
        let tally = Tally(Arc::clone(&many));
        stream.launch(move || {
            let _owned = &tally;
        })?;
    }
    stream.synchronize()?;
    wait_count("drops of 1000 launched closures", &many, 1000, DROP_WAIT)?;
    settle(&ctx)?;
    expect_eq(
        "drops of 1000 closures, a while later",
        1000,
        many.load(SeqCst),
    )?;
    println!(
        "c10: one closure: 1 call, {} drop; launch_fn: {} call, {} drop; 1000 closures: {} drops",
        drops.load(SeqCst),
        calls.load(SeqCst),
        fn_drops.load(SeqCst),
        many.load(SeqCst)
    );
    done()
}

/// One host node that counts; returns the graph.
fn counting_graph(
    ctx: &safe::Context,
    calls: &Arc<AtomicUsize>,
    drops: &Arc<AtomicUsize>,
) -> Result<safe::Graph, Failed> {
    let graph = safe::Graph::new(ctx)?;
    graph.add_host_node(&[], bump(calls, drops))?;
    Ok(graph)
}

fn c11_graph_closure_survives_its_graph(_: usize) -> Outcome {
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;

    // The graph dropped while an executable lives.
    let (calls, drops) = (counter(), counter());
    let graph = counting_graph(&ctx, &calls, &drops)?;
    let exec = graph.instantiate()?;
    drop(graph);
    exec.launch(&stream)?;
    stream.synchronize()?;
    expect_eq("exec after its graph's drop: calls", 1, calls.load(SeqCst))?;
    settle(&ctx)?;
    expect_eq("exec after its graph's drop: drops", 0, drops.load(SeqCst))?;
    drop(exec);
    wait_count("drops after the exec's drop", &drops, 1, DROP_WAIT)?;

    // A clone outlives the original.
    let (calls, drops) = (counter(), counter());
    let graph = counting_graph(&ctx, &calls, &drops)?;
    let clone = graph.try_clone()?;
    drop(graph);
    let exec = clone.instantiate()?;
    drop(clone);
    exec.launch(&stream)?;
    stream.synchronize()?;
    expect_eq("clone: calls", 1, calls.load(SeqCst))?;
    settle(&ctx)?;
    expect_eq("clone: drops while its exec lives", 0, drops.load(SeqCst))?;
    drop(exec);
    wait_count("clone: drops after the exec's drop", &drops, 1, DROP_WAIT)?;

    // Two executables; the second outlives the first.
    let (calls, drops) = (counter(), counter());
    let graph = counting_graph(&ctx, &calls, &drops)?;
    let (first, second) = (graph.instantiate()?, graph.instantiate()?);
    drop(graph);
    first.launch(&stream)?;
    drop(first);
    second.launch(&stream)?;
    stream.synchronize()?;
    expect_eq("two execs: calls", 2, calls.load(SeqCst))?;
    settle(&ctx)?;
    expect_eq(
        "two execs: drops while the second lives",
        0,
        drops.load(SeqCst),
    )?;
    drop(second);
    wait_count("two execs: drops after both", &drops, 1, DROP_WAIT)?;

    // An update: the executable holds the new graph's closure and lets the old one go.
    let (old_calls, old_drops, new_calls, new_drops) = (counter(), counter(), counter(), counter());
    let old = counting_graph(&ctx, &old_calls, &old_drops)?;
    let new = counting_graph(&ctx, &new_calls, &new_drops)?;
    let mut exec = old.instantiate()?;
    exec.update(&new)?;
    drop((old, new));
    wait_count(
        "update: drops of the replaced closure",
        &old_drops,
        1,
        DROP_WAIT,
    )?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    expect_eq(
        "update: calls of the new closure",
        1,
        new_calls.load(SeqCst),
    )?;
    expect_eq(
        "update: calls of the replaced closure",
        0,
        old_calls.load(SeqCst),
    )?;
    settle(&ctx)?;
    expect_eq(
        "update: drops of the new closure",
        0,
        new_drops.load(SeqCst),
    )?;
    drop(exec);
    wait_count(
        "update: drops of the new closure after the exec",
        &new_drops,
        1,
        DROP_WAIT,
    )?;

    // In flight: graph and exec dropped while a launch still has to reach the node.
    let (calls, drops) = (counter(), counter());
    let graph = safe::Graph::new(&ctx)?;
    let wait = graph.add_host_node(&[], || thread::sleep(Duration::from_millis(300)))?;
    graph.add_host_node(&[wait], bump(&calls, &drops))?;
    let exec = graph.instantiate()?;
    exec.launch(&stream)?;
    drop((exec, graph));
    expect_eq(
        "in flight: drops right after dropping exec and graph",
        0,
        drops.load(SeqCst),
    )?;
    stream.synchronize()?;
    expect_eq("in flight: calls", 1, calls.load(SeqCst))?;
    wait_count("in flight: drops after the launch", &drops, 1, DROP_WAIT)?;
    done()
}

fn c12_graph_closure_dropped_once_after_last_holder(_: usize) -> Outcome {
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;
    let (calls, drops) = (counter(), counter());
    let graph = counting_graph(&ctx, &calls, &drops)?;
    let clone = graph.try_clone()?;
    let (first, second) = (graph.instantiate()?, clone.instantiate()?);
    first.launch(&stream)?;
    second.launch(&stream)?;
    stream.synchronize()?;
    expect_eq("calls", 2, calls.load(SeqCst))?;

    drop(graph);
    settle(&ctx)?;
    expect_eq("drops after the graph", 0, drops.load(SeqCst))?;
    drop(clone);
    settle(&ctx)?;
    expect_eq("drops after the graph and its clone", 0, drops.load(SeqCst))?;
    drop(first);
    settle(&ctx)?;
    expect_eq("drops after one exec too", 0, drops.load(SeqCst))?;
    drop(second);
    wait_count("drops after the last holder", &drops, 1, DROP_WAIT)?;
    settle(&ctx)?;
    expect_eq("drops a while later", 1, drops.load(SeqCst))?;
    println!(
        "c12: calls {}, drops {} (0 while any graph, clone or exec lived)",
        calls.load(SeqCst),
        drops.load(SeqCst)
    );
    done()
}

fn c13_capture_then_10000_replays(_: usize) -> Outcome {
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;
    let (calls, drops, refused_drops) = (counter(), counter(), counter());

    stream.begin_capture(CaptureMode::Global)?;
    let status = stream.capture_status();
    let tally = Tally(Arc::clone(&refused_drops));
    let refused = stream.launch(move || {
        let _owned = &tally;
    });
    let captured = stream.launch_fn(bump(&calls, &drops));
    let graph = stream.end_capture()?;
    expect_eq("status while capturing", CaptureStatus::Active, status?)?;
    expect_eq(
        "a one-shot launch while capturing",
        Err(true),
        refused.map_err(|e| matches!(e, Error::CapturingStream)),
    )?;
    expect_eq(
        "drops of the refused closure",
        1,
        refused_drops.load(SeqCst),
    )?;
    captured?;
    expect_eq(
        "status after capture",
        CaptureStatus::None,
        stream.capture_status()?,
    )?;
    expect_eq("nodes captured", 1, graph.node_count()?)?;

    let exec = graph.instantiate()?;
    drop(graph);
    for _ in 0..MANY {
        exec.launch(&stream)?;
    }
    stream.synchronize()?;
    expect_eq(
        "calls after 10000 replays",
        MANY as usize,
        calls.load(SeqCst),
    )?;
    settle(&ctx)?;
    expect_eq("drops while the exec lives", 0, drops.load(SeqCst))?;
    drop(exec);
    wait_count("drops after the exec", &drops, 1, DROP_WAIT)?;
    done()
}

fn c14_devices_two_graphs_each_see_their_own_value(devices: usize) -> Outcome {
    if devices < 2 {
        return Ok(Completion::ignored_with(format!(
            "needs 2 or more devices, this machine has {devices}"
        )));
    }
    struct Lane {
        exec: safe::GraphExec,
        stream: safe::Stream,
        _slot: Pinned,
        _dev: Device,
        ctx: safe::Context,
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut lanes = Vec::new();
    let mut want = Vec::new();
    for d in 0..devices {
        let ctx = current(d)?;
        for g in 0..2 {
            let value = salt() ^ ((d as u32 + 1) * 1000 + g as u32);
            let stream = safe::Stream::new(&ctx)?;
            let dev = Device::new(&ctx, 4)?;
            let slot = Pinned::new(&ctx, 1)?;
            stream.begin_capture(CaptureMode::ThreadLocal)?;
            let (p, out) = (slot.host(), Arc::clone(&seen));
            let built = (|| -> Result<(), Failed> {
                unsafe {
                    sys::cuMemsetD32Async(dev.ptr, value, 1, stream.as_raw())?;
                    sys::cuMemcpyDtoHAsync(slot.ptr.cast(), dev.ptr, 4, stream.as_raw())?;
                }
                stream.launch_fn(move || {
                    // SAFETY: the slot outlives the executable; the copy into it ran before.
                    let v = unsafe { p.get().read_volatile() };
                    record(&out, (d, g, v));
                })?;
                Ok(())
            })();
            let graph = stream.end_capture()?;
            built?;
            let exec = graph.instantiate()?;
            lanes.push(Lane {
                exec,
                stream,
                _slot: slot,
                _dev: dev,
                ctx: ctx.clone(),
            });
            want.extend([(d, g, value), (d, g, value)]);
        }
    }
    for _ in 0..2 {
        for lane in &lanes {
            lane.ctx.make_current()?;
            lane.exec.launch(&lane.stream)?;
        }
    }
    for lane in &lanes {
        lane.ctx.make_current()?;
        lane.stream.synchronize()?;
    }
    let mut got = take(&seen);
    got.sort_unstable();
    want.sort_unstable();
    expect_seq("(device, graph, value) each callback saw", &want, &got)?;
    let per_device: Vec<String> = (0..devices)
        .map(|d| {
            format!(
                "device {d}: {} calls",
                got.iter().filter(|c| c.0 == d).count()
            )
        })
        .collect();
    println!("c14: {devices} devices; {}", per_device.join(", "));
    done()
}

/// What the raw host function saw: the pointer and the byte behind it.
static RAW_SEEN: Mutex<Vec<(usize, u8)>> = Mutex::new(Vec::new());

unsafe extern "C" fn observe_raw(data: *mut c_void) {
    // SAFETY: the case passes a pointer to bytes it owns and keeps alive.
    let byte = unsafe { *data.cast::<u8>() };
    record(&RAW_SEEN, (data as usize, byte));
}

fn raw_user_data_reaches_the_callback_unchanged(_: usize) -> Outcome {
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;
    let storage: Box<[u8; 16]> = Box::new([0xA7; 16]);
    let data = storage.as_ptr().cast_mut().cast::<c_void>();
    take(&RAW_SEEN);

    // SAFETY: `observe_raw` does not unwind; `storage` outlives the synchronisation.
    unsafe { stream.launch_raw(observe_raw, data)? };
    stream.synchronize()?;
    expect_eq(
        "stream: pointer and byte",
        vec![(data as usize, 0xA7)],
        take(&RAW_SEEN),
    )?;

    let graph = safe::Graph::new(&ctx)?;
    // SAFETY: as above; `storage` outlives the graph and its executable.
    unsafe { graph.add_host_node_raw(&[], observe_raw, data)? };
    let exec = graph.instantiate()?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    drop((exec, graph));
    expect_eq(
        "graph: pointer and byte",
        vec![(data as usize, 0xA7)],
        take(&RAW_SEEN),
    )?;
    drop(storage);
    done()
}

fn calls_inside_a_callback_are_refused_and_drops_deferred(_: usize) -> Outcome {
    let ctx = current(0)?;
    let stream = safe::Stream::new(&ctx)?;
    let mut inner = Some(safe::Stream::new(&ctx)?);
    let outcome = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&outcome);
    stream.launch(move || {
        // Taken out of the closure, so that it is dropped here, inside the callback (the
        // closure itself is dropped later, by the reaper thread).
        let Some(inner) = inner.take() else { return };
        let refused = inner.synchronize();
        record(
            &out,
            matches!(
                refused,
                Err(Error::InCallback {
                    operation: "Stream::synchronize"
                })
            ),
        );
        // `inner` is dropped here, inside the callback: its destruction waits.
    })?;
    stream.synchronize()?; // also destroys `inner`, now on an ordinary thread
    expect_eq(
        "a stream call inside a callback refused",
        vec![true],
        take(&outcome),
    )?;
    // The stream that was dropped in a callback is gone, and this one still works.
    let calls = counter();
    stream.launch_fn(bump(&calls, &counter()))?;
    stream.synchronize()?;
    expect_eq(
        "calls after the deferred destruction",
        1,
        calls.load(SeqCst),
    )?;
    done()
}

fn update_from_another_topology_names_the_reason(_: usize) -> Outcome {
    let ctx = current(0)?;
    let (calls, drops) = (counter(), counter());
    let one = counting_graph(&ctx, &calls, &drops)?;
    let two = counting_graph(&ctx, &calls, &drops)?;
    let first = two.add_host_node(&[], bump(&calls, &drops))?;
    two.add_host_node(&[first], bump(&calls, &drops))?;
    let mut exec = one.instantiate()?;
    let refused = exec.update(&two).map_err(|e| match e {
        Error::UpdateRejected { reason, .. } => reason.to_owned(),
        other => other.to_string(),
    });
    expect_eq(
        "an update from a graph of another topology",
        Err("CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED".to_owned()),
        refused,
    )?;
    drop((exec, one, two));
    wait_count("drops of the four closures", &drops, 4, DROP_WAIT)?;
    done()
}

fn foreign_dependency_is_refused(_: usize) -> Outcome {
    let ctx = current(0)?;
    let (calls, drops) = (counter(), counter());
    let a = safe::Graph::new(&ctx)?;
    let b = safe::Graph::new(&ctx)?;
    let node = a.add_host_node(&[], bump(&calls, &drops))?;
    let refused = b
        .add_host_node(&[node], bump(&calls, &drops))
        .map(|_| ())
        .map_err(|e| matches!(e, Error::ForeignNode));
    expect_eq("a dependency from another graph", Err(true), refused)?;
    expect_eq("drops of the refused closure", 1, drops.load(SeqCst))?;
    expect_eq("nodes of the other graph", 0, b.node_count()?)?;
    drop((a, b));
    wait_count("drops after both graphs", &drops, 2, DROP_WAIT)?;
    done()
}
