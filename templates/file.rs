// Template of one generated file (driver or runtime API of one CTK target). The generator parses
// this file with syn and fills its placeholders (identifiers and words of string literals spelled
// `__LIKE_THIS__`):
//   __DOC__          the module documentation (one doc attribute per line)
//   __Ret__          the API's status type: CUresult or cudaError_t
//   __API__          the API as crate::error::Api names it
//   __RESULT__       the API's result mapper: driver_result or runtime_result
//   __LOADER__       the loader items the API's entry points use
//   __ALL__          every entry point, `&name`, in name order
// It then puts one static per function into the `entry` module, before `ALL`, and appends the
// types and wrappers after these items. A placeholder the writer has no value for stops
// generation.

#![doc = "__DOC__"]
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    unused_imports,
    clippy::missing_safety_doc,
    clippy::too_many_arguments,
    clippy::type_complexity,
    clippy::useless_transmute,
    clippy::unnecessary_cast,
    clippy::ptr_offset_with_cast
)]

use crate::error::Error;
use crate::load::__RESULT__;

/// The entry points of this file's functions: one lazily resolved static per function, named
/// like it, whose type is the C signature of the function's declaration. That type is what
/// makes each wrapper's call through its entry point sound; [`ALL`](entry::ALL) lists every
/// entry point (to check what the installed CUDA provides, or which export each resolves to).
/// Each static names itself to its first-call stub through a marker type of its own
/// ([`crate::load::NamedEntry`]), which resolves it on the first
/// call and forwards that call's arguments unchanged (see [`crate::load::FirstCall`]).
pub mod entry {
    use super::*;
    use crate::load::{__LOADER__};

    /// Every entry point of this file, in name order.
    pub static ALL: &[&dyn Entry] = &[__ALL__];
}

// The API's status type is what the first-call stubs return (crate::load::Status). It is built
// with its own constructor, `Self(raw)`, which compiles only while bindgen emits it as a newtype
// of `c_uint`, for which every value (the stubs' UNRESOLVED included) is valid.
impl crate::load::StatusSealed for __Ret__ {}
impl crate::load::Status for __Ret__ {
    #[inline(always)]
    fn from_raw(raw: u32) -> Self {
        Self(raw)
    }
}

// The status type names the error a function returned: `error.is(__Ret__::<name>)`.
impl crate::error::Code for __Ret__ {
    const API: crate::error::Api = __API__;
    #[inline(always)]
    fn value(self) -> u32 {
        self.0
    }
}
