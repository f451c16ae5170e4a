//! Owning wrappers of CUDA objects for any [`Binding`]: each is destroyed when dropped (a stream
//! is synchronised first), so a scenario cleans up on every path. A failed clean-up is recorded
//! and fails the trial ([`take_cleanup_errors`]).

use std::cell::RefCell;
use std::ffi::c_void;
use std::marker::PhantomData;

use crate::binding::{
    Binding, DevicePtr, HostFn, RawContext, RawEvent, RawExec, RawGraph, RawNode, RawStream,
    RawUserObject,
};
use crate::check::{During, Failure};

thread_local! {
    static CLEANUP_ERRORS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Notes a clean-up that failed on this thread.
fn cleanup(what: &str, result: Result<(), cuda_hostcb::Error>) {
    if let Err(e) = result {
        CLEANUP_ERRORS.with(|errors| errors.borrow_mut().push(format!("{what}: {e}")));
    }
}

/// Notes a clean-up step that failed outside this module (e.g. re-entering a device first).
pub fn note_cleanup_failure(failure: &Failure) {
    CLEANUP_ERRORS.with(|errors| errors.borrow_mut().push(failure.to_string()));
}

/// The clean-ups that failed on this thread since the last call, emptying the list.
pub fn take_cleanup_errors() -> Vec<String> {
    CLEANUP_ERRORS.with(|errors| std::mem::take(&mut *errors.borrow_mut()))
}

/// A device made usable on this thread ([`Binding::enter`]); left when dropped.
#[derive(Debug)]
pub struct Context<B: Binding> {
    raw: RawContext,
    device: usize,
    _binding: PhantomData<fn() -> B>,
}

impl<B: Binding> Context<B> {
    /// Enters `device` and makes it current on this thread.
    pub fn enter(device: usize) -> Result<Self, Failure> {
        let raw = B::enter(device).during(&format!("make device {device} current"))?;
        Ok(Self {
            raw,
            device,
            _binding: PhantomData,
        })
    }

    /// Makes this device current again (after another device was).
    pub fn make_current(&self) -> Result<(), Failure> {
        // SAFETY: `raw` comes from `enter(device)` and is left only on drop.
        unsafe { B::make_current(self.raw, self.device) }
            .during(&format!("make device {} current again", self.device))
    }

    /// The device ordinal.
    pub fn device(&self) -> usize {
        self.device
    }
}

impl<B: Binding> Drop for Context<B> {
    fn drop(&mut self) {
        // SAFETY: `raw` comes from `enter(device)`; it is not used after this.
        cleanup("leave the device", unsafe {
            B::leave(self.raw, self.device)
        });
    }
}

/// A non-blocking stream; synchronised, then destroyed, when dropped.
#[derive(Debug)]
pub struct Stream<B: Binding> {
    raw: RawStream,
    _binding: PhantomData<fn() -> B>,
}

impl<B: Binding> Stream<B> {
    /// Creates a stream in the current context.
    pub fn new() -> Result<Self, Failure> {
        let raw = B::stream_create().during("create a stream")?;
        Ok(Self {
            raw,
            _binding: PhantomData,
        })
    }

    /// The handle, e.g. to compare with what a callback saw.
    pub fn raw(&self) -> RawStream {
        self.raw
    }

    /// Waits for everything enqueued so far.
    pub fn sync(&self) -> Result<(), Failure> {
        // SAFETY: the stream is live.
        unsafe { B::stream_synchronize(self.raw) }.during("synchronise the stream")
    }

    /// Starts a thread-local capture, ended by [`Capture::end`].
    pub fn begin_capture(&self) -> Result<Capture<'_, B>, Failure> {
        // SAFETY: the stream is live and, being borrowed by no other capture, not capturing.
        unsafe { B::begin_capture(self.raw) }.during("begin the stream capture")?;
        Ok(Capture {
            stream: self,
            ended: false,
        })
    }

    /// Enqueues the host function `f(data)`.
    ///
    /// # Safety
    /// As for [`Binding::launch_host_func`].
    pub unsafe fn launch_host_func(&self, f: HostFn, data: *mut c_void) -> Result<(), Failure> {
        // SAFETY: the stream is live; the caller vouches for `f(data)`.
        unsafe { B::launch_host_func(self.raw, f, data) }.during("enqueue the host function")
    }

    /// Adds the binding's recording stream callback with `data`.
    ///
    /// # Safety
    /// As for [`Binding::add_recording_callback`].
    pub unsafe fn add_recording_callback(&self, data: *mut c_void) -> Result<(), Failure> {
        // SAFETY: the stream is live; the caller vouches for `data`.
        unsafe { B::add_recording_callback(self.raw, data) }.during("add the stream callback")
    }

    /// Sets every byte of `dst` to `value`.
    ///
    /// # Safety
    /// `dst` must outlive the work (declare it before the stream).
    pub unsafe fn memset(&self, dst: &DeviceBuffer<B>, value: u8) -> Result<(), Failure> {
        // SAFETY: `dst` holds `len` bytes and outlives the work.
        unsafe { B::memset_d8_async(dst.ptr, value, dst.len, self.raw) }
            .during("enqueue the memset")
    }

    /// Copies all of `src` to the start of `dst`.
    ///
    /// # Safety
    /// Both buffers must outlive the work (declare them before the stream).
    pub unsafe fn copy_to_host(
        &self,
        dst: &PinnedBuffer<B>,
        src: &DeviceBuffer<B>,
    ) -> Result<(), Failure> {
        let bytes = src.len.min(dst.len);
        // SAFETY: both hold `bytes` bytes and outlive the work.
        unsafe { B::copy_to_host_async(dst.ptr, src.ptr, bytes, self.raw) }
            .during("enqueue the device-to-host copy")
    }

    /// Copies all of `src` to the start of `dst`.
    ///
    /// # Safety
    /// Both buffers must outlive the work (declare them before the stream).
    pub unsafe fn copy_to_device(
        &self,
        dst: &DeviceBuffer<B>,
        src: &PinnedBuffer<B>,
    ) -> Result<(), Failure> {
        let bytes = src.len.min(dst.len);
        // SAFETY: both hold `bytes` bytes and outlive the work.
        unsafe { B::copy_to_device_async(dst.ptr, src.ptr, bytes, self.raw) }
            .during("enqueue the host-to-device copy")
    }

    /// Records `event` here.
    pub fn record(&self, event: &Event<B>) -> Result<(), Failure> {
        // SAFETY: both are live.
        unsafe { B::event_record(event.raw, self.raw) }.during("record the event")
    }
}

