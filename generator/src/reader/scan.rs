//! What the headers declare, read through libclang directly rather than through bindgen: each
//! function's name and whether it carries a deprecation attribute (bindgen drops
//! `__CUDA_DEPRECATED`, which is `__attribute__((deprecated))` under clang), and the named types
//! and every field (with the members of anonymous structs and unions) of each struct and union.
//!
//! The reader uses it to attach `#[deprecated]`, to count what a header declares against what
//! the bindings hold, and to check that bindgen's output has every field the header declares.
//! It is a second parse of the same wrapper header with the same arguments (libclang, already
//! loaded by bindgen; about a third of bindgen's own time, function bodies skipped).

// libclang's own C names (`CXCursor_FieldDecl`), as clang-sys spells them.
#![allow(non_upper_case_globals)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_ulong};
use std::ptr;

use clang_sys::*;

/// What one parse found in the files of interest.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// Every function declared in the function header, by its declared name (after the
    /// header's renaming macros), with whether it is deprecated.
    pub functions: BTreeMap<String, bool>,
    /// Every named type (typedef, struct, union, enum) declared in the bound files.
    pub types: BTreeSet<String>,
    /// For each named struct or union of the bound files, its fields in order, the members of
    /// anonymous structs and unions spelled `<member>` too (as C code reaches them).
    pub fields: BTreeMap<String, Vec<String>>,
    /// Every object-like macro defined in the bound files.
    pub macros: BTreeSet<String>,
}

/// Why a scan failed.
#[derive(Debug)]
pub struct ScanError(pub String);

struct Visit<'a> {
    function_header: &'a str,
    bound: &'a [&'a str],
    scan: Scan,
}

fn string(s: CXString) -> String {
    // SAFETY: a CXString from libclang; disposed once, after copying.
    unsafe {
        let text = clang_getCString(s);
        let out = if text.is_null() {
            String::new()
        } else {
            CStr::from_ptr(text).to_string_lossy().into_owned()
        };
        clang_disposeString(s);
        out
    }
}

/// The file name (last path component) a cursor was expanded in.
fn file_of(c: CXCursor) -> String {
    let mut file: CXFile = ptr::null_mut();
    // SAFETY: out-pointers are valid; a null file yields an empty name.
    unsafe {
        let loc = clang_getCursorLocation(c);
        clang_getExpansionLocation(
            loc,
            &mut file,
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
        );
        if file.is_null() {
            return String::new();
        }
        let name = string(clang_getFileName(file));
        name.rsplit(['/', '\\']).next().unwrap_or("").to_owned()
    }
}

/// The fields of a record cursor, anonymous members' fields inlined.
fn record_fields(record: CXCursor) -> Vec<String> {
    extern "C" fn visit(c: CXCursor, _: CXCursor, data: CXClientData) -> CXChildVisitResult {
        // SAFETY: `data` is the `Vec` passed below; libclang calls back on this thread.
        let out = unsafe { &mut *data.cast::<Vec<String>>() };
        // SAFETY: plain queries of a live cursor.
        unsafe {
            match clang_getCursorKind(c) {
                CXCursor_FieldDecl => {
                    let name = string(clang_getCursorSpelling(c));
                    if !name.is_empty() {
                        out.push(name);
                    } else {
                        // An unnamed field: a C11 anonymous member; its fields are the record's.
                        let decl = clang_getTypeDeclaration(clang_getCursorType(c));
                        out.extend(record_fields(decl));
                    }
                }
                CXCursor_StructDecl | CXCursor_UnionDecl
                    if clang_Cursor_isAnonymousRecordDecl(c) != 0 =>
                {
                    out.extend(record_fields(c));
                }
                _ => {}
            }
        }
        CXChildVisit_Continue
    }
    let mut out = Vec::new();
    // SAFETY: the visitor only touches `out`, which outlives the call.
    unsafe { clang_visitChildren(record, visit, ptr::from_mut(&mut out).cast()) };
    out.dedup();
    out
}

