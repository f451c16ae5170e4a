//! Which CUDA version first declares each runtime function, and each driver ABI, read from the
//! headers of every pinned target of one major.
//!
//! The driver API carries most of its own history: each declaration has a
//! `PFN_<name>_v<version>` typedef in `cudaTypedefs.h`, and that version is what
//! `cuGetProcAddress` takes (the reader refuses a driver function without one). Most often a
//! driver of that version has that ABI, but not always: `PFN_cuLaunchHostFunc_v13010` first
//! appears in 13.2's `cudaTypedefs.h`, and a 13.1 driver asked for `cuLaunchHostFunc` at 13010
//! hands back the three-argument function. So the conservative rule for the driver a function
//! needs is the CUDA version of the first pinned `cudaTypedefs.h` of the major that declares its
//! typedef, where that is newer than the ABI version ([`History::driver`]). The runtime has none: `libcudart` exports carry no
//! ABI version, and a function's driver counterpart says nothing about the runtime library
//! (`cuLibraryLoadData` is 12.0, `cudaLibraryLoadData` first appears in the 12.8 runtime). The
//! only source for "which runtime do I need" is the first pinned header of the major that
//! declares the function, so the generator reads `cuda_runtime_api.h` of every pinned target of
//! the major up to the one it writes (each from its hash-checked wheel; see
//! [`crate::inputs::Inputs::gather`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use crate::Ctk;

/// The names each header of one major declares, oldest target first: runtime functions (from
/// `cuda_runtime_api.h`, [`History::runtime`]) or driver ABIs (the `PFN_` typedefs of
/// `cudaTypedefs.h`, [`History::driver`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    headers: Vec<(Ctk, BTreeSet<String>)>,
}

/// A `PFN_` typedef of `cudaTypedefs.h`: `typedef CUresult (CUDAAPI *PFN_cuInit_v2000)(...)`.
static TYPEDEF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\(\s*CUDAAPI\s*\*\s*(PFN_[A-Za-z0-9_]+)\s*\)").expect("the pattern is valid")
});

/// A runtime declaration: `extern __host__ ... <type> [CUDARTAPI] cudaName(`, the name being the
/// identifier right before the statement's first parenthesis. Most carry the `CUDARTAPI`
/// calling-convention macro, some do not (12.9's `cudaGetFuncBySymbol`); `extern "C" {` opens a
/// block, not a declaration.
static DECLARATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?m)^[ \t]*extern[ \t\n][^;(){}"]*?\b(cuda[A-Za-z0-9_]*)[ \t\n]*\("#)
        .expect("the pattern is valid")
});

impl History {
    /// The runtime history of the given `(target, cuda_runtime_api.h text)` pairs, in any order.
    pub fn runtime<'a>(headers: impl IntoIterator<Item = (Ctk, &'a str)>) -> Self {
        Self::of(headers, declarations)
    }

    /// The driver history of the given `(target, cudaTypedefs.h text)` pairs, in any order: the
    /// `PFN_<base>_v<version>` typedefs each declares (its `_ptds`/`_ptsz` twins included).
    pub fn driver<'a>(headers: impl IntoIterator<Item = (Ctk, &'a str)>) -> Self {
        Self::of(headers, typedefs)
    }

    fn of<'a>(
        headers: impl IntoIterator<Item = (Ctk, &'a str)>,
        names: fn(&str) -> BTreeSet<String>,
    ) -> Self {
        let mut headers: Vec<(Ctk, BTreeSet<String>)> = headers
            .into_iter()
            .map(|(ctk, text)| (ctk, names(text)))
            .collect();
        headers.sort_by_key(|(ctk, _)| *ctk);
        History { headers }
    }

    /// The oldest target whose header declares `function` (a runtime function, or a driver
    /// ABI's typedef name `PFN_<base>_v<version>`), if any does.
    pub fn first(&self, function: &str) -> Option<Ctk> {
        self.headers
            .iter()
            .find(|(_, declared)| declared.contains(function))
            .map(|(ctk, _)| *ctk)
    }

    /// The targets read, oldest first.
    pub fn targets(&self) -> impl Iterator<Item = Ctk> + '_ {
        self.headers.iter().map(|(ctk, _)| *ctk)
    }
}

/// A rename of a declaration to a newer ABI symbol: `#define cudaGetDeviceProperties
/// cudaGetDeviceProperties_v2`, or `#define cudaStreamGetCaptureInfo
/// __CUDART_API_PTSZ(cudaStreamGetCaptureInfo_v2)`. The declaration `cudaX(...)` then declares the
/// export `cudaX_v2`, the name bindgen gives it (and the model's).
static RENAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?m)^[ \t]*#[ \t]*define[ \t]+(cuda[A-Za-z0-9_]*)[ \t]+(?:__CUDART_API_PT(?:DS|SZ)\([ \t]*)?(cuda[A-Za-z0-9_]*_v[0-9]+)\b",
    )
    .expect("the pattern is valid")
});

