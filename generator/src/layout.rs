//! The layout oracle: gcc's numbers for every struct, union and enum the generated Rust defines,
//! next to rustc's.
//!
//! bindgen's own layout checks compare rustc with bindgen's reading of the headers through
//! libclang, so a construct bindgen mistranslates (its struct and its numbers agree with each
//! other, not with C) passes them. This module asks a second compiler: from the model's types it
//! writes a C program that includes the same pinned headers (as the reader does: `cuda.h` with
//! `cudaTypedefs.h`; `cuda_runtime_api.h` with `CUDA_API_PER_THREAD_DEFAULT_STREAM`), compiles it
//! to assembly with gcc (nothing is linked or run), and reads from the assembly, for each type,
//! `sizeof` and `_Alignof`, and for each field its `offsetof` and `sizeof`. [`target_file`] turns those numbers into the values of the sealed,
//! per-target `layout.rs` (`templates/layout.rs`): a `#[cfg(test)]` module holding each C number beside the Rust expression
//! (`size_of`, `align_of`, `offset_of!`) that must equal it, and one `#[test]` per API that
//! prints the counts and every mismatch. Users pay nothing; `cargo test -p cuda-hostcb
//! --all-features` runs it.
//!
//! What C can name decides what is checked:
//! - a struct, union or enum is spelled `struct N` / `union N` / `enum N` when the headers
//!   define that tag (found in gcc's preprocessed output), `struct T` when bindgen named it
//!   `P_T` for the tag `T` defined inside `P`, else `N` (a typedef of an anonymous type, which
//!   bindgen names after the typedef); gcc rejects any other spelling, which fails generation;
//! - an anonymous member (bindgen's `__bindgen_anon_N`, of a type named `P__bindgen_ty_N`) has no
//!   name in C: its fields are checked from the enclosing named type (C11 lets `offsetof` reach
//!   them by their own names; Rust reaches them with a nested `offset_of!`), and the anonymous
//!   type's own size and alignment only through the parent's size and the offsets around it;
//!   a member named in C whose type is anonymous (`union { .. } u;`) is checked as a field and
//!   its fields through it (`offsetof(P, u.x)`);
//! - the fields of an anonymous type used as an array element are not reached (Rust's
//!   `offset_of!` takes no index); the array itself is checked as a field;
//! - a bitfield has no `offsetof`: bindgen's storage units (`_bitfield_N`) are skipped, and their
//!   placement is checked through the struct's size and the offsets of the fields after them;
//! - a type the headers only declare (bindgen's `_unused: [u8; 0]`) has no size in C and is
//!   skipped; so are bindgen's own helpers (`__BindgenBitfieldUnit`, ...) and the fields bindgen
//!   adds (`_address`, `__bindgen_padding_N`, `_bindgen_opaque_blob`), which are covered by the
//!   type's size;
//! - a flexible array member (`__IncompleteArrayField`) has an offset but no `sizeof`.
//!
//! Everything skipped is listed, with its reason, in the generated file's documentation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Ctk;
use crate::model::{Api, ApiModel, CType, Model, Shape};
use crate::writer::{Value, Values, text};

/// The name of the generated file in each target's folder.
pub const FILE: &str = "layout.rs";

/// Why the oracle could not produce its numbers.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// gcc could not be started.
    #[error(
        "the layout oracle of CTK {ctk} cannot run gcc: {source}; install gcc, which compiles the layout oracle against the pinned headers (nothing was written)"
    )]
    Spawn {
        /// The target.
        ctk: Ctk,
        /// Why.
        source: std::io::Error,
    },
    /// The scratch folder for the C program could not be used.
    #[error(
        "the layout oracle of CTK {ctk} cannot write its C program under {path}: {source} (nothing was written)"
    )]
    Scratch {
        /// The target.
        ctk: Ctk,
        /// The folder or file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// gcc failed: the headers do not preprocess, or the program names something C cannot.
    #[error(
        "the layout oracle of CTK {ctk} ({api}): `{step}` failed: {message}; a type the generated Rust defines has no C spelling the oracle knows: teach generator/src/layout.rs (nothing was written)"
    )]
    Gcc {
        /// The target.
        ctk: Ctk,
        /// `driver` or `runtime`.
        api: &'static str,
        /// What ran.
        step: &'static str,
        /// gcc's first error line, or the exit status.
        message: String,
    },
    /// gcc's assembly of the program does not hold the numbers it was written to hold.
    #[error(
        "the layout oracle of CTK {ctk} ({api}) read {got} numbers from gcc's assembly, not the {want} it asked for (nothing was written)"
    )]
    Output {
        /// The target.
        ctk: Ctk,
        /// `driver` or `runtime`.
        api: &'static str,
        /// How many it read.
        got: usize,
        /// How many it should have.
        want: usize,
    },
    /// `gcc -dumpmachine` names a machine the generated `#[cfg]` cannot express.
    #[error(
        "the layout oracle cannot tell which Rust targets gcc's numbers hold for: `gcc -dumpmachine` printed '{0}'; use a gcc for an <arch>-linux-gnu target (nothing was written)"
    )]
    Machine(String),
}

