//! A device's primary context, retained while any handle of it (or of a stream, graph or
//! executable made in it) lives, or a context someone else owns, borrowed.

use std::ffi::c_int;
use std::ptr;
use std::sync::{Arc, Mutex};

use crate::Error;
use crate::callback;
use crate::reaper::{self, CudaHandle, Handle};
use crate::sys;

// SAFETY: CUDA's opaque handles of the bindings: any thread may destroy them.
unsafe impl CudaHandle for sys::CUcontext {}
// SAFETY: as above.
unsafe impl CudaHandle for sys::CUstream {}
// SAFETY: as above.
unsafe impl CudaHandle for sys::CUevent {}
// SAFETY: as above.
unsafe impl CudaHandle for sys::CUgraph {}
// SAFETY: as above.
unsafe impl CudaHandle for sys::CUgraphExec {}

/// A retained primary context of one device; clones share the retain.
///
/// Dropping the last handle waits for the context's pending work (so every pending callback
/// runs and drops its closure), then releases the primary context.
#[derive(Debug, Clone)]
pub struct Context(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    raw: sys::CUcontext,
    device: sys::CUdevice,
    ordinal: usize,
    /// A retained primary context (released on drop), or a borrowed one (left alone).
    primary: bool,
    /// Completion events that are done and may be recorded again (see `completion.rs`).
    events: Mutex<Vec<sys::CUevent>>,
}

/// How many done completion events a context keeps for reuse; more are destroyed.
const POOLED_EVENTS: usize = 1024;

// SAFETY: a primary context may be used and released from any thread.
unsafe impl Send for Inner {}
// SAFETY: as above; `Inner` is immutable.
unsafe impl Sync for Inner {}