extern "C" fn visit_top(c: CXCursor, _: CXCursor, data: CXClientData) -> CXChildVisitResult {
    // SAFETY: `data` is the `Visit` passed by `scan`; libclang calls back on this thread.
    let v = unsafe { &mut *data.cast::<Visit<'_>>() };
    // SAFETY: plain queries of a live cursor.
    let kind = unsafe { clang_getCursorKind(c) };
    let file = file_of(c);
    if !v.bound.contains(&file.as_str()) {
        return CXChildVisit_Continue;
    }
    // SAFETY: as above.
    let name = string(unsafe { clang_getCursorSpelling(c) });
    match kind {
        // SAFETY: as above.
        CXCursor_MacroDefinition if unsafe { clang_Cursor_isMacroFunctionLike(c) } == 0 => {
            v.scan.macros.insert(name);
        }
        CXCursor_TypedefDecl if !name.is_empty() => {
            // `typedef struct { .. } Name;`: bindgen names the struct after the typedef.
            // SAFETY: as above.
            let decl = unsafe { clang_getTypeDeclaration(clang_getTypedefDeclUnderlyingType(c)) };
            // SAFETY: as above.
            let (decl_kind, anonymous) = unsafe {
                (
                    clang_getCursorKind(decl),
                    clang_Cursor_isAnonymous(decl) != 0,
                )
            };
            if anonymous && matches!(decl_kind, CXCursor_StructDecl | CXCursor_UnionDecl) {
                v.scan.fields.insert(name.clone(), record_fields(decl));
            }
            v.scan.types.insert(name);
        }
        CXCursor_FunctionDecl if file == v.function_header => {
            // SAFETY: as above.
            let deprecated = unsafe { clang_getCursorAvailability(c) } == CXAvailability_Deprecated;
            let entry = v.scan.functions.entry(name).or_default();
            *entry |= deprecated;
        }
        CXCursor_TypedefDecl | CXCursor_EnumDecl | CXCursor_StructDecl | CXCursor_UnionDecl
            if !name.is_empty() && !name.contains(' ') =>
        {
            // SAFETY: as above.
            let anonymous = unsafe { clang_Cursor_isAnonymous(c) } != 0;
            if anonymous {
                return CXChildVisit_Continue;
            }
            if matches!(kind, CXCursor_StructDecl | CXCursor_UnionDecl)
                // SAFETY: as above.
                && unsafe { clang_isCursorDefinition(c) } != 0
            {
                v.scan.fields.insert(name.clone(), record_fields(c));
            }
            v.scan.types.insert(name);
        }
        _ => {}
    }
    CXChildVisit_Continue
}

/// Parses `contents` (a wrapper header named `name`) with `args` and collects what the files
/// `bound` declare; functions only from `function_header`.
pub fn scan(
    name: &str,
    contents: &str,
    args: &[String],
    function_header: &str,
    bound: &[&str],
) -> Result<Scan, ScanError> {
    if !clang_sys::is_loaded() {
        clang_sys::load().map_err(ScanError)?;
    }
    let cname = CString::new(name).map_err(|e| ScanError(e.to_string()))?;
    let ccontents = CString::new(contents).map_err(|e| ScanError(e.to_string()))?;
    let cargs: Vec<CString> = args
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(|e| ScanError(e.to_string())))
        .collect::<Result<_, _>>()?;
    let argv: Vec<*const c_char> = cargs.iter().map(|a| a.as_ptr()).collect();
    let mut unsaved = CXUnsavedFile {
        Filename: cname.as_ptr(),
        Contents: ccontents.as_ptr(),
        Length: contents.len() as c_ulong,
    };
    let mut visit = Visit {
        function_header,
        bound,
        scan: Scan::default(),
    };
    // SAFETY: every pointer handed to libclang outlives the parse; the index and unit are
    // disposed before returning.
    unsafe {
        let index = clang_createIndex(0, 0);
        let mut tu: CXTranslationUnit = ptr::null_mut();
        let err = clang_parseTranslationUnit2(
            index,
            cname.as_ptr(),
            argv.as_ptr(),
            argv.len() as c_int,
            &mut unsaved,
            1 as c_uint,
            CXTranslationUnit_SkipFunctionBodies | CXTranslationUnit_DetailedPreprocessingRecord,
            &mut tu,
        );
        if err != CXError_Success || tu.is_null() {
            clang_disposeIndex(index);
            return Err(ScanError(format!(
                "libclang could not parse {name} (error {err})"
            )));
        }
        let root = clang_getTranslationUnitCursor(tu);
        clang_visitChildren(root, visit_top, ptr::from_mut(&mut visit).cast());
        clang_disposeTranslationUnit(tu);
        clang_disposeIndex(index);
    }
    Ok(visit.scan)
}