/// What one API's oracle covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Structs checked (named ones, and anonymous ones whose fields are checked through their
    /// parent).
    pub structs: usize,
    /// Unions checked, likewise.
    pub unions: usize,
    /// Enums checked (size and alignment).
    pub enums: usize,
    /// Field entries checked (each has an offset and, but for flexible arrays, a size).
    pub fields: usize,
    /// Numbers compared in all (sizes, alignments, offsets, field sizes).
    pub numbers: usize,
    /// Items or fields not checked (listed with their reason in the generated file).
    pub skipped: usize,
}

/// The oracle of one target: the values of its `layout.rs` (`templates/layout.rs`, which
/// [`crate::writer::write_layout`] fills), and what it covers.
#[derive(Clone, Debug)]
pub struct Oracle {
    /// The values of the placeholders of `templates/layout.rs`.
    pub values: Values,
    /// The `#[cfg]` predicate of the machines whose C layout gcc computed, under which the
    /// target's `mod.rs` declares `mod layout;`.
    pub machine: String,
    /// The driver's counts.
    pub driver: Counts,
    /// The runtime's counts.
    pub runtime: Counts,
}

/// One Rust type and how C spells it.
#[derive(Clone, Debug)]
struct Entry {
    /// The Rust type's name in the API's module.
    rust: String,
    kind: Kind,
    /// The C type the checks are relative to (`struct CUDA_HOST_NODE_PARAMS_st`).
    c_type: String,
    /// Fields, in order, with their nested paths.
    fields: Vec<FieldCheck>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Struct,
    Union,
    Enum,
}

/// One field of an entry, reached from the entry's type.
#[derive(Clone, Debug)]
struct FieldCheck {
    /// Rust field path (`__bindgen_anon_1`, `ctx`).
    rust: Vec<String>,
    /// C member designator (`ctx`, `u.x`).
    c: String,
    /// Whether `sizeof` applies (not to a flexible array member).
    sized: bool,
}

/// The struct, union and enum definitions of one API, by Rust name: each one's kind and its
/// named fields (none for a newtype enum's).
type Defs = BTreeMap<String, (Kind, Vec<(String, CType)>)>;

fn definitions(api: &ApiModel) -> Defs {
    let d = &api.definitions;
    d.shapes
        .iter()
        .filter_map(|(name, shape)| {
            let def = match shape {
                Shape::Struct(fields) => (Kind::Struct, fields.clone()),
                // bindgen's newtype enums: `pub struct CUevent_flags_enum(pub c_uint);`.
                Shape::Tuple(fields) if fields.len() == 1 => (Kind::Enum, Vec::new()),
                Shape::Union(fields) => (Kind::Union, fields.clone()),
                _ => return None,
            };
            Some((name.clone(), def))
        })
        .collect()
}

/// Rust keywords bindgen appends `_` to (its `rust_mangle`), so `fn_` is C's `fn`.
const MANGLED: &[&str] = &[
    "abstract", "alignof", "as", "async", "await", "become", "box", "break", "const", "continue",
    "crate", "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if",
    "impl", "in", "let", "loop", "macro", "match", "mod", "move", "mut", "offsetof", "override",
    "priv", "proc", "pub", "pure", "ref", "return", "Self", "self", "sizeof", "static", "struct",
    "super", "trait", "true", "try", "type", "typeof", "unsafe", "unsized", "use", "virtual",
    "where", "while", "yield", "str", "bool", "f32", "f64", "usize", "isize", "u128", "i128",
    "u64", "i64", "u32", "i32", "u16", "i16", "u8", "i8",
];

