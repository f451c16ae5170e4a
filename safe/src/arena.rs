//! The closures one thread captures into one graph (`Stream::launch_fn` on a capturing stream),
//! kept together and owned by one CUDA user object moved into that graph.
//!
//! Capturing a closure used to cost a heap allocation and a user object of its own (made, then
//! moved into the graph): most of a captured launch. Here the first closure a thread captures
//! into a capture sequence makes an [`Arena`] and its user object; the following ones (the same
//! capture sequence, found by its id through `cuStreamGetCaptureInfo`) are written into the
//! arena's blocks. The arena drops every closure once, when its user object's destructor runs:
//! after the graph, its clones, every executable made from them and every launch are gone.
//!
//! Why it is sound:
//! - Each thread remembers one (capture id, arena) pair and writes only into an arena it made
//!   itself, so an arena has one writer; a thread that captures into a graph another thread
//!   also captures into makes its own arena (and user object) for that graph.
//! - A capture id names one capture sequence for the life of the process (`cuda.h`: "an id for
//!   the capture sequence, which is unique over the lifetime of the process"), and the graph
//!   being captured, which holds the arena's user object, lives at least until the capture ends
//!   (`cuda.h`: "All operations other than destroy and node removal are permitted on the graph
//!   while the capture sequence is in progress"). A capture that an error invalidates may lose its
//!   graph early, but it never reports itself active again, and the arena is used only while
//!   `cuStreamGetCaptureInfo` reports the capture active. So while `cuStreamGetCaptureInfo`
//!   reports the remembered id as active, the remembered arena is alive; a stale pair (its
//!   capture ended, its graph maybe destroyed) never matches again and is never dereferenced.
//! - The window this tolerates: from that check to the closure's write and its
//!   `cuLaunchHostFunc`, the capture must stay active. No call of this crate can end it in
//!   between (a `Stream` is not `Sync`, and the check, the write and the launch are one call);
//!   another thread that ended it through the raw stream (`Stream::as_raw`) and destroyed its
//!   graph in that window would free the arena under the write, which is why a stream another
//!   thread launches into must not be ended behind its back (`Stream::borrow_raw`'s contract
//!   says the same of captures begun or joined).
//! - Closures never move: a block is never reallocated, and a closure too large for a block
//!   gets a box of its own. Each closure's record starts with its destructor, so the arena's
//!   drop walks the records in capture order and drops each closure once.
//!
//! Hand-written rather than a crate (e.g. `bumpalo`): besides placing closures it must record
//! each one's destructor and run them, containing panics, from a CUDA thread; that is most of
//! this file, and a bump allocator underneath would add a dependency to every user's build for
//! the few lines below.

use std::cell::Cell;
use std::ffi::c_void;
use std::mem::{MaybeUninit, align_of, size_of};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use crate::callback::HostFn;
use crate::inside::Inside;
use crate::panic::{PanicStage, report};
use crate::reaper;
use crate::shared::call_shared;

/// Bytes per block; a closure of more than a quarter of this gets a box of its own.
const BLOCK: usize = 4096;

/// One block, aligned for any closure up to 16-byte alignment (larger ones are boxed).
#[repr(C, align(16))]
struct Block([MaybeUninit<u8>; BLOCK]);

/// Closures captured into one graph by one thread; see the module documentation.
///
/// A block holds records, one per closure, back to back from offset 0, each 8-aligned: the
/// record's destructor (a [`DropRecord`]), then the closure (or, for a boxed one, its box),
/// padded to 8 bytes. Dropping the arena walks each block's records in capture order.
pub(crate) struct Arena {
    /// The last block's start (null before the first record).
    base: *mut u8,
    /// Bytes used in the last block (a multiple of 8; `BLOCK` before the first record).
    used: usize,
    /// Every block, oldest first, with the bytes its records use; the last one's count is
    /// `used`, kept up to date when the next block is made.
    blocks: Vec<(Box<Block>, usize)>,
}

/// A record's destructor: drops the closure of the record at `at` in `block` (and frees its
/// box when it has one) and returns the offset of the next record.
type DropRecord = unsafe fn(block: *mut u8, at: usize) -> usize;

/// Bytes of a record's header, its [`DropRecord`].
const HEADER: usize = size_of::<DropRecord>();

impl Arena {
    fn new() -> Arena {
        Arena {
            base: ptr::null_mut(),
            used: BLOCK,
            blocks: Vec::new(),
        }
    }

