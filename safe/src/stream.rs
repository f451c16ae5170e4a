//! Streams: closures enqueued as host functions, capture-aware, and the raw path unchanged.

use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use crate::Context;
use crate::arena;
use crate::callback;
use crate::graph::{Graph, own_arena};
use crate::once::{OneShot, on_stream};
use crate::reaper::{self, Handle};
use crate::sticky::{self, Book};
use crate::sys;
use crate::{CaptureMode, CaptureStatus, Error};

// The codes the safe layer treats as ending a context are the bindings'.
const _: () = {
    use sys::CUresult as R;
    let ours = sticky::STICKY;
    let theirs = [
        R::CUDA_ERROR_CONTAINED.0,
        R::CUDA_ERROR_ILLEGAL_ADDRESS.0,
        R::CUDA_ERROR_LAUNCH_TIMEOUT.0,
        R::CUDA_ERROR_ASSERT.0,
        R::CUDA_ERROR_HARDWARE_STACK_ERROR.0,
        R::CUDA_ERROR_ILLEGAL_INSTRUCTION.0,
        R::CUDA_ERROR_MISALIGNED_ADDRESS.0,
        R::CUDA_ERROR_INVALID_ADDRESS_SPACE.0,
        R::CUDA_ERROR_INVALID_PC.0,
        R::CUDA_ERROR_LAUNCH_FAILED.0,
        R::CUDA_ERROR_EXTERNAL_DEVICE.0,
    ];
    let mut i = 0;
    while i < ours.len() {
        assert!(ours[i] == theirs[i]);
        i += 1;
    }
    assert!(R::CUDA_SUCCESS.0 == 0);
};

// The safe enums mirror the bindings' values.
const _: () = {
    use sys::CUstreamCaptureMode as M;
    use sys::CUstreamCaptureStatus as S;
    assert!(M::CU_STREAM_CAPTURE_MODE_GLOBAL.0 == CaptureMode::Global.raw());
    assert!(M::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL.0 == CaptureMode::ThreadLocal.raw());
    assert!(M::CU_STREAM_CAPTURE_MODE_RELAXED.0 == CaptureMode::Relaxed.raw());
    assert!(matches!(
        CaptureStatus::from_raw(S::CU_STREAM_CAPTURE_STATUS_NONE.0),
        CaptureStatus::None
    ));
    assert!(matches!(
        CaptureStatus::from_raw(S::CU_STREAM_CAPTURE_STATUS_ACTIVE.0),
        CaptureStatus::Active
    ));
    assert!(matches!(
        CaptureStatus::from_raw(S::CU_STREAM_CAPTURE_STATUS_INVALIDATED.0),
        CaptureStatus::Invalidated
    ));
};

/// A CUDA stream: owned (made by [`Stream::new`], destroyed on drop) or borrowed
/// ([`Stream::borrow_raw`], left alone on drop).
///
/// `Send` but not `Sync`: a launch checks the stream's capture state and enqueues in one step,
/// which no other thread can interleave with through this handle.
#[derive(Debug)]
pub struct Stream {
    raw: sys::CUstream,
    owned: bool,
    ctx: Option<Context>,
    /// The one-shot closures CUDA skipped (held by each until its callback).
    book: Arc<Book>,
}

// SAFETY: a stream may be used from any thread; `Stream` is not `Sync` (see above).
unsafe impl Send for Stream {}