impl<B: Binding> Drop for Stream<B> {
    fn drop(&mut self) {
        // SAFETY: the stream is live; waiting first keeps host functions and buffers that
        // outlive the stream from being used after they are gone.
        unsafe {
            cleanup("synchronise the stream", B::stream_synchronize(self.raw));
            cleanup("destroy the stream", B::stream_destroy(self.raw));
        }
    }
}

/// A capture in progress; ended (and its graph destroyed) when dropped without [`Capture::end`].
#[derive(Debug)]
pub struct Capture<'s, B: Binding> {
    stream: &'s Stream<B>,
    ended: bool,
}

impl<B: Binding> Capture<'_, B> {
    /// Ends the capture, returning the graph.
    pub fn end(mut self) -> Result<Graph<B>, Failure> {
        self.ended = true;
        // SAFETY: the stream is capturing since `begin_capture`.
        let raw = unsafe { B::end_capture(self.stream.raw) }.during("end the stream capture")?;
        Ok(Graph::from_raw(raw))
    }
}

impl<B: Binding> Drop for Capture<'_, B> {
    fn drop(&mut self) {
        if !self.ended {
            // SAFETY: the stream is still capturing; the graph, if any, is ours.
            match unsafe { B::end_capture(self.stream.raw) } {
                Ok(graph) => drop(Graph::<B>::from_raw(graph)),
                Err(e) => cleanup("end an abandoned capture", Err(e)),
            }
        }
    }
}