    /// Moves `f` into the arena; returns the host function that calls it and its user data,
    /// valid until the arena is dropped.
    #[inline]
    fn push<F: Fn() + Send + Sync + 'static>(&mut self, f: F) -> (HostFn, *mut c_void) {
        if boxed::<F>() {
            let place = Box::into_raw(Box::new(f));
            let payload = self.record(drop_boxed::<F>, Record::of::<*mut F>());
            // SAFETY: `record` reserved room for the box pointer, aligned.
            unsafe { payload.cast::<*mut F>().write(place) };
            (call_shared::<F>, place.cast())
        } else {
            let payload = self.record(drop_inline::<F>, Record::of::<F>());
            // SAFETY: `record` reserved room for an `F` there, aligned, used by nothing else.
            unsafe { payload.cast::<F>().write(f) };
            (call_shared::<F>, payload.cast())
        }
    }

    /// Writes the header of a record of `shape` with destructor `drop` at the end of the last
    /// block (or of a new one) and returns the address of its payload.
    #[inline]
    fn record(&mut self, drop: DropRecord, shape: Record) -> *mut u8 {
        let mut at = self.used;
        if at + shape.size > BLOCK {
            self.new_block();
            at = 0;
        }
        self.used = at + shape.size;
        // SAFETY: `at + shape.size <= BLOCK`: the record lies inside the last block, whose
        // start is `base`; `at` is 8-aligned, as the header needs.
        unsafe {
            self.base.add(at).cast::<DropRecord>().write(drop);
            self.base.add(at + shape.payload(at))
        }
    }

    #[cold]
    #[inline(never)]
    fn new_block(&mut self) {
        if let Some(last) = self.blocks.last_mut() {
            last.1 = self.used;
        }
        let mut block = Box::new(Block([MaybeUninit::uninit(); BLOCK]));
        self.base = block.0.as_mut_ptr().cast();
        self.used = 0;
        self.blocks.push((block, 0));
    }
}

/// Where a record's payload lies and how long the record is, for a payload type `P`.
#[derive(Clone, Copy)]
struct Record {
    /// Bytes of the whole record, a multiple of 8, for a record starting at an offset that is
    /// a multiple of the payload's alignment (the worst case when that alignment is 16 is
    /// `HEADER` more).
    size: usize,
    /// The payload's alignment.
    align: usize,
}

impl Record {
    const fn of<P>() -> Record {
        let align = align_of::<P>();
        // The padding between header and payload is at most `align - HEADER` past 8.
        let pad = align.saturating_sub(HEADER);
        Record {
            size: HEADER + pad + size_of::<P>().next_multiple_of(HEADER),
            align,
        }
    }

    /// The payload's offset from the start of the record at `at` (8-aligned) in its block.
    #[inline(always)]
    fn payload(self, at: usize) -> usize {
        if self.align <= HEADER {
            HEADER
        } else {
            (at + HEADER).next_multiple_of(self.align) - at
        }
    }
}

/// Whether [`Arena::push`] gives an `F` a box of its own.
const fn boxed<F>() -> bool {
    size_of::<F>() > BLOCK / 4 || align_of::<F>() > align_of::<Block>()
}

/// The [`DropRecord`] of a closure stored in its record.
///
/// # Safety
/// The record at `at` in `block` holds an `F` that [`Arena::push`] wrote and nothing drops
/// again.
unsafe fn drop_inline<F>(block: *mut u8, at: usize) -> usize {
    let shape = Record::of::<F>();
    // SAFETY: the record lies inside the block.
    let place = unsafe { block.add(at + shape.payload(at)) }.cast::<F>();
    // SAFETY: by the contract, the payload is an `F`, dropped once, here.
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| unsafe { ptr::drop_in_place(place) })) {
        report(PanicStage::Drop, payload);
    }
    at + shape.size
}

/// The [`DropRecord`] of a closure in a box of its own.
///
/// # Safety
/// The record at `at` in `block` holds the pointer of a `Box<F>` that [`Arena::push`] made and
/// nothing drops again.
unsafe fn drop_boxed<F>(block: *mut u8, at: usize) -> usize {
    let shape = Record::of::<*mut F>();
    // SAFETY: the record lies inside the block; its payload is the box's pointer.
    let place = unsafe { block.add(at + shape.payload(at)).cast::<*mut F>().read() };
    // SAFETY: by the contract, the box is dropped (and freed) once, here.
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(place) }))) {
        report(PanicStage::Drop, payload);
    }
    at + shape.size
}