impl Stream {
    /// Creates a stream in `ctx` that does not synchronise with the legacy default stream
    /// (`CU_STREAM_NON_BLOCKING`); it is destroyed when dropped (after its pending work, which
    /// CUDA still runs).
    pub fn new(ctx: &Context) -> Result<Stream, Error> {
        callback::enter("Stream::new")?;
        let _current = ctx.push()?;
        let mut raw: sys::CUstream = ptr::null_mut();
        // SAFETY: a valid out-pointer, with `ctx` current.
        unsafe { sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING.0)? };
        Ok(Stream {
            raw,
            owned: true,
            ctx: Some(ctx.clone()),
            book: Arc::default(),
        })
    }

    /// Wraps a stream that someone else owns; dropping the `Stream` leaves it alone.
    ///
    /// # Safety
    /// `raw` is a valid stream (or null, the legacy default stream) for as long as the returned
    /// `Stream` is used, and no other thread begins a capture on it or joins it to one while a
    /// launch through this `Stream` is under way.
    pub unsafe fn borrow_raw(raw: sys::CUstream) -> Stream {
        Stream {
            raw,
            owned: false,
            ctx: None,
            book: Arc::default(),
        }
    }

    /// The raw stream; valid while `self` lives.
    pub fn as_raw(&self) -> sys::CUstream {
        self.raw
    }

    /// Whether dropping this `Stream` destroys the CUDA stream.
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// The context of an owned stream (`None` for a borrowed one).
    pub fn context(&self) -> Option<&Context> {
        self.ctx.as_ref()
    }

    /// Enqueues a one-shot closure: the stream calls it once, after the work before it
    /// (`cuStreamAddCallback`), and the reaper thread drops it after that call, with what it
    /// captures, on a program thread (so a captured value's `Drop` may call CUDA, e.g. free
    /// device memory; see [`wait_for_drops`](crate::wait_for_drops)).
    ///
    /// `FnMut`, called by reference, so that its captures outlive the call and are dropped off
    /// CUDA's thread; a closure that moves a capture out (`Option::take`) drops that part
    /// where it does so.
    ///
    /// Once the context has hit an error (a kernel that trapped), CUDA calls no host function:
    /// the closure is then dropped uncalled, and the stream's next
    /// [`synchronize`](Self::synchronize) returns [`Error::HostFunctionsSkipped`] with the count.
    /// Either way it is called or dropped exactly once, so a thread waiting for it never waits
    /// forever if it waits for its drop (e.g. on a channel whose sender it owns).
    ///
    /// A stream that is capturing a graph would record the call and make it on every launch of
    /// the graph, so this returns [`Error::CapturingStream`] then (dropping `f` uncalled); use
    /// [`launch_fn`](Self::launch_fn), which works in both cases.
    #[inline]
    pub fn launch<F>(&self, f: F) -> Result<(), Error>
    where
        F: FnMut() + Send + 'static,
    {
        callback::enter("Stream::launch")?;
        match self.status()? {
            CaptureStatus::None => self.enqueue_once(f),
            CaptureStatus::Active => Err(Error::CapturingStream),
            CaptureStatus::Invalidated => Err(Error::CaptureInvalidated),
        }
    }

    /// Enqueues a closure that may run many times: on a plain stream it runs once and is
    /// dropped after that call, as with [`launch`](Self::launch) (skipped and dropped after a
    /// context error, likewise); on a capturing stream it
    /// becomes a host node of the graph being captured, owned by a CUDA user object moved into
    /// that graph, so it runs on every launch and is dropped once, by the reaper thread, after
    /// the last graph, executable or launch that holds it is gone. (The closures one thread
    /// captures into one capture share one user object; the first of them makes it.) A captured
    /// closure is recorded with `cuLaunchHostFunc` (`cuStreamAddCallback` cannot be captured):
    /// after a context error, launches of its graph do not call it, and it is dropped only
    /// when the graph and its executables are, so wait for its drop, not for its call.
    #[inline]
    pub fn launch_fn<F>(&self, f: F) -> Result<(), Error>
    where
        F: Fn() + Send + Sync + 'static,
    {
        callback::enter("Stream::launch_fn")?;
        // One cuStreamGetCaptureInfo_v3 gives the status, the capture's id and its graph.
        let (status, id, graph) = self.capture()?;
        // Tested on the raw value, the capturing case first: it is the one to be cheap.
        if status == sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE && !graph.is_null()
        {
            return self.enqueue_captured(id, graph, f);
        }
        match CaptureStatus::from_raw(status.0) {
            CaptureStatus::None => self.enqueue_once(f),
            _ => Err(Error::CaptureInvalidated),
        }
    }

    /// While the stream captures a graph, keeps `value` alive for as long as the captured graph,
    /// its clones, every executable made from them and every launch of those can use it (as
    /// [`Graph::keep`] does for a graph): a buffer a captured kernel reads, say, which the
    /// program may then drop its own handle of. Dropped once, by the reaper thread, after the
    /// last of them. [`Error::NotCapturing`] (and `value` dropped here) on a stream that is not
    /// capturing.
    pub fn keep_in_capture<T: Send + 'static>(&self, value: T) -> Result<(), Error> {
        callback::enter("Stream::keep_in_capture")?;
        let (status, _, graph) = self.capture()?;
        if status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE || graph.is_null()
        {
            return Err(match CaptureStatus::from_raw(status.0) {
                CaptureStatus::Invalidated => Error::CaptureInvalidated,
                _ => Error::NotCapturing,
            });
        }
        crate::graph::keep_in(graph, value)
    }

    /// Enqueues `f(user_data)` unchanged (`cuLaunchHostFunc`), the raw path: no box, no
    /// trampoline, no capture check.
    ///
    /// # Safety
    /// `f` must not unwind, nor call CUDA; `user_data` must stay valid for every call, which
    /// for a capturing stream means until the captured graph and every executable and launch
    /// made from it are gone.
    #[inline]
    pub unsafe fn launch_raw(
        &self,
        f: unsafe extern "C" fn(*mut c_void),
        user_data: *mut c_void,
    ) -> Result<(), Error> {
        callback::enter("Stream::launch_raw")?;
        // SAFETY: the caller's contract covers `f` and `user_data`; the stream is valid.
        unsafe { sys::cuLaunchHostFunc(self.raw, Some(f), user_data)? };
        Ok(())
    }

    /// The stream's book of skipped closures, which each of its one-shot closures holds.
    pub(super) fn book(&self) -> &Arc<Book> {
        &self.book
    }

    /// Waits for the stream's work, callbacks included (`cuStreamSynchronize`).
    ///
    /// If CUDA skipped one-shot closures of this stream since the last report (the context hit
    /// an error), it returns [`Error::HostFunctionsSkipped`] with their count and the error;
    /// after such an error it first waits (up to 2 s) until CUDA has made the callback of every
    /// closure enqueued through this `Stream`, so the count is whole. The closures' drops may
    /// still be under way on the reaper thread ([`wait_for_drops`](crate::wait_for_drops)).
    pub fn synchronize(&self) -> Result<(), Error> {
        callback::enter("Stream::synchronize")?;
        // SAFETY: the stream is valid while `self` lives.
        match unsafe { sys::cuStreamSynchronize(self.raw) } {
            Ok(()) if !self.book.any() => Ok(()),
            result => sticky::report(&self.book, result),
        }
    }

    /// Whether the stream is capturing a graph (`cuStreamIsCapturing`).
    pub fn capture_status(&self) -> Result<CaptureStatus, Error> {
        callback::enter("Stream::capture_status")?;
        self.status()
    }

    /// Begins capturing the stream's work into a graph (`cuStreamBeginCapture`).
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<(), Error> {
        callback::enter("Stream::begin_capture")?;
        // SAFETY: the stream is valid while `self` lives.
        unsafe { sys::cuStreamBeginCapture(self.raw, sys::CUstreamCaptureMode(mode.raw()))? };
        Ok(())
    }

    /// Ends the capture and returns the captured graph (`cuStreamEndCapture`); it owns the
    /// closures captured by [`launch_fn`](Self::launch_fn).
    pub fn end_capture(&self) -> Result<Graph, Error> {
        callback::enter("Stream::end_capture")?;
        let mut raw: sys::CUgraph = ptr::null_mut();
        // SAFETY: the stream is valid; a valid out-pointer.
        unsafe { sys::cuStreamEndCapture(self.raw, &mut raw)? };
        // SAFETY: CUDA made the graph and handed it to us.
        Ok(unsafe { Graph::from_raw(raw, self.ctx.clone()) })
    }

    #[inline]
    pub(super) fn status(&self) -> Result<CaptureStatus, Error> {
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: the stream is valid; a valid out-pointer.
        unsafe { sys::cuStreamIsCapturing(self.raw, &mut status)? };
        Ok(CaptureStatus::from_raw(status.0))
    }

    /// Enqueues a one-shot closure as a stream callback; if CUDA refuses, it is dropped here.
    #[inline]
    fn enqueue_once<F: FnMut() + Send + 'static>(&self, f: F) -> Result<(), Error> {
        let once = OneShot::new(&self.book, f);
        // SAFETY: CUDA makes the callback once (with success or the context's error), and
        // `on_stream` consumes the cell then.
        unsafe { sys::cuStreamAddCallback(self.raw, Some(on_stream::<F>), once.data(), 0)? };
        once.hand_over();
        Ok(())
    }

    /// Moves the closure into this thread's arena for the capture `id` (made and moved into
    /// `graph`, the graph being captured, on the capture's first closure), then records its
    /// launch.
    #[inline]
    fn enqueue_captured<F>(&self, id: u64, graph: sys::CUgraph, f: F) -> Result<(), Error>
    where
        F: Fn() + Send + Sync + 'static,
    {
        // SAFETY: `id` is the active capture's, just asked of the driver; `own_arena` makes
        // `graph` own the arena, or disposes of it.
        let (call, data) = unsafe { arena::capture(id, f, |arena| own_arena(graph, arena)) }?;
        // SAFETY: the graph being captured owns the closure through the arena's user object, so
        // it outlives every call the recorded host function can make. If the launch fails, the
        // graph still owns it and drops it with itself.
        unsafe { sys::cuLaunchHostFunc(self.raw, Some(call), data)? };
        Ok(())
    }

    /// The stream's capture status, the capture's id and the graph it is capturing into (null
    /// when it is not), from `cuStreamGetCaptureInfo_v3` (CUDA 12.3 and later; `capture_info`).
    /// A driver older than that lacks it, and the headers the layer is compiled from no longer
    /// declare `_v2`: there `cuStreamIsCapturing` gives the status, which is all a stream that is
    /// not capturing needs; an active capture returns `_v3`'s `Unavailable` error, since the id
    /// and graph a captured closure needs come from `_v3` alone.
    #[inline]
    fn capture(&self) -> Result<(sys::CUstreamCaptureStatus, u64, sys::CUgraph), Error> {
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let mut id = 0;
        let mut graph: sys::CUgraph = ptr::null_mut();
        // SAFETY: the stream is valid; the optional outputs that are not wanted are null.
        let info = unsafe { crate::capture_info(self.raw, &mut status, &mut id, &mut graph) };
        match info {
            Ok(()) => Ok((status, id, graph)),
            Err(missing) if missing.is_unavailable() => self.capture_without_info(missing),
            Err(e) => Err(e.into()),
        }
    }

    /// [`capture`](Self::capture) on a driver without `cuStreamGetCaptureInfo_v3` (`missing`,
    /// its error): the status alone, or `missing` for an active capture.
    #[cold]
    fn capture_without_info(
        &self,
        missing: cuda_hostcb::Error,
    ) -> Result<(sys::CUstreamCaptureStatus, u64, sys::CUgraph), Error> {
        use sys::CUstreamCaptureStatus as S;
        match self.status()? {
            CaptureStatus::None => Ok((S::CU_STREAM_CAPTURE_STATUS_NONE, 0, ptr::null_mut())),
            CaptureStatus::Invalidated => {
                Ok((S::CU_STREAM_CAPTURE_STATUS_INVALIDATED, 0, ptr::null_mut()))
            }
            CaptureStatus::Active => Err(missing.into()),
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned {
            let raw = Handle::new(self.raw);
            reaper::destroy(self.ctx.take(), move || {
                // SAFETY: we own the stream; CUDA finishes its pending work before freeing it.
                let _ = unsafe { sys::cuStreamDestroy(raw.into_inner()) };
            });
        }
    }
}