/// The C name of a field bindgen named `rust`.
fn c_field(rust: &str) -> &str {
    match rust.strip_suffix('_') {
        Some(c) if MANGLED.contains(&c) => c,
        _ => rust,
    }
}

/// Whether `name` is `prefix` followed by a number.
fn numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Fields bindgen adds that C does not have; the type's size covers them.
fn is_bindgen_field(name: &str) -> bool {
    name == "_address"
        || name == "_bindgen_opaque_blob"
        || numbered(name, "__bindgen_padding_")
        || numbered(name, "_bitfield_align_")
}

/// A type made up for an anonymous struct or union inside another, which C cannot name: bindgen's
/// `P__bindgen_ty_N`, or the name the reader gives it from its place, `P_<field>` for the type of
/// the field `<field>` of `P` (`P_anon` for a C11 anonymous member, see `reader/fixup.rs`).
fn is_anonymous_type(name: &str, defs: &Defs) -> bool {
    name.contains("__bindgen_ty_")
        || defs.iter().any(|(parent, (_, fields))| {
            fields.iter().any(|(field, ty)| {
                name.strip_prefix(parent.as_str())
                    .and_then(|rest| rest.strip_prefix('_'))
                    == Some(field.as_str())
                    && [Some(ty), array_element(ty)]
                        .into_iter()
                        .flatten()
                        .any(|t| t.last_ident() == Some(name))
            })
        })
}

/// Whether the field `name` of `owner`, of type `ty`, is a C11 anonymous member: bindgen's
/// `__bindgen_anon_N`, or the reader's `anon` / `anonN` of the type `<owner>_anon..`.
fn is_anonymous_member(owner: &str, name: &str, ty: &CType) -> bool {
    numbered(name, "__bindgen_anon_")
        || ((name == "anon" || numbered(name, "anon"))
            && ty.last_ident() == Some(format!("{owner}_{name}").as_str()))
}

/// The element type of an array type, through nested arrays.
fn array_element(ty: &CType) -> Option<&CType> {
    match ty {
        CType::Array { of, .. } => Some(array_element(of).unwrap_or(of)),
        _ => None,
    }
}

/// The tags the preprocessed headers define: `struct N {`, `union N {`, `enum N {` (with any
/// `__attribute__((..))` between keyword and name).
fn defined_tags(preprocessed: &str) -> BTreeSet<(String, String)> {
    let re = regex::Regex::new(
        r"\b(struct|union|enum)\s+((?:__attribute__\s*\(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\)\s*)*)([A-Za-z_][A-Za-z0-9_]*)\s*\{",
    )
    .expect("a valid regex");
    re.captures_iter(preprocessed)
        .map(|c| (c[1].to_owned(), c[3].to_owned()))
        .collect()
}

/// The plan of one API: the entries to check and what is skipped, with reasons.
#[derive(Debug, Default)]
struct Plan {
    entries: Vec<Entry>,
    /// Anonymous types whose fields are checked through a parent.
    anonymous: Vec<(String, Kind)>,
    skipped: Vec<String>,
}

fn plan(defs: &Defs, tags: &BTreeSet<(String, String)>) -> Plan {
    let mut plan = Plan::default();
    for (name, (kind, fields)) in defs {
        if name.starts_with("__Bindgen") || name.starts_with("_bindgen_ty_") {
            continue; // bindgen's helpers; anonymous enums have no type to check.
        }
        if is_anonymous_type(name, defs) {
            continue; // reached from its parent
        }
        if fields.len() == 1 && fields[0].0 == "_unused" {
            plan.skipped.push(format!(
                "`{name}`: only declared by the headers (an incomplete type has no size in C)"
            ));
            continue;
        }
        let keyword = match kind {
            Kind::Struct => "struct",
            Kind::Union => "union",
            Kind::Enum => "enum",
        };
        let c_type = c_spelling(name, keyword, tags, defs);
        let mut entry = Entry {
            rust: name.clone(),
            kind: *kind,
            c_type,
            fields: Vec::new(),
        };
        walk(defs, name, fields, &[], "", &mut entry.fields, &mut plan);
        plan.entries.push(entry);
    }
    plan
}

