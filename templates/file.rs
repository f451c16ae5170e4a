// Template of one generated file (driver or runtime API of one CTK target). The generator fills
// __DOC__ (the module documentation) and appends the types and wrappers after these items; the
// `use` of the loading functions is kept only for the API the file covers.

#![doc = "__DOC__"]
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    unused_imports,
    clippy::missing_safety_doc,
    clippy::too_many_arguments,
    clippy::useless_transmute,
    clippy::unnecessary_cast,
    clippy::doc_lazy_continuation,
    clippy::doc_overindented_list_items,
    clippy::ptr_offset_with_cast,
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls
)]

use crate::error::Error;
use crate::load::{DriverFn, RuntimeFn, driver_result, runtime_result};