/// A graph; destroyed when dropped, or by [`Graph::destroy`].
#[derive(Debug)]
pub struct Graph<B: Binding> {
    raw: RawGraph,
    _binding: PhantomData<fn() -> B>,
}

impl<B: Binding> Graph<B> {
    fn from_raw(raw: RawGraph) -> Self {
        Self {
            raw,
            _binding: PhantomData,
        }
    }

    /// Creates an empty graph.
    pub fn new() -> Result<Self, Failure> {
        B::graph_create()
            .during("create a graph")
            .map(Self::from_raw)
    }

    /// The graph's handle, for nodes this module has no method for (it stays owned here).
    pub fn raw(&self) -> RawGraph {
        self.raw
    }

    /// Instantiates an executable graph.
    pub fn instantiate(&self) -> Result<Exec<B>, Failure> {
        // SAFETY: the graph is live.
        let raw = unsafe { B::instantiate(self.raw) }.during("instantiate the graph")?;
        Ok(Exec {
            raw,
            _binding: PhantomData,
        })
    }

    /// Adds a host node `f(data)` with no dependencies.
    ///
    /// # Safety
    /// As for [`Binding::add_host_node`].
    pub unsafe fn add_host_node(&self, f: HostFn, data: *mut c_void) -> Result<RawNode, Failure> {
        // SAFETY: the graph is live; the caller vouches for `f(data)`.
        unsafe { B::add_host_node(self.raw, f, data) }.during("add the host node")
    }

    /// Moves the one reference the caller owns of `object` into the graph; on failure the
    /// reference is released.
    ///
    /// # Safety
    /// The caller owns one reference of `object` and gives it up.
    pub unsafe fn move_user_object(&self, object: RawUserObject) -> Result<(), Failure> {
        // SAFETY: the graph is live; the reference is the caller's.
        let moved = unsafe { B::graph_move_user_object(self.raw, object) };
        if moved.is_err() {
            // SAFETY: the reference was not moved, so it is still ours to release.
            cleanup("release the user object", unsafe {
                B::user_object_release(object)
            });
        }
        moved.during("move the user object into the graph")
    }

    /// Destroys the graph now, reporting failure.
    pub fn destroy(self) -> Result<(), Failure> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: the graph is live, and `self` no longer owns it.
        unsafe { B::graph_destroy(raw) }.during("destroy the graph")
    }
}

impl<B: Binding> Drop for Graph<B> {
    fn drop(&mut self) {
        // SAFETY: the graph is live.
        cleanup("destroy the graph", unsafe { B::graph_destroy(self.raw) });
    }
}

/// An executable graph; destroyed when dropped, or by [`Exec::destroy`].
#[derive(Debug)]
pub struct Exec<B: Binding> {
    raw: RawExec,
    _binding: PhantomData<fn() -> B>,
}

impl<B: Binding> Exec<B> {
    /// Launches the graph on `stream`.
    ///
    /// Safe because every host function in a graph was vouched for when it was added.
    pub fn launch(&self, stream: &Stream<B>) -> Result<(), Failure> {
        // SAFETY: both are live; the host functions' data outlive the stream's work.
        unsafe { B::graph_launch(self.raw, stream.raw) }.during("launch the graph")
    }

    /// Changes the host node `node` of this executable graph.
    ///
    /// # Safety
    /// As for [`Binding::exec_set_host_node_params`].
    pub unsafe fn set_host_node_params(
        &self,
        node: RawNode,
        f: HostFn,
        data: *mut c_void,
    ) -> Result<(), Failure> {
        // SAFETY: the exec is live; the caller vouches for the rest.
        unsafe { B::exec_set_host_node_params(self.raw, node, f, data) }
            .during("set the host node's parameters in the executable graph")
    }