impl Drop for Arena {
    fn drop(&mut self) {
        if let Some(last) = self.blocks.last_mut() {
            last.1 = self.used;
        }
        for (block, used) in &mut self.blocks {
            let (block, used) = (block.0.as_mut_ptr().cast::<u8>(), *used);
            let mut at = 0;
            while at < used {
                // SAFETY: records lie back to back from 0 up to `used`, so one starts at `at`;
                // its header is its destructor, which drops it (containing a panic) once, here,
                // and returns where the next one starts.
                at = unsafe { block.add(at).cast::<DropRecord>().read()(block, at) };
            }
        }
    }
}

/// The user-object destructor of an arena: hands it to the reaper, which drops its closures,
/// then the arena, on a program thread.
///
/// # Safety
/// `data` is an arena made by [`capture`]'s `make`, whose user object's count reached zero.
pub(crate) unsafe extern "C" fn drop_arena(data: *mut c_void) {
    let _inside = Inside::enter();
    // SAFETY: by the contract, the arena is ours to drop, once; its closures are `Send`.
    unsafe { reaper::drop_later(data, drop_arena_now) };
}

/// Drops an arena (each closure's drop panic reported by `Arena::drop`).
///
/// # Safety
/// `data` is an arena made by [`capture`]'s `make`, dropped once.
pub(crate) unsafe fn drop_arena_now(data: *mut c_void) {
    // SAFETY: by the contract.
    drop(unsafe { Box::from_raw(data.cast::<Arena>()) });
}

thread_local! {
    /// The capture sequence this thread last captured a closure into, and its arena.
    static CAPTURING: Cell<(u64, *mut Arena)> = const { Cell::new((0, ptr::null_mut())) };
}

