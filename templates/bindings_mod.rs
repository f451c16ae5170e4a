// Template of the generated crate's src/bindings/mod.rs. The generator parses this file with syn
// and fills its placeholders, identifiers and words of string literals and doc comments spelled
// `__LIKE_THIS__`:
//   __EACH_TARGET__! { .. }  what the braces hold, once per target of generator/targets.txt,
//                    oldest first, with that target's
//     __CTK__ (e.g. 13.0), __MODULE__ (ctk_13_0), __FEATURE__ (its cargo feature, ctk-13-0),
//     __PART__ (its part of for_each_target!, __hostcb_target_ctk_13_0, which its mod.rs defines)
//   __NEWEST_TARGET__! { .. }  what the braces hold, once, with the newest target's values
//   __EACH_MAJOR__! { .. }  what the braces hold, once per CUDA major (12, 13), with __MAJOR__ and
//     __PART__ of the newest target of that major (of the newest target where none is)
//   __TARGETS__      the targets, spelled `12.9, 13.0 and 13.5`
//   __TABLE__        the compatibility table (writer::compatibility_table): its doc attribute
//                    becomes one per line of the table
// A placeholder the writer has no value for stops generation.

//! The generated bindings: one module per CUDA toolkit target of `generator/targets.txt`,
//! each behind its cargo feature, [`for_each_target!`](crate::for_each_target), and the
//! [`compatibility`] table of every function and target.

// The types whose definition every target shares, defined once (see the file).
pub mod common;

__EACH_TARGET__! {
    /// The bindings generated from the CTK __CTK__ headers (cargo feature `__FEATURE__`).
    #[cfg(feature = "__FEATURE__")]
    pub mod __MODULE__;

    // The stand-in for the part of for_each_target! that the target's mod.rs defines.
    #[doc(hidden)]
    #[cfg(not(feature = "__FEATURE__"))]
    #[macro_export]
    macro_rules! __PART__ {
        ($callback:ident) => {};
    }
}

/// Calls `$callback! { <module>, "<MAJOR.MINOR>", <runtime major>, [<capabilities>] }` once
/// for each target whose cargo feature is enabled, oldest first, e.g.
/// `$callback! { ctk_13_0, "13.0", 13, [] }`. The targets are those of
/// `generator/targets.txt` (__TARGETS__); the capabilities name what a target offers
/// beyond the common API: `host_func_v2` where the headers declare `cuLaunchHostFunc_v2`
/// and `cudaLaunchHostFunc_v2` (CTK 13.2 and later; their ABI version is 13010);
/// `capture_info_v3` where they declare `cuStreamGetCaptureInfo_v3` (CTK 12.3 and later);
/// `runtime_library` where the runtime declares `cudaLibraryLoadData`, `cudaLibraryGetKernel`
/// and `cudaLibraryUnload`, so it can load a kernel from PTX itself.
///
/// Code written once for every target (tests, the safe layer, benchmarks) expands through it,
/// so adding a target to the list reaches all of it.
#[macro_export]
macro_rules! for_each_target {
    ($callback:ident) => {
        __EACH_TARGET__! {
            $crate::__PART__!($callback);
        }
    };
}

pub mod compatibility {
    #![doc = "__TABLE__"]
}

__NEWEST_TARGET__! {
    /// Calls `$callback!` as [`for_each_target!`](crate::for_each_target) does, for the newest target of `generator/targets.txt` alone (now __CTK__, cargo feature `__FEATURE__`, which the feature `newest-target` enables), and only when its feature is enabled: for code that needs one target and should not name it.
    #[macro_export]
    macro_rules! newest_target {
        ($callback:ident) => {
            $crate::__PART__!($callback);
        };
    }

    /// Calls `$callback!` as [`for_each_target!`](crate::for_each_target) does, for the newest target of `generator/targets.txt` whose CUDA major version is the first argument (12 or 13), or the newest target where none is; only when its feature is enabled.
    #[macro_export]
    macro_rules! newest_target_of_major {
        __EACH_MAJOR__! {
            (__MAJOR__, $callback:ident) => {
                $crate::__PART__!($callback);
            };
        }
    }
}
