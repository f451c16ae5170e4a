// Template of each target's mod.rs (generated/src/bindings/ctk_<major>_<minor>/mod.rs). The
// generator parses this file with syn and fills its placeholders, identifiers and words of string
// literals and doc comments spelled `__LIKE_THIS__`, for each target:
//   __CTK__          the target, e.g. 13.0;  __MODULE__  its module, ctk_13_0
//   __MAJOR__        its CUDA major (12 or 13);  __SONAME__  its runtime library, libcudart.so.13
//   __PART__         the name of its part of for_each_target!, __hostcb_target_ctk_13_0
//   __CAPABILITIES__ what it offers beyond the common API (writer::capabilities), e.g.
//                    `capture_info_v3 runtime_library`
//   __MACHINE__      the #[cfg] predicate of the machines whose C layout the layout oracle computed
// A placeholder the writer has no value for stops generation.

//! The bindings generated from the CTK __CTK__ headers: `driver` (`libcuda.so.1`) and `runtime` (`__SONAME__`).

#[rustfmt::skip]
pub mod driver;
#[rustfmt::skip]
pub mod runtime;

/// This target's part of [`for_each_target!`](crate::for_each_target): `$callback! { __MODULE__, "__CTK__", __MAJOR__, [..] }`.
#[doc(hidden)]
#[macro_export]
macro_rules! __PART__ {
    ($callback:ident) => {
        $callback! { __MODULE__, "__CTK__", __MAJOR__, [__CAPABILITIES__] }
    };
}

/// gcc's layout of every type against rustc's (a test module; see the file).
#[cfg(all(test, __MACHINE__))]
#[rustfmt::skip]
mod layout;