/// How C spells the type bindgen named `name`: `struct N` where the headers define the tag `N`;
/// `struct T` for a tag `T` defined inside the definition of `P`, which bindgen names `P_T`
/// (C gives tags file scope wherever they are defined); else `N`, a typedef of an anonymous type.
fn c_spelling(name: &str, keyword: &str, tags: &BTreeSet<(String, String)>, defs: &Defs) -> String {
    let tag = |t: &str| tags.contains(&(keyword.to_owned(), t.to_owned()));
    if tag(name) {
        return format!("{keyword} {name}");
    }
    for (at, _) in name.match_indices('_') {
        let (parent, inner) = (&name[..at], &name[at + 1..]);
        if defs.contains_key(parent) && tag(inner) {
            return format!("{keyword} {inner}");
        }
    }
    name.to_owned()
}

/// Adds the fields of `fields` (of the type `owner`, reached by `rust` / `c` from an entry) and
/// of the anonymous types among them.
fn walk(
    defs: &Defs,
    owner: &str,
    fields: &[(String, CType)],
    rust: &[String],
    c: &str,
    out: &mut Vec<FieldCheck>,
    plan: &mut Plan,
) {
    for (name, ty) in fields {
        if is_bindgen_field(name) {
            continue;
        }
        if numbered(name, "_bitfield_") {
            plan.skipped.push(format!(
                "`{owner}::{name}`: a bitfield storage unit (C has no `offsetof` of a bitfield; checked through the type's size and the offsets after it)"
            ));
            continue;
        }
        let mut rust_path = rust.to_vec();
        rust_path.push(name.clone());
        let anonymous_member = is_anonymous_member(owner, name, ty);
        let c_path = match (anonymous_member, c.is_empty()) {
            (true, _) => c.to_owned(),
            (false, true) => c_field(name).to_owned(),
            (false, false) => format!("{c}.{}", c_field(name)),
        };
        if !anonymous_member {
            out.push(FieldCheck {
                rust: rust_path.clone(),
                c: c_path.clone(),
                sized: ty.last_ident() != Some("__IncompleteArrayField"),
            });
        }
        if let Some(element) = array_element(ty)
            && let Some(inner) = element.last_ident().filter(|n| is_anonymous_type(n, defs))
        {
            plan.skipped.push(format!(
                "the fields of `{inner}`, the anonymous element type of `{owner}::{name}` (Rust's `offset_of!` takes no index; the array is checked as a field)"
            ));
            continue;
        }
        let Some(inner) = ty.last_ident().filter(|n| is_anonymous_type(n, defs)) else {
            continue;
        };
        let Some((kind, inner_fields)) = defs.get(inner) else {
            continue;
        };
        plan.anonymous.push((inner.to_owned(), *kind));
        walk(defs, inner, inner_fields, &rust_path, &c_path, out, plan);
    }
}