/// Moves `f` into this thread's arena for the capture sequence `id`, making the arena first
/// (with `make`, which hands it to a user object moved into the graph being captured) when this
/// thread has none for `id`. Returns the host function and its user data.
///
/// # Safety
/// `id` is the id `cuStreamGetCaptureInfo` reports for a capture that is active now, and `make`
/// either makes the graph of that capture own the arena it is given (its destructor:
/// [`drop_arena`]) and returns `Ok`, or disposes of the arena (through that destructor) and
/// returns the error.
#[inline]
pub(crate) unsafe fn capture<F, E>(
    id: u64,
    f: F,
    make: impl FnOnce(*mut c_void) -> Result<(), E>,
) -> Result<(HostFn, *mut c_void), E>
where
    F: Fn() + Send + Sync + 'static,
{
    let (known, arena) = CAPTURING.get();
    let arena = if known == id && !arena.is_null() {
        arena
    } else {
        let arena = Box::into_raw(Box::new(Arena::new()));
        // On failure `make` has disposed of the arena; `f` is dropped here, uncalled.
        make(arena.cast())?;
        CAPTURING.set((id, arena));
        arena
    };
    // SAFETY: the capture `id` is active, so its graph and this thread's arena for it are alive,
    // and only this thread writes into it (see the module documentation).
    Ok(unsafe { (*arena).push(f) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    struct Tally(Arc<AtomicUsize>);
    impl Drop for Tally {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    #[test]
    fn closures_of_every_size_are_called_in_place_and_dropped_once() {
        let (calls, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut arena = Arena::new();
        let mut launched = Vec::new();
        for i in 0..3000 {
            let (c, t) = (Arc::clone(&calls), Tally(Arc::clone(&drops)));
            launched.push(match i % 3 {
                0 => arena.push(move || {
                    let _keep = &t;
                    c.fetch_add(1, SeqCst);
                }),
                1 => {
                    let big = [i as u8; 2000];
                    arena.push(move || {
                        let _keep = (&t, &big);
                        c.fetch_add(usize::from(big[1999] == i as u8), SeqCst);
                    })
                }
                _ => arena.push(move || {
                    let _keep = &t;
                    c.fetch_add(1, SeqCst);
                }),
            });
        }
        for _ in 0..2 {
            for (call, data) in &launched {
                // SAFETY: CUDA's call of a captured host function.
                unsafe { call(*data) };
            }
        }
        assert_eq!(calls.load(SeqCst), 6000);
        assert_eq!(drops.load(SeqCst), 0);
        // SAFETY: the destructor, once, as the user object calls it.
        unsafe { drop_arena(Box::into_raw(Box::new(arena)).cast()) };
        crate::wait_for_drops().unwrap();
        assert_eq!(drops.load(SeqCst), 3000, "by the reaper");
    }

    #[test]
    fn every_shape_of_record_is_walked_and_a_panicking_drop_is_reported() {
        use crate::panic::take_panic_hook;
        use crate::panic::tests::{HOOK_LOCK, recording_hook};

        #[repr(align(16))]
        struct Wide(#[allow(dead_code)] u8);
        struct Loud;
        impl Drop for Loud {
            fn drop(&mut self) {
                panic!("arena drop failure");
            }
        }

        let _guard = HOOK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let seen = recording_hook();
        let (calls, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut arena = Arena::new();
        let mut launched = Vec::new();
        let mut wide = Vec::new();
        // Interleaved so that the 16-aligned records start at both parities of 8 and cross
        // block ends; one closure in 50 panics when dropped.
        for i in 0..2000 {
            let (c, t) = (Arc::clone(&calls), Tally(Arc::clone(&drops)));
            launched.push(match i % 5 {
                0 => arena.push(|| {}),
                1 => {
                    let w = Wide(i as u8);
                    let (call, data) = arena.push(move || {
                        let _keep = (&t, &w);
                        c.fetch_add(1, SeqCst);
                    });
                    wide.push(data as usize);
                    (call, data)
                }
                2 => {
                    let byte = i as u8;
                    arena.push(move || {
                        let _keep = &t;
                        c.fetch_add(usize::from(byte == i as u8), SeqCst);
                    })
                }
                3 if i % 50 == 3 => {
                    let loud = Loud;
                    arena.push(move || {
                        let _keep = (&t, &loud);
                        c.fetch_add(1, SeqCst);
                    })
                }
                _ => arena.push(move || {
                    let _keep = &t;
                    c.fetch_add(1, SeqCst);
                }),
            });
        }
        assert!(arena.blocks.len() > 2, "the records cross blocks");
        assert!(
            wide.iter().all(|a| a % 16 == 0),
            "aligned closures are aligned"
        );
        for (call, data) in &launched {
            // SAFETY: CUDA's call of a captured host function.
            unsafe { call(*data) };
        }
        assert_eq!(calls.load(SeqCst), 1600);
        // The tallies the empty closures did not take were dropped in the loop.
        assert_eq!(drops.load(SeqCst), 400);
        // SAFETY: the destructor, once, as the user object calls it.
        unsafe { drop_arena(Box::into_raw(Box::new(arena)).cast()) };
        crate::wait_for_drops().unwrap();
        assert_eq!(
            drops.load(SeqCst),
            2000,
            "every closure's state is dropped once"
        );
        take_panic_hook();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 40, "each panicking drop is reported: {seen:?}");
        assert!(seen.iter().all(|(stage, text)| *stage == PanicStage::Drop
            && text.as_deref() == Some("arena drop failure")));
    }

    #[test]
    fn one_arena_per_capture_and_thread() {
        let made = AtomicUsize::new(0);
        let owned = std::cell::RefCell::new(Vec::new());
        let make = |arena: *mut c_void| {
            made.fetch_add(1, SeqCst);
            owned.borrow_mut().push(arena);
            Ok::<(), ()>(())
        };
        // SAFETY: the test stands in for the driver: ids 1001 and 1002 are "active".
        unsafe {
            let (x, y) = (1_u64, 2_u64);
            let (_, a) = capture(
                1001,
                move || {
                    std::hint::black_box(x);
                },
                make,
            )
            .unwrap();
            let (_, b) = capture(
                1001,
                move || {
                    std::hint::black_box(y);
                },
                make,
            )
            .unwrap();
            assert_eq!(made.load(SeqCst), 1);
            assert_ne!(a, b, "two closures, two places");
            capture(1002, || {}, make).unwrap();
            assert_eq!(made.load(SeqCst), 2, "a new capture, a new arena");
            let refuse = |arena: *mut c_void| {
                drop_arena(arena);
                Err(())
            };
            assert!(capture(1003, || {}, refuse).is_err());
            let (_, c) = capture(
                1001,
                move || {
                    std::hint::black_box(x);
                },
                make,
            )
            .unwrap();
            assert_eq!(
                made.load(SeqCst),
                3,
                "1001 is no longer this thread's last capture"
            );
            assert_ne!(c, a);
        }
        for arena in owned.into_inner() {
            // SAFETY: each arena's destructor, once.
            unsafe { drop_arena(arena) };
        }
    }
}