    /// Destroys the executable graph now (CUDA defers it past pending launches).
    pub fn destroy(self) -> Result<(), Failure> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: the exec is live, and `self` no longer owns it.
        unsafe { B::exec_destroy(raw) }.during("destroy the executable graph")
    }
}

impl<B: Binding> Drop for Exec<B> {
    fn drop(&mut self) {
        // SAFETY: the exec is live.
        cleanup("destroy the executable graph", unsafe {
            B::exec_destroy(self.raw)
        });
    }
}

/// Device memory; freed when dropped.
#[derive(Debug)]
pub struct DeviceBuffer<B: Binding> {
    ptr: DevicePtr,
    len: usize,
    _binding: PhantomData<fn() -> B>,
}

impl<B: Binding> DeviceBuffer<B> {
    /// Allocates `len` bytes in the current context.
    pub fn new(len: usize) -> Result<Self, Failure> {
        let ptr = B::mem_alloc(len).during("allocate device memory")?;
        Ok(Self {
            ptr,
            len,
            _binding: PhantomData,
        })
    }

    /// The device address of the memory (it stays owned here).
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }
}

impl<B: Binding> Drop for DeviceBuffer<B> {
    fn drop(&mut self) {
        // SAFETY: ours, and no work uses it any more (its streams were synchronised).
        cleanup("free device memory", unsafe { B::mem_free(self.ptr) });
    }
}

/// Page-locked host memory, zeroed; freed when dropped. Read and written only with volatile
/// accesses, since copies and host functions touch it outside Rust's view.
#[derive(Debug)]
pub struct PinnedBuffer<B: Binding> {
    ptr: *mut c_void,
    len: usize,
    _binding: PhantomData<fn() -> B>,
}

impl<B: Binding> PinnedBuffer<B> {
    /// Allocates `len` bytes (at least 4) in the current context and zeroes them.
    pub fn new(len: usize) -> Result<Self, Failure> {
        let len = len.max(4);
        let ptr = B::host_alloc(len).during("allocate page-locked host memory")?;
        // SAFETY: `ptr` holds `len` bytes that nothing else uses yet.
        unsafe { ptr.cast::<u8>().write_bytes(0, len) };
        Ok(Self {
            ptr,
            len,
            _binding: PhantomData,
        })
    }

    /// The start of the memory, e.g. as user data of a host function.
    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: it holds at least 4 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads the first four bytes as a `u32`.
    pub fn read_u32(&self) -> u32 {
        // SAFETY: at least 4 bytes, page-aligned; volatile since a copy may have written it.
        unsafe { self.ptr.cast::<u32>().read_volatile() }
    }

    /// Writes the first four bytes as a `u32`.
    pub fn write_u32(&self, value: u32) {
        // SAFETY: as for `read_u32`.
        unsafe { self.ptr.cast::<u32>().write_volatile(value) }
    }
}

impl<B: Binding> Drop for PinnedBuffer<B> {
    fn drop(&mut self) {
        // SAFETY: ours, and no work uses it any more (its streams were synchronised).
        cleanup("free page-locked host memory", unsafe {
            B::host_free(self.ptr)
        });
    }
}

/// An event without timing; destroyed when dropped.
#[derive(Debug)]
pub struct Event<B: Binding> {
    raw: RawEvent,
    _binding: PhantomData<fn() -> B>,
}

impl<B: Binding> Event<B> {
    /// Creates an event in the current context.
    pub fn new() -> Result<Self, Failure> {
        let raw = B::event_create().during("create an event")?;
        Ok(Self {
            raw,
            _binding: PhantomData,
        })
    }

    /// Whether the work recorded before the event has completed.
    pub fn is_complete(&self) -> Result<bool, Failure> {
        // SAFETY: the event is live.
        unsafe { B::event_is_complete(self.raw) }.during("query the event")
    }
}

impl<B: Binding> Drop for Event<B> {
    fn drop(&mut self) {
        // SAFETY: the event is live.
        cleanup("destroy the event", unsafe { B::event_destroy(self.raw) });
    }
}
