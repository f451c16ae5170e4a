//! The checking half of the layout oracle (hand-written; compiled only for this crate's own
//! tests). Each target's sealed `bindings/<target>/layout.rs` holds, for every struct, union and
//! enum of its bindings, the numbers gcc computed from the same pinned headers (written by
//! `cargo xtask regen`, see `generator/src/layout.rs`), each in a row beside the Rust expression
//! that must equal it; [`report`] compares them, prints the counts and fails listing every
//! mismatch.

/// One number: what it is, what gcc computed, and what rustc computes.
pub(crate) struct Row {
    pub(crate) what: &'static str,
    pub(crate) gcc: usize,
    pub(crate) rustc: usize,
}

/// The size of the type a pointer points to: a field's size without naming the field's type.
pub(crate) const fn pointee_size<F>(_: *const F) -> usize {
    size_of::<F>()
}

/// `size!(module::Type, gcc)`: the type's size.
macro_rules! size {
    ($m:ident :: $t:ident, $gcc:literal) => {
        $crate::layout_check::Row {
            what: concat!(stringify!($t), ": size"),
            gcc: $gcc,
            rustc: ::core::mem::size_of::<$m::$t>(),
        }
    };
}

/// `align!(module::Type, gcc)`: the type's alignment.
macro_rules! align {
    ($m:ident :: $t:ident, $gcc:literal) => {
        $crate::layout_check::Row {
            what: concat!(stringify!($t), ": align"),
            gcc: $gcc,
            rustc: ::core::mem::align_of::<$m::$t>(),
        }
    };
}

/// `offset!(module::Type, field.path, gcc)`: a field's offset, through anonymous members.
macro_rules! offset {
    ($m:ident :: $t:ident, $($f:ident).+, $gcc:literal) => {
        $crate::layout_check::Row {
            what: concat!(stringify!($t), "::", stringify!($($f).+), ": offset"),
            gcc: $gcc,
            rustc: ::core::mem::offset_of!($m::$t, $($f).+),
        }
    };
}

/// `field_size!(module::Type, field.path, gcc)`: a field's size.
macro_rules! field_size {
    ($m:ident :: $t:ident, $($f:ident).+, $gcc:literal) => {
        $crate::layout_check::Row {
            what: concat!(stringify!($t), "::", stringify!($($f).+), ": size"),
            gcc: $gcc,
            // SAFETY: only the field's address is taken, in an uninitialised value; nothing
            // is read.
            rustc: $crate::layout_check::pointee_size(unsafe {
                &raw const (*::core::mem::MaybeUninit::<$m::$t>::uninit().as_ptr()).$($f).+
            }),
        }
    };
}

pub(crate) use {align, field_size, offset, size};

/// What one API's rows cover, as the generator counted it.
pub(crate) struct Counts {
    pub(crate) structs: usize,
    pub(crate) unions: usize,
    pub(crate) enums: usize,
    pub(crate) fields: usize,
    pub(crate) skipped: usize,
}

/// Compares every row of one API of `ctk`, prints one `layout:` line with the counts (what
/// `cargo xtask layout` collects), and fails listing every mismatch.
pub(crate) fn report(ctk: &str, api: &str, rows: &[Row], counts: Counts) {
    let Counts {
        structs,
        unions,
        enums,
        fields,
        skipped,
    } = counts;
    let mismatches: Vec<String> = rows
        .iter()
        .filter(|r| r.gcc != r.rustc)
        .map(|r| format!("  {}: gcc {}, rustc {}", r.what, r.gcc, r.rustc))
        .collect();
    println!(
        "layout: CTK {ctk} {api}: {structs} structs, {unions} unions, {enums} enums, {fields} fields, {} numbers, {} mismatches, {skipped} skipped",
        rows.len(),
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "CTK {ctk} {api}: {} of {} layout numbers differ between gcc and rustc:\n{}",
        mismatches.len(),
        rows.len(),
        mismatches.join("\n")
    );
}
