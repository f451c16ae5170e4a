// Template of each target's layout.rs, the layout oracle's test module (see
// generator/src/layout.rs). The generator parses this file with syn and fills its placeholders,
// identifiers and words of string literals and doc comments spelled `__LIKE_THIS__`:
//   __CTK__          the target, e.g. 13.0
//   __SKIPPED__      the list of what is not checked, and why: its doc attribute becomes one
//                    per line of the list (none where nothing is skipped)
//   __EACH_API__! { .. }  what the braces hold, once per API (driver, then runtime), with its
//     __API__ (driver), __ROWS__ (the name of its rows, DRIVER), __TEST__ (the name of its test),
//     __ROW_LIST__ (gcc's numbers, each in a `size!`, `align!`, `offset!` or `field_size!` row),
//     __STRUCTS__, __UNIONS__, __ENUMS__, __FIELDS__, __SKIPPED_COUNT__ (what it covers),
//     __IF_ROWS__! { .. } (what the braces hold, once where the API has a row, else not at all)
// A placeholder the writer has no value for stops generation.

//! The layout oracle of CTK __CTK__: for every struct, union and enum of `driver` and
//! `runtime`, the size, alignment, field offsets and field sizes gcc computes from the same
//! pinned headers (written by `cargo xtask regen`, see `generator/src/layout.rs`), each beside
//! the Rust expression that must equal it; `crate::layout_check` compares them when
//! `cargo test -p cuda-hostcb --all-features` runs (the crate's users never compile this).
#![doc = "__SKIPPED__"]

use crate::layout_check::{Counts, Row, align, field_size, offset, report, size};

__EACH_API__! {
    __IF_ROWS__! {
        use super::__API__;
    }
    /// gcc's number and rustc's for every size, alignment, field offset and field size.
    const __ROWS__: &[Row] = &[__ROW_LIST__];
}

__EACH_API__! {
    #[test]
    fn __TEST__() {
        let counts = Counts {
            structs: __STRUCTS__,
            unions: __UNIONS__,
            enums: __ENUMS__,
            fields: __FIELDS__,
            skipped: __SKIPPED_COUNT__,
        };
        report("__CTK__", "__API__", __ROWS__, counts);
    }
}
