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
//!   `cuStreamGetCaptureInfo` reports the capture active. So while `cuStreamGetCaptureInfo` reports the remembered id as active,
//!   the remembered arena is alive; a stale pair (its capture ended, its graph maybe destroyed)
//!   never matches again and is never dereferenced.
//! - Closures never move: a block is never reallocated, and a closure too large for a block
//!   gets a box of its own.
//!
//! Hand-written rather than a crate (e.g. `bumpalo`): besides placing closures it must record
//! each one's destructor and run them, containing panics, from a CUDA thread; that is most of
//! this file, and a bump allocator underneath would add a dependency to every user's build for
//! the few lines below.

use std::cell::Cell;
use std::ffi::c_void;
use std::mem::{MaybeUninit, align_of, size_of};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{self, NonNull};

use crate::callback::{HostFn, Inside, call_shared};
use crate::panic::{PanicStage, report};
use crate::reaper;

/// Bytes per block; a closure of more than a quarter of this gets a box of its own.
const BLOCK: usize = 4096;

/// One block, aligned for any closure up to 16-byte alignment (larger ones are boxed).
#[repr(C, align(16))]
struct Block([MaybeUninit<u8>; BLOCK]);

/// Closures captured into one graph by one thread; see the module documentation.
pub(crate) struct Arena {
    blocks: Vec<Box<Block>>,
    /// Bytes used in the last block.
    used: usize,
    /// Every closure's destructor and address, in capture order, in lists of [`DROPS`]
    /// entries that are never reallocated (so a push never copies the earlier ones).
    drops: Vec<Vec<Drop1>>,
}

/// A closure's destructor and address.
type Drop1 = (unsafe fn(*mut u8), *mut u8);

/// Entries per list of [`Arena::drops`].
const DROPS: usize = 256;

impl Arena {
    fn new() -> Arena {
        Arena {
            blocks: Vec::new(),
            used: BLOCK,
            drops: Vec::new(),
        }
    }

    /// Moves `f` into the arena; returns the host function that calls it and its user data,
    /// valid until the arena is dropped.
    #[inline]
    fn push<F: Fn() + Send + Sync + 'static>(&mut self, f: F) -> (HostFn, *mut c_void) {
        let place: *mut F = if size_of::<F>() == 0 {
            NonNull::<F>::dangling().as_ptr()
        } else if boxed::<F>() {
            Box::into_raw(Box::new(MaybeUninit::<F>::uninit())).cast()
        } else {
            self.place(size_of::<F>(), align_of::<F>()).cast()
        };
        // SAFETY: `place` is valid for writes of an `F`, aligned, and used by nothing else.
        unsafe { place.write(f) };
        let drops = match self.drops.last_mut() {
            Some(list) if list.len() < DROPS => list,
            _ => self.new_list(),
        };
        drops.push((drop_one::<F>, place.cast()));
        (call_shared::<F>, place.cast())
    }

    #[cold]
    #[inline(never)]
    fn new_list(&mut self) -> &mut Vec<Drop1> {
        self.drops.push(Vec::with_capacity(DROPS));
        self.drops.last_mut().expect("a list was pushed")
    }

    /// `size` bytes at `align` (at most a block's alignment) in the last block, or in a new one.
    #[inline]
    fn place(&mut self, size: usize, align: usize) -> *mut u8 {
        let mut start = self.used.next_multiple_of(align);
        if start + size > BLOCK {
            self.new_block();
            start = 0;
        }
        self.used = start + size;
        let block = self.blocks.last_mut().expect("a block was pushed");
        // SAFETY: `start + size <= BLOCK`, inside the block.
        unsafe { block.0.as_mut_ptr().add(start).cast() }
    }

    #[cold]
    #[inline(never)]
    fn new_block(&mut self) {
        self.blocks
            .push(Box::new(Block([MaybeUninit::uninit(); BLOCK])));
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for (drop, place) in self.drops.drain(..).flatten() {
            // SAFETY: each entry is a closure `push` wrote, dropped once, here.
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| unsafe { drop(place) })) {
                report(PanicStage::Drop, payload);
            }
        }
    }
}

/// Whether [`Arena::push`] gives an `F` a box of its own.
const fn boxed<F>() -> bool {
    size_of::<F>() > BLOCK / 4 || align_of::<F>() > align_of::<Block>()
}

/// Drops the `F` at `place` (and frees its box when it has one of its own).
///
/// # Safety
/// `place` holds an `F` that [`Arena::push`] wrote and nothing drops again.
unsafe fn drop_one<F>(place: *mut u8) {
    let place = place.cast::<F>();
    // SAFETY: by the contract.
    unsafe { ptr::drop_in_place(place) };
    if size_of::<F>() != 0 && boxed::<F>() {
        // SAFETY: `push` boxed this one; its value was dropped above.
        drop(unsafe { Box::from_raw(place.cast::<MaybeUninit<F>>()) });
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
