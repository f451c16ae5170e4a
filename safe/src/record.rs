//! The heap records of one-shot closures (the cells a stream callback or a guarded host function
//! owns), allocated with the C library's `malloc` and freed with its `free`, as a C caller's
//! record is.
//!
//! Written out rather than `Box`: Rust's global allocator reaches `malloc` through two shims
//! (`__rust_alloc` → `__rdl_alloc`, which also tests the alignment) and `free` through two more,
//! 13 instructions per closure over the C caller's (the CPU bench's `safe_stream_launch`, whose
//! target is 1.3× C doing the same work). Only the record's own memory comes from here: it is
//! never seen by the program, and whatever the closure owns was allocated, and is freed, by its
//! own allocator. A type aligned beyond what `malloc` guarantees for its size goes through `Box`,
//! as Rust's system allocator decides it.

use std::ffi::c_void;
use std::ptr;

unsafe extern "C" {
    // The C library's, which the standard library links on every target this crate builds for.
    fn malloc(size: usize) -> *mut c_void;
    fn free(data: *mut c_void);
}

/// The alignment `malloc` guarantees on 64-bit glibc: 2 × `sizeof(size_t)`.
const MALLOC_ALIGN: usize = 2 * size_of::<usize>();

/// Whether a `T` goes through `malloc` (the rule of Rust's system allocator: an alignment no
/// larger than `malloc`'s, nor than the size), else through `Box`.
const fn by_malloc<T>() -> bool {
    align_of::<T>() <= MALLOC_ALIGN && align_of::<T>() <= size_of::<T>()
}

/// Moves `value` to the heap; [`free_record`] drops and frees it.
#[inline]
pub(crate) fn new<T>(value: T) -> *mut T {
    if !by_malloc::<T>() {
        return Box::into_raw(Box::new(value));
    }
    // SAFETY: a non-zero size (`by_malloc` needs `size >= align >= 1`).
    let data = unsafe { malloc(size_of::<T>()) }.cast::<T>();
    if data.is_null() {
        std::alloc::handle_alloc_error(std::alloc::Layout::new::<T>());
    }
    // SAFETY: `data` is valid for writes of a `T`, aligned (`by_malloc`).
    unsafe { data.write(value) };
    data
}

/// Drops the `T` behind `data` and frees its memory (also when its drop panics).
///
/// # Safety
/// `data` comes from [`new`] for this `T` and is dropped once.
#[inline]
pub(crate) unsafe fn free_record<T>(data: *mut T) {
    if !by_malloc::<T>() {
        // SAFETY: `new` boxed it.
        drop(unsafe { Box::from_raw(data) });
        return;
    }
    /// Frees the memory once the value is dropped, or while a panic of its drop unwinds.
    struct Free(*mut c_void);
    impl Drop for Free {
        fn drop(&mut self) {
            // SAFETY: `malloc`'s, freed once.
            unsafe { free(self.0) }
        }
    }
    let _free = Free(data.cast());
    // SAFETY: the caller's contract: a live `T`, dropped once.
    unsafe { ptr::drop_in_place(data) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[repr(align(64))]
    struct Wide(#[allow(dead_code)] [u8; 64]);

    #[test]
    fn records_hold_their_values_and_drop_them_once() {
        let value = Arc::new(7);
        let record = new((Arc::clone(&value), 1u8));
        // SAFETY: just made.
        assert_eq!(*unsafe { &(*record).0 }.as_ref(), 7);
        assert_eq!(Arc::strong_count(&value), 2);
        // SAFETY: made by `new`, dropped once.
        unsafe { free_record(record) };
        assert_eq!(Arc::strong_count(&value), 1);
        assert!(by_malloc::<(Arc<i32>, u8)>());
        assert!(!by_malloc::<Wide>());
        let wide = new(Wide([1; 64]));
        assert_eq!(wide as usize % 64, 0);
        // SAFETY: as above.
        unsafe { free_record(wide) };
    }
}