/// The `PFN_` typedefs a `cudaTypedefs.h` declares.
pub fn typedefs(text: &str) -> BTreeSet<String> {
    TYPEDEF
        .captures_iter(text)
        .map(|c| c[1].to_owned())
        .collect()
}

/// The runtime functions a `cuda_runtime_api.h` declares, under the exports they declare: the
/// declared name, or the `_vN` symbol a rename macro maps it to (the per-thread macros rename
/// calls to `_ptds`/`_ptsz` twins of the same function, which keep its name here).
pub fn declarations(text: &str) -> BTreeSet<String> {
    let renames: BTreeMap<&str, &str> = RENAME
        .captures_iter(text)
        .filter_map(|c| {
            let (from, to) = (c.get(1)?.as_str(), c.get(2)?.as_str());
            (from != to).then_some((from, to))
        })
        .collect();
    DECLARATION
        .captures_iter(text)
        .map(|c| {
            let name = &c[1];
            renames.get(name).copied().unwrap_or(name).to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "/** \\sa ::cudaLibraryLoadData */\n\
        extern __host__ cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size);\n\
        extern __CUDA_DEPRECATED __host__ __cudart_builtin__ cudaError_t CUDARTAPI\n  cudaThreadExit(void);\n\
        #define cudaGetDeviceProperties cudaGetDeviceProperties_v2\n\
        #define cudaStreamGetCaptureInfo       __CUDART_API_PTSZ(cudaStreamGetCaptureInfo_v2)\n\
            #define cudaMemcpy                     __CUDART_API_PTDS(cudaMemcpy)\n\
        extern __host__ cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);\n\
        extern __host__ cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(cudaStream_t stream);\n\
        extern __host__ cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t count);\n";
    const NEW: &str = "extern __host__ cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size);\n\
        extern __host__ cudaError_t CUDARTAPI cudaLibraryLoadData(cudaLibrary_t *library);\n\
        extern \"C\" {\n/** ::cudaInDoc(x) */\n\
        extern __host__ cudaError_t cudaGetFuncBySymbol(cudaFunction_t* functionPtr);\n";

    #[test]
    fn the_first_declaring_header_wins_whatever_the_order() {
        let history = History::runtime([(Ctk::new(12, 8), NEW), (Ctk::new(12, 0), OLD)]);
        assert_eq!(history.first("cudaMalloc"), Some(Ctk::new(12, 0)));
        // Named in a comment of 12.0, declared in 12.8; declared without CUDARTAPI.
        assert_eq!(history.first("cudaGetFuncBySymbol"), Some(Ctk::new(12, 8)));
        assert_eq!(history.first("cudaInDoc"), None);
        assert_eq!(history.first("cudaLibraryLoadData"), Some(Ctk::new(12, 8)));
        // Removed later: still first declared in 12.0.
        assert_eq!(history.first("cudaThreadExit"), Some(Ctk::new(12, 0)));
        assert_eq!(history.first("cudaNoSuchFunction"), None);
        // Renamed to a newer export: the export is what the header declares.
        assert_eq!(
            history.first("cudaGetDeviceProperties_v2"),
            Some(Ctk::new(12, 0))
        );
        assert_eq!(history.first("cudaGetDeviceProperties"), None);
        assert_eq!(
            history.first("cudaStreamGetCaptureInfo_v2"),
            Some(Ctk::new(12, 0))
        );
        // A per-thread twin keeps the function's name.
        assert_eq!(history.first("cudaMemcpy"), Some(Ctk::new(12, 0)));
        assert_eq!(
            history.targets().collect::<Vec<_>>(),
            [Ctk::new(12, 0), Ctk::new(12, 8)]
        );
    }

    #[test]
    fn a_driver_abi_is_first_declared_where_its_typedef_first_appears() {
        let old = "typedef CUresult (CUDAAPI *PFN_cuLaunchHostFunc_v10000)(CUstream hStream, CUhostFn fn, void *userData);\n\
            typedef CUresult (CUDAAPI *PFN_cuLaunchHostFunc_v10000_ptsz)(CUstream hStream, CUhostFn fn, void *userData);\n";
        let new = "typedef CUresult (CUDAAPI *PFN_cuLaunchHostFunc_v10000)(CUstream hStream, CUhostFn fn, void *userData);\n\
            typedef CUresult ( CUDAAPI * PFN_cuLaunchHostFunc_v13010 )(CUstream hStream, CUhostFn fn, void *userData, unsigned int syncMode);\n";
        let history = History::driver([(Ctk::new(13, 2), new), (Ctk::new(13, 1), old)]);
        assert_eq!(
            history.first("PFN_cuLaunchHostFunc_v10000"),
            Some(Ctk::new(13, 1))
        );
        assert_eq!(
            history.first("PFN_cuLaunchHostFunc_v10000_ptsz"),
            Some(Ctk::new(13, 1))
        );
        assert_eq!(
            history.first("PFN_cuLaunchHostFunc_v13010"),
            Some(Ctk::new(13, 2))
        );
        assert_eq!(history.first("PFN_cuLaunchHostFunc_v13020"), None);
    }
}