/// The C headers one API's bindings come from, and the defines the reader reads them with.
fn c_headers(api: Api) -> (&'static str, &'static [&'static str]) {
    match api {
        Api::Driver => ("#include <cuda.h>\n#include <cudaTypedefs.h>\n", &[]),
        Api::Runtime => (
            "#include <cuda_runtime_api.h>\n",
            &["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"],
        ),
    }
}

/// The C program that prints, one per line, every number of `plan` in order: per entry its
/// `sizeof` and `_Alignof`, then per field its `offsetof` and (when sized) `sizeof`.
fn c_program(api: Api, plan: &Plan) -> String {
    let (includes, _) = c_headers(api);
    let mut values = String::new();
    for e in &plan.entries {
        let t = &e.c_type;
        values.push_str(&format!("    sizeof({t}), _Alignof({t}),\n"));
        for f in &e.fields {
            values.push_str(&format!("    offsetof({t}, {}),", f.c));
            if f.sized {
                values.push_str(&format!(" sizeof((({t} *)0)->{}),", f.c));
            }
            values.push('\n');
        }
    }
    format!(
        "/* The layout oracle: gcc's numbers for the types of the generated Rust bindings, read from\n   \
         the assembly gcc makes of this array. */\n\
         #include <stddef.h>\n{includes}\n\
         const unsigned long long {LAYOUT_ARRAY}[] = {{\n{values}    0 /* end */\n}};\n"
    )
}

/// The array of [`c_program`], whose initialiser holds the numbers.
const LAYOUT_ARRAY: &str = "hostcb_layout";

/// The numbers of [`LAYOUT_ARRAY`] in gcc's assembly of [`c_program`] (`gcc -S`): its label,
/// then one 8-byte datum per element, `.quad N` (x86-64, powerpc64), `.xword N` (aarch64),
/// `.dword N` or `.8byte N` (a run of zeros may come as `.zero <bytes>`), up to the next line of
/// another kind. Nothing is linked or run, so the numbers are the compiler's, for whatever
/// machine it compiles for; one that spells 8-byte data otherwise (32-bit x86 writes two
/// `.long`s) fails generation with the count of numbers read. The final 0 is dropped; `None`
/// when the array is not there.
fn assembly_numbers(assembly: &str) -> Option<Vec<usize>> {
    let mut lines = assembly.lines().map(str::trim);
    lines.find(|l| *l == format!("{LAYOUT_ARRAY}:"))?;
    let mut numbers = Vec::new();
    for line in lines {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(".quad" | ".xword" | ".dword" | ".8byte"), Some(n), None) => {
                numbers.push(n.parse().ok()?)
            }
            (Some(".zero"), Some(n), None) => {
                let bytes: usize = n.parse().ok()?;
                numbers.extend(std::iter::repeat_n(0, bytes / 8));
            }
            _ => break,
        }
    }
    numbers.pop()?;
    Some(numbers)
}

/// How many numbers [`c_program`] holds for `plan`.
fn number_count(plan: &Plan) -> usize {
    plan.entries
        .iter()
        .map(|e| {
            2 + e
                .fields
                .iter()
                .map(|f| 1 + usize::from(f.sized))
                .sum::<usize>()
        })
        .sum()
}

/// Runs `cmd`, returning its stdout, or gcc's first error line (or the exit status).
fn run(cmd: &mut Command, ctk: Ctk, api: Api, step: &'static str) -> Result<String, LayoutError> {
    let out = cmd
        .output()
        .map_err(|source| LayoutError::Spawn { ctk, source })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let message = stderr
        .lines()
        .find(|l| l.contains("error"))
        .or_else(|| stderr.lines().find(|l| !l.trim().is_empty()))
        .map_or_else(|| format!("exit status {}", out.status), str::to_owned);
    Err(LayoutError::Gcc {
        ctk,
        api: api.as_str(),
        step,
        message,
    })
}

/// gcc's numbers for one API's plan, in order.
fn measure(
    ctk: Ctk,
    api: Api,
    include_dirs: &[PathBuf],
    scratch: &Path,
    defs: &Defs,
) -> Result<(Plan, Vec<usize>), LayoutError> {
    let (includes, defines) = c_headers(api);
    let write = |name: &str, text: &str| -> Result<PathBuf, LayoutError> {
        let path = scratch.join(format!("{}_{name}", api.as_str()));
        std::fs::write(&path, text).map_err(|source| LayoutError::Scratch {
            ctk,
            path: path.clone(),
            source,
        })?;
        Ok(path)
    };
    let gcc = |args: &[&std::ffi::OsStr]| {
        let mut cmd = Command::new("gcc");
        cmd.arg("-std=gnu11")
            .args(include_dirs.iter().map(|d| format!("-I{}", d.display())))
            .args(defines)
            .args(args);
        cmd
    };
    let headers = write("headers.c", includes)?;
    let preprocessed = run(
        &mut gcc(&["-E".as_ref(), "-P".as_ref(), headers.as_os_str()]),
        ctk,
        api,
        "gcc -E <the headers>",
    )?;
    let plan = plan(defs, &defined_tags(&preprocessed));
    let source = write("layout.c", &c_program(api, &plan))?;
    let assembly = run(
        &mut gcc(&[
            "-w".as_ref(),
            "-S".as_ref(),
            "-o".as_ref(),
            "-".as_ref(),
            source.as_os_str(),
        ]),
        ctk,
        api,
        "gcc <the layout program>",
    )?;
    let numbers = assembly_numbers(&assembly).unwrap_or_default();
    if numbers.len() != number_count(&plan) {
        return Err(LayoutError::Output {
            ctk,
            api: api.as_str(),
            got: numbers.len(),
            want: number_count(&plan),
        });
    }
    Ok((plan, numbers))
}