impl Context {
    /// How many CUDA devices the driver reports (after `cuInit`); fails when there is no
    /// driver.
    pub fn device_count() -> Result<usize, Error> {
        callback::enter("Context::device_count")?;
        let mut count: c_int = 0;
        // SAFETY: plain calls with a valid out-pointer.
        unsafe {
            sys::cuInit(0)?;
            sys::cuDeviceGetCount(&mut count)?;
        }
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// Retains the primary context of device `ordinal` (`0..device_count()`).
    pub fn primary(ordinal: usize) -> Result<Context, Error> {
        let count = Context::device_count()?;
        let index = c_int::try_from(ordinal)
            .ok()
            .filter(|_| ordinal < count)
            .ok_or(Error::NoSuchDevice { ordinal, count })?;
        let mut device: sys::CUdevice = 0;
        let mut raw: sys::CUcontext = ptr::null_mut();
        // SAFETY: valid out-pointers; the ordinal was checked against the device count.
        unsafe {
            sys::cuDeviceGet(&mut device, index)?;
            sys::cuDevicePrimaryCtxRetain(&mut raw, device)?;
        }
        Ok(Context(Arc::new(Inner {
            raw,
            device,
            ordinal,
            primary: true,
            events: Mutex::default(),
        })))
    }

    /// Wraps a context that someone else owns, e.g. a non-primary context another crate made
    /// with `cuCtxCreate` (or its primary context): streams, graphs and executables can then be
    /// made in it and closures added to them. Dropping the last handle leaves the context alone
    /// (no synchronisation, no release).
    ///
    /// # Safety
    /// `raw` is a valid context until the last handle of it, and every stream, graph and
    /// executable made through it, is gone; whoever owns it destroys it only after that.
    pub unsafe fn borrow_raw(raw: sys::CUcontext) -> Result<Context, Error> {
        callback::enter("Context::borrow_raw")?;
        let count = Context::device_count()?;
        let mut device: sys::CUdevice = 0;
        let mut popped: sys::CUcontext = ptr::null_mut();
        // SAFETY: the caller passes a valid context; it is popped again whatever the result.
        let asked = unsafe {
            sys::cuCtxPushCurrent(raw)?;
            let asked = sys::cuCtxGetDevice(&mut device);
            sys::cuCtxPopCurrent(&mut popped)?;
            asked
        };
        asked?;
        let mut ordinal = usize::MAX;
        for i in 0..count {
            let mut d: sys::CUdevice = 0;
            // SAFETY: a valid out-pointer and an ordinal below the device count.
            unsafe { sys::cuDeviceGet(&mut d, c_int::try_from(i).unwrap_or(c_int::MAX))? };
            if d == device {
                ordinal = i;
                break;
            }
        }
        Ok(Context(Arc::new(Inner {
            raw,
            device,
            ordinal,
            primary: false,
            events: Mutex::default(),
        })))
    }

    /// Whether this is a retained primary context ([`Context::primary`]) rather than a borrowed
    /// one ([`Context::borrow_raw`]).
    pub fn is_primary(&self) -> bool {
        self.0.primary
    }

    /// Makes this context the calling thread's current one (`cuCtxSetCurrent`); do it once on
    /// each thread that launches work.
    pub fn make_current(&self) -> Result<(), Error> {
        callback::enter("Context::make_current")?;
        // SAFETY: the context is retained while `self` lives.
        unsafe { sys::cuCtxSetCurrent(self.0.raw)? };
        Ok(())
    }

    /// Waits for all work of this context (`cuCtxSynchronize`), whatever thread it runs on.
    pub fn synchronize(&self) -> Result<(), Error> {
        callback::enter("Context::synchronize")?;
        let _current = self.push()?;
        // SAFETY: the context is current on this thread for the call.
        unsafe { sys::cuCtxSynchronize()? };
        Ok(())
    }

    /// The device ordinal this context belongs to.
    pub fn ordinal(&self) -> usize {
        self.0.ordinal
    }

    /// The device handle.
    pub fn device(&self) -> sys::CUdevice {
        self.0.device
    }

    /// The raw context; it stays valid while `self` lives.
    pub fn as_raw(&self) -> sys::CUcontext {
        self.0.raw
    }

    /// A completion event of this context: a done one from the pool, or a new one.
    pub(super) fn take_event(&self) -> Result<sys::CUevent, Error> {
        let pooled = self
            .0
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        match pooled {
            Some(event) => Ok(event),
            None => crate::completion::new_event(self.0.raw),
        }
    }

    /// Returns a completion event whose recorded work is done, for reuse; destroys it when the
    /// pool is full (later, inside a callback: a destruction like any handle's).
    pub(super) fn return_event(&self, event: sys::CUevent) {
        let mut pool = self.0.events.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOLED_EVENTS {
            pool.push(event);
            return;
        }
        drop(pool);
        self.destroy_event(event);
    }

    #[cold]
    #[inline(never)]
    fn destroy_event(&self, event: sys::CUevent) {
        let (event, raw) = (Handle::new(event), Handle::new(self.0.raw));
        reaper::destroy(self.clone(), move || {
            let mut popped: sys::CUcontext = ptr::null_mut();
            // SAFETY: a done event of this context, which the destruction's owner retains.
            unsafe {
                if sys::cuCtxPushCurrent(raw.into_inner()).is_ok() {
                    let _ = sys::cuEventDestroy(event.into_inner());
                    let _ = sys::cuCtxPopCurrent(&mut popped);
                }
            }
        });
    }

    /// Makes this context current on the calling thread until the guard drops.
    pub(super) fn push(&self) -> Result<Pushed, Error> {
        // SAFETY: the context is retained while `self` lives.
        unsafe { sys::cuCtxPushCurrent(self.0.raw)? };
        Ok(Pushed(()))
    }
}

/// A program's context handle runs the destructions that callbacks deferred before it goes, and
/// waits for those another thread is running, so that when it is the last one, they have given
/// back their retains and the release runs here and now, after them; and so that the owner of
/// a borrowed context may destroy it once the drop returns (`crate::protocol::deferral`).
impl Drop for Context {
    #[inline]
    fn drop(&mut self) {
        reaper::settle();
    }
}

/// Pops the context that [`Context::push`] pushed.
pub(super) struct Pushed(());

impl Drop for Pushed {
    fn drop(&mut self) {
        let mut popped: sys::CUcontext = ptr::null_mut();
        // SAFETY: this thread pushed a context that is still on top of its stack.
        let _ = unsafe { sys::cuCtxPopCurrent(&mut popped) };
    }
}

/// Pushes `ctx` (when there is one) for the life of the guard.
pub(super) fn push(ctx: Option<&Context>) -> Result<Option<Pushed>, Error> {
    ctx.map(Context::push).transpose()
}

impl Drop for Inner {
    fn drop(&mut self) {
        let events = std::mem::take(self.events.get_mut().unwrap_or_else(|e| e.into_inner()));
        let (raw, device, primary) = (Handle::new(self.raw), self.device, self.primary);
        if !primary && events.is_empty() {
            return;
        }
        let events = Handle::new(events);
        // The release: no destruction of this context's handles is left to run after it, since
        // each holds a retain (`crate::protocol::deferral`).
        reaper::destroy((), move || {
            let (raw, events) = (raw.into_inner(), events.into_inner());
            let mut popped: sys::CUcontext = ptr::null_mut();
            // SAFETY: the context is still retained (or, borrowed, still alive); the pooled
            // events are done and ours. Pending callbacks run before the release, so none
            // outlives the context.
            unsafe {
                if sys::cuCtxPushCurrent(raw).is_ok() {
                    for event in events {
                        let _ = sys::cuEventDestroy(event);
                    }
                    if primary {
                        let _ = sys::cuCtxSynchronize();
                    }
                    let _ = sys::cuCtxPopCurrent(&mut popped);
                }
                if primary {
                    let _ = sys::cuDevicePrimaryCtxRelease(device);
                }
            }
        });
    }
}