/// The `#[cfg]` predicate of the Rust targets whose C layout is the one `gcc -dumpmachine`
/// names (`x86_64-linux-gnu` → `all(target_arch = "x86_64", target_os = "linux")`).
fn machine_cfg(machine: &str) -> Result<String, LayoutError> {
    let unknown = || LayoutError::Machine(machine.to_owned());
    let mut parts = machine.split('-');
    let arch = match parts.next().ok_or_else(unknown)? {
        "x86_64" => "x86_64",
        "aarch64" => "aarch64",
        "i386" | "i486" | "i586" | "i686" => "x86",
        "powerpc64le" => "powerpc64",
        _ => return Err(unknown()),
    };
    if !machine.contains("-linux") {
        return Err(unknown());
    }
    Ok(format!(
        r#"all(target_arch = "{arch}", target_os = "linux")"#
    ))
}

fn gcc_machine(ctk: Ctk) -> Result<String, LayoutError> {
    let out = Command::new("gcc")
        .arg("-dumpmachine")
        .output()
        .map_err(|source| LayoutError::Spawn { ctk, source })?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Computes gcc's numbers for every type of `model` against the headers in `include_dirs`: the
/// values of the target's `layout.rs`.
pub fn target_file(model: &Model, include_dirs: &[PathBuf]) -> Result<Oracle, LayoutError> {
    let driver = api_oracle(model.ctk, &model.driver, include_dirs)?;
    let runtime = api_oracle(model.ctk, &model.runtime, include_dirs)?;
    oracle(model.ctk, driver, runtime)
}

/// What the oracle measured of one API ([`api_oracle`]): plain data, so that each API of a target
/// can be measured on the thread that read it.
#[derive(Clone, Debug)]
pub struct ApiOracle {
    /// The API's values of `__EACH_API__` in `templates/layout.rs`.
    values: Values,
    /// The doc lines naming what is not checked, and why.
    skipped: Vec<String>,
    /// What it covers.
    counts: Counts,
}

/// The target's oracle from its two APIs' measurements, under the machine gcc compiles for.
pub fn oracle(ctk: Ctk, driver: ApiOracle, runtime: ApiOracle) -> Result<Oracle, LayoutError> {
    let machine = machine_cfg(&gcc_machine(ctk)?)?;
    let skipped_doc: Vec<String> = driver
        .skipped
        .iter()
        .chain(&runtime.skipped)
        .cloned()
        .collect();
    let mut skipped = Vec::new();
    if !skipped_doc.is_empty() {
        skipped.extend([
            String::new(),
            " Not checked, and why:".to_owned(),
            String::new(),
        ]);
        skipped.extend(skipped_doc);
    }
    Ok(Oracle {
        values: vec![
            text("__CTK__", ctk),
            ("__SKIPPED__", Value::Lines(skipped)),
            (
                "__EACH_API__",
                Value::Each(vec![driver.values, runtime.values]),
            ),
        ],
        machine,
        driver: driver.counts,
        runtime: runtime.counts,
    })
}

/// Computes gcc's numbers for every type of one API of the target `ctk` against the headers in
/// `include_dirs`.
pub fn api_oracle(
    ctk: Ctk,
    model: &ApiModel,
    include_dirs: &[PathBuf],
) -> Result<ApiOracle, LayoutError> {
    let api = model.api;
    let scratch = tempfile::tempdir().map_err(|source| LayoutError::Scratch {
        ctk,
        path: std::env::temp_dir(),
        source,
    })?;
    let defs = definitions(model);
    let (plan, numbers) = measure(ctk, api, include_dirs, scratch.path(), &defs)?;
    let (module, rows_name, test_name) = match api {
        Api::Driver => ("driver", "DRIVER", "driver_layout_matches_gcc"),
        Api::Runtime => ("runtime", "RUNTIME", "runtime_layout_matches_gcc"),
    };
    let mut values = numbers.into_iter();
    let mut rows = Vec::new();
    let mut next = || values.next().expect("measure checked the count");
    for e in &plan.entries {
        let ty = format!("{module}::{}", e.rust);
        rows.push(format!("size!({ty}, {})", next()));
        rows.push(format!("align!({ty}, {})", next()));
        for f in &e.fields {
            let path = f.rust.join(".");
            rows.push(format!("offset!({ty}, {path}, {})", next()));
            if f.sized {
                rows.push(format!("field_size!({ty}, {path}, {})", next()));
            }
        }
    }
    let mut c = Counts::default();
    let anonymous: BTreeSet<&(String, Kind)> = plan.anonymous.iter().collect();
    for kind in plan
        .entries
        .iter()
        .map(|e| e.kind)
        .chain(anonymous.iter().map(|a| a.1))
    {
        match kind {
            Kind::Struct => c.structs += 1,
            Kind::Union => c.unions += 1,
            Kind::Enum => c.enums += 1,
        }
    }
    c.fields = plan.entries.iter().map(|e| e.fields.len()).sum();
    c.numbers = rows.len();
    let skipped: BTreeSet<&String> = plan.skipped.iter().collect();
    c.skipped = skipped.len();
    let any = (!rows.is_empty()).then(Values::new);
    Ok(ApiOracle {
        values: vec![
            text("__API__", module),
            text("__ROWS__", rows_name),
            text("__TEST__", test_name),
            text("__ROW_LIST__", rows.join(", ")),
            text("__STRUCTS__", c.structs),
            text("__UNIONS__", c.unions),
            text("__ENUMS__", c.enums),
            text("__FIELDS__", c.fields),
            text("__SKIPPED_COUNT__", c.skipped),
            ("__IF_ROWS__", Value::Each(any.into_iter().collect())),
        ],
        skipped: skipped
            .into_iter()
            .map(|s| format!(" - {}: {s}", api.as_str()))
            .collect(),
        counts: c,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A driver API of `items` (as bindgen would write them) for the target 13.0.
    fn model(items: Vec<syn::Item>) -> Model {
        let types = items
            .iter()
            .map(|i| {
                let name = crate::reader::group_of(i);
                crate::reader::type_def(Api::Driver, &name, std::slice::from_ref(i))
                    .expect("a type the model holds")
            })
            .collect();
        let api =
            |api, types| ApiModel::new(api, Vec::new(), types, Vec::new(), Default::default());
        Model {
            ctk: Ctk::new(13, 0),
            driver: api(Api::Driver, types),
            runtime: api(Api::Runtime, Vec::new()),
        }
    }

    /// gcc's numbers, by the Rust expression they pair with, for a made-up `cuda.h`.
    fn numbers(header: &str, items: Vec<syn::Item>) -> Result<Vec<(String, usize)>, LayoutError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cuda.h"), header).unwrap();
        std::fs::write(dir.path().join("cudaTypedefs.h"), "").unwrap();
        std::fs::write(dir.path().join("cuda_runtime_api.h"), "").unwrap();
        let oracle = target_file(&model(items), &[dir.path().to_path_buf()])?;
        let templates = crate::writer::Templates::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../templates"),
        )
        .unwrap();
        let file = crate::writer::write_layout(&oracle.values, &templates.parse()).unwrap();
        let text = quote::ToTokens::to_token_stream(&file.file).to_string();
        // The rows: `offset ! (driver :: T , a . b , 4)`.
        let row =
            regex::Regex::new(r"(\w+) ! \(driver :: (\w+) , (?:([\w .]*?) , )?(\d+)\)").unwrap();
        Ok(row
            .captures_iter(&text)
            .map(|c| {
                let path = c.get(3).map_or("", |m| m.as_str()).replace(' ', "");
                (format!("{} {} {path}", &c[1], &c[2]), c[4].parse().unwrap())
            })
            .collect())
    }

    #[test]
    fn c_spells_tags_typedefs_nested_tags_and_reaches_anonymous_members() {
        let header = "
            typedef struct outer_st {
                char a;
                union { int id; double d; };
                struct inner_st { char c; long l; } in;
                union { short s; } named;
                int fn;
                unsigned flag : 3;
            } outer;
            typedef struct { short s; } anon_t;
            typedef enum kind_enum { K0 } kind;
            struct only_declared;
        ";
        let items: Vec<syn::Item> = vec![
            syn::parse_quote! { pub struct outer_st {
                pub a: c_char,
                pub __bindgen_anon_1: outer_st__bindgen_ty_1,
                pub in_: outer_st_inner_st,
                pub named: outer_st__bindgen_ty_2,
                pub fn_: c_int,
                pub _bitfield_align_1: [u8; 0],
                pub _bitfield_1: __BindgenBitfieldUnit<[u8; 1]>,
            } },
            syn::parse_quote! { pub union outer_st__bindgen_ty_1 { pub id: c_int, pub d: f64 } },
            syn::parse_quote! { pub struct outer_st_inner_st { pub c: c_char, pub l: c_long } },
            syn::parse_quote! { pub union outer_st__bindgen_ty_2 { pub s: c_short } },
            syn::parse_quote! { pub struct anon_t { pub s: c_short } },
            syn::parse_quote! { pub struct kind_enum(pub c_uint); },
            syn::parse_quote! { pub struct only_declared { _unused: [u8; 0] } },
        ];
        let got = numbers(header, items).unwrap();
        let want: Vec<(String, usize)> = [
            ("size anon_t ", 2),
            ("align anon_t ", 2),
            ("offset anon_t s", 0),
            ("field_size anon_t s", 2),
            ("size kind_enum ", 4),
            ("align kind_enum ", 4),
            ("size outer_st ", 48),
            ("align outer_st ", 8),
            ("offset outer_st a", 0),
            ("field_size outer_st a", 1),
            // The anonymous union's members, by their own names in C.
            ("offset outer_st __bindgen_anon_1.id", 8),
            ("field_size outer_st __bindgen_anon_1.id", 4),
            ("offset outer_st __bindgen_anon_1.d", 8),
            ("field_size outer_st __bindgen_anon_1.d", 8),
            // C's `in`, bindgen's `in_`; its type, `struct inner_st` (a tag defined inside
            // outer_st, bindgen's `outer_st_inner_st`), is checked on its own below.
            ("offset outer_st in_", 16),
            ("field_size outer_st in_", 16),
            ("offset outer_st named", 32),
            ("field_size outer_st named", 2),
            ("offset outer_st named.s", 32),
            ("field_size outer_st named.s", 2),
            ("offset outer_st fn_", 36),
            ("field_size outer_st fn_", 4),
            ("size outer_st_inner_st ", 16),
            ("align outer_st_inner_st ", 8),
            ("offset outer_st_inner_st c", 0),
            ("field_size outer_st_inner_st c", 1),
            ("offset outer_st_inner_st l", 8),
            ("field_size outer_st_inner_st l", 8),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_type_c_cannot_name_fails_generation_with_one_line() {
        let items = vec![syn::parse_quote! { pub struct not_in_the_headers { pub x: c_int } }];
        let err = numbers("struct other { int x; };\n", items).unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with(
                "the layout oracle of CTK 13.0 (driver): `gcc <the layout program>` failed:"
            ) && message.contains("not_in_the_headers")
                && !message.contains('\n'),
            "{message}"
        );
    }

    #[test]
    fn the_numbers_are_read_from_the_arrays_assembly() {
        let assembly = "\t.globl\thostcb_layout\n\t.section\t.rodata\nhostcb_layout:\n\
                        \t.quad\t24\n\t.zero\t16\n\t.quad\t8\n\t.quad\t0\n\t.ident\t\"GCC\"\n";
        assert_eq!(assembly_numbers(assembly), Some(vec![24, 0, 0, 8]));
        assert_eq!(assembly_numbers("other:\n\t.quad\t1\n"), None);
        let aarch64 = "hostcb_layout:\n\t.xword\t16\n\t.xword\t8\n\t.xword\t0\n";
        assert_eq!(assembly_numbers(aarch64), Some(vec![16, 8]));
        assert_eq!(assembly_numbers("hostcb_layout:\n\t.quad\tx\n"), None);
    }

    #[test]
    fn field_names_bindgen_mangled_are_cs() {
        assert_eq!(c_field("fn_"), "fn");
        assert_eq!(c_field("type_"), "type");
        assert_eq!(c_field("userData"), "userData");
        assert_eq!(c_field("x_"), "x_");
    }

    #[test]
    fn machines_map_to_cfg() {
        assert_eq!(
            machine_cfg("x86_64-linux-gnu").unwrap(),
            r#"all(target_arch = "x86_64", target_os = "linux")"#
        );
        assert!(machine_cfg("x86_64-w64-mingw32").is_err());
    }
}
