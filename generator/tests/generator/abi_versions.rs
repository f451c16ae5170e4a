//! The ABI versions of every driver wrapper, checked against the text of `cudaTypedefs.h` on
//! every target, by a reading of that file that shares no code with the reader.
//!
//! `cudaTypedefs.h` declares one `PFN_<base>_v<version>` typedef per ABI version of a function
//! and a `PFN_<base>_v<version>_ptsz` (or `_ptds`) typedef per per-thread-default-stream ABI; 12.9
//! also spells the pairs out, `#define PFN_cuStreamAddCallback __API_TYPEDEF_PTSZ(
//! PFN_cuStreamAddCallback, 5000, 7000)`. The per-thread version is often newer than the legacy
//! one (the driver answers VERSION_NOT_SUFFICIENT when asked for the per-thread variant at the
//! legacy version), so each wrapper must carry both.

use std::collections::BTreeMap;
use std::path::Path;

use hostcb_generator::Ctk;
use hostcb_generator::config::Config;
use hostcb_generator::inputs::Inputs;
use hostcb_generator::model::{Function, PerThreadVariant};
use hostcb_generator::pipeline;
use hostcb_generator::writer::Templates;
use regex::Regex;

use crate::config;

/// One `PFN_` typedef: its version, per-thread suffix (`""`, `_ptsz`, `_ptds`), arity, and its
/// parameter types with the parameter names dropped and cuda.h's plain typedefs resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Typedef {
    version: u32,
    suffix: String,
    arity: usize,
    types: Vec<String>,
}

fn arity(params: &str) -> usize {
    let params = params.trim();
    if params.is_empty() || params == "void" {
        0
    } else {
        params.split(',').count()
    }
}

/// cuda.h's typedefs of one name to another (`typedef CUdeviceptr_v2 CUdeviceptr;`,
/// `typedef struct CUctx_st *CUcontext;`), by the new name.
fn plain_typedefs(cuda_h: &str) -> BTreeMap<String, String> {
    let re =
        Regex::new(r"typedef\s+(?:struct\s+|enum\s+|union\s+)?(\w+)\s*(\*?)\s*(\w+)\s*;").unwrap();
    re.captures_iter(cuda_h)
        .map(|c| {
            (
                c[3].to_owned(),
                format!("{}{}", &c[1], if c[2].is_empty() { "" } else { " *" }),
            )
        })
        .collect()
}

/// One C parameter's type: its tokens without the parameter's name, typedefs resolved.
fn param_type(param: &str, plain: &BTreeMap<String, String>) -> String {
    let spaced = param.replace('*', " * ");
    let mut tokens: Vec<&str> = spaced.split_whitespace().collect();
    if tokens.len() > 1 && tokens.last().is_some_and(|t| *t != "*") {
        tokens.pop();
    }
    let mut out: Vec<String> = Vec::new();
    for t in tokens {
        let mut t = t.to_owned();
        for _ in 0..8 {
            match plain.get(&t) {
                Some(next) if *next != t => t = next.clone(),
                _ => break,
            }
        }
        out.push(t);
    }
    out.join(" ")
}

/// Every `PFN_` typedef of the header, by base name.
fn typedefs(text: &str, plain: &BTreeMap<String, String>) -> BTreeMap<String, Vec<Typedef>> {
    let re = Regex::new(
        r"typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*PFN_(\w+?)_v(\d+)(_ptsz|_ptds)?\s*\)\s*\(([^;]*)\)\s*;",
    )
    .unwrap();
    // 12.9 spells a few typedefs without a version after `#define PFN_<base> PFN_<base>_v<N>`,
    // which the preprocessor turns into the versioned name.
    let defines: BTreeMap<String, String> = Regex::new(r"#define\s+PFN_(\w+)\s+PFN_(\w+)_v(\d+)\s")
        .unwrap()
        .captures_iter(text)
        .filter(|c| c[1] == c[2])
        .map(|c| {
            (
                format!("PFN_{})", &c[1]),
                format!("PFN_{}_v{})", &c[1], &c[3]),
            )
        })
        .collect();
    let mut text = text.to_owned();
    for (from, to) in &defines {
        text = text.replace(from.as_str(), to);
    }
    let mut out: BTreeMap<String, Vec<Typedef>> = BTreeMap::new();
    for c in re.captures_iter(&text) {
        let params = c[4].trim();
        let types = if arity(params) == 0 {
            Vec::new()
        } else {
            params.split(',').map(|p| param_type(p, plain)).collect()
        };
        out.entry(c[1].to_owned()).or_default().push(Typedef {
            version: c[2].parse().unwrap(),
            suffix: c.get(3).map_or("", |m| m.as_str()).to_owned(),
            arity: arity(&c[4]),
            types,
        });
    }
    out
}

/// One driver wrapper as the generated file spells its entry point: `DriverFn::new::<This>(c"<name>",
/// c"<base>", <version>, <needs>, None | Some(PerThreadVariant { version, symbol }))`, and the arity of
/// its function-pointer type.
#[derive(Debug)]
struct Wrapper {
    name: String,
    base: String,
    version: u32,
    /// The oldest driver shown to have the ABI (the first header declaring it).
    needs: u32,
    per_thread: Option<PerThreadVariant>,
    arity: usize,
}

/// Every entry point of a generated driver file, read from its syntax.
fn wrappers(file: &syn::File) -> Vec<Wrapper> {
    use quote::ToTokens;
    let entry = file
        .items
        .iter()
        .find_map(|i| match i {
            syn::Item::Mod(m) if m.ident == "entry" => m.content.as_ref().map(|(_, items)| items),
            _ => None,
        })
        .expect("the entry module");
    let number = Regex::new(r"^\d+$").unwrap();
    let mut out = Vec::new();
    for item in entry {
        let syn::Item::Static(s) = item else { continue };
        if s.ident == "ALL" {
            continue;
        }
        let ty = s.ty.to_token_stream().to_string();
        // `DriverFn < unsafe extern "C" fn (A , B) -> CUresult >`
        let inner = ty
            .split_once("fn (")
            .and_then(|(_, r)| r.rsplit_once(") -> CUresult"))
            .map(|(args, _)| args.trim())
            .unwrap_or_else(|| panic!("{}: unexpected type {ty}", s.ident));
        let arity = if inner.is_empty() {
            0
        } else {
            inner.split(',').filter(|a| !a.trim().is_empty()).count()
        };
        let text = s.expr.to_token_stream().to_string();
        let args: Vec<String> = text
            .split_once("DriverFn :: new ::")
            .and_then(|(_, r)| r.split_once('('))
            .map(|(_, r)| r)
            .unwrap_or_else(|| panic!("{}: unexpected entry {text}", s.ident))
            .replace(['{', '}', '(', ')', ','], " ")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let cstr = |a: &str| a.trim_start_matches('c').trim_matches('"').to_owned();
        let per_thread = match args.get(4).map(String::as_str) {
            Some("None") => None,
            Some("Some") => {
                let at = |key: &str| {
                    let i = args.iter().position(|a| a == key).expect("a field");
                    args[i + 2].clone()
                };
                Some(PerThreadVariant {
                    version: at("version").parse().unwrap(),
                    symbol: cstr(&at("symbol")),
                })
            }
            other => panic!("{}: unexpected per-thread argument {other:?}", s.ident),
        };
        assert!(
            number.is_match(&args[2]),
            "{}: version {}",
            s.ident,
            args[2]
        );
        assert!(number.is_match(&args[3]), "{}: needs {}", s.ident, args[3]);
        out.push(Wrapper {
            name: cstr(&args[0]),
            base: cstr(&args[1]),
            version: args[2].parse().unwrap(),
            needs: args[3].parse().unwrap(),
            per_thread,
            arity,
        });
    }
    out
}

/// What the header says one wrapper must carry: its legacy typedef exists with the wrapper's
/// arity, and no other typedef of its base with the same parameter types is newer (older, for
/// an unsuffixed declaration whose suffixed twin is declared too: the oldest ABI). Mismatches
/// as lines.
fn legacy_mismatches(w: &Wrapper, all: &BTreeMap<String, Vec<Typedef>>, twin: bool) -> Vec<String> {
    let Some(versions) = all.get(&w.base) else {
        return vec![format!("{}: no PFN_{}_v* typedef at all", w.name, w.base)];
    };
    let Some(chosen) = versions
        .iter()
        .find(|t| t.version == w.version && t.suffix.is_empty())
    else {
        return vec![format!(
            "{}: asks for version {}, but there is no PFN_{}_v{}",
            w.name, w.version, w.base, w.version
        )];
    };
    let mut out = Vec::new();
    if chosen.arity != w.arity {
        out.push(format!(
            "{}: {} parameters, PFN_{}_v{} has {}",
            w.name, w.arity, w.base, w.version, chosen.arity
        ));
    }
    let same: Vec<u32> = versions
        .iter()
        .filter(|t| t.suffix.is_empty() && t.types == chosen.types)
        .map(|t| t.version)
        .collect();
    // The `_vN` suffix counts the base's ABIs (bare: the first): the N-th legacy typedef of the
    // base, where it has the wrapper's parameter types; else the newest of those (the oldest
    // for a bare name whose suffixed twin is declared too).
    let mut legacy: Vec<u32> = versions
        .iter()
        .filter(|t| t.suffix.is_empty())
        .map(|t| t.version)
        .collect();
    legacy.sort_unstable();
    legacy.dedup();
    let ordinal = if w.name == w.base {
        Some(1)
    } else {
        w.name
            .strip_prefix(w.base.as_str())
            .and_then(|r| r.strip_prefix("_v"))
            .and_then(|n| n.parse::<usize>().ok())
    };
    let by_ordinal = ordinal
        .and_then(|n| legacy.get(n.wrapping_sub(1)))
        .filter(|v| same.contains(v));
    let want = by_ordinal.or(if twin {
        same.iter().min()
    } else {
        same.iter().max()
    });
    if want != Some(&w.version) {
        out.push(format!(
            "{}: version {}, but typedefs {:?} of {} have its parameter types ({})",
            w.name,
            w.version,
            same,
            w.base,
            if by_ordinal.is_some() {
                "its _vN suffix names the N-th"
            } else if twin {
                "the oldest wins"
            } else {
                "the newest wins"
            }
        ));
    }
    out
}

/// 12.9's `#define PFN_<base> __API_TYPEDEF_PTSZ(PFN_<base>, legacy, per_thread)` pairs.
fn spelled_pairs(text: &str) -> BTreeMap<String, (u32, u32, String)> {
    let re = Regex::new(
        r"#define\s+PFN_(\w+)\s+__API_TYPEDEF_PT(SZ|DS)\(\s*PFN_\w+\s*,\s*(\d+)\s*,\s*(\d+)\s*\)",
    )
    .unwrap();
    re.captures_iter(text)
        .map(|c| {
            let suffix = format!("_pt{}", c[2].to_lowercase());
            (
                c[1].to_owned(),
                (c[3].parse().unwrap(), c[4].parse().unwrap(), suffix),
            )
        })
        .collect()
}

/// What the header says a wrapper's per-thread variant is: the newest per-thread typedef of
/// its base with the legacy typedef's arity.
fn expected_per_thread(
    w: &Wrapper,
    all: &BTreeMap<String, Vec<Typedef>>,
) -> Option<PerThreadVariant> {
    let versions = all.get(&w.base)?;
    let legacy = versions
        .iter()
        .find(|t| t.version == w.version && t.suffix.is_empty())?;
    versions
        .iter()
        .filter(|t| !t.suffix.is_empty() && t.arity == legacy.arity)
        .max_by_key(|t| t.version)
        .map(|t| PerThreadVariant {
            symbol: format!("{}{}", w.name, t.suffix),
            version: t.version,
        })
}

/// Every driver wrapper of every listed target, as the generated file spells it, against the
/// text of that target's `cudaTypedefs.h`: the legacy version (its typedef, arity, and newest
/// among the typedefs with its parameter types) and the per-thread version.
#[test]
fn every_driver_wrapper_has_the_legacy_and_per_thread_versions_of_cuda_typedefs_h() {
    let ws = config();
    let targets = ws.targets.clone();
    assert!(!targets.is_empty(), "no target listed");
    if !targets.contains(&Ctk::V12_9) {
        // Visible, not silent: one of the checks below reads only 12.9's header. A skip under
        // any variable: the target list is this checkout's choice, not something a machine
        // lacks (REQUIRE_GPU and CI turn a missing GPU or runtime into a failure).
        println!(
            "SKIP: the spelled-out pairs of cudaTypedefs.h: generator/targets.txt lists no CTK \
             12.9, whose header alone spells them out (`__API_TYPEDEF_PTSZ`); to check them, \
             pin it (`cargo xtask pin --ctk 12.9`), list it there and run `cargo xtask regen \
             --ctk all`"
        );
    }
    for ctk in targets {
        let inputs = Inputs::gather(&ws.inputs, ctk, None).expect("the pinned inputs");
        let header = inputs.headers.include_dirs[0].join("cudaTypedefs.h");
        let text = std::fs::read_to_string(&header).unwrap();
        let cuda_h =
            std::fs::read_to_string(inputs.headers.include_dirs[0].join("cuda.h")).unwrap();
        let all = typedefs(&text, &plain_typedefs(&cuda_h));
        let generated = pipeline::generate_from(&ws, &inputs).expect("generate");
        let driver = generated
            .files
            .iter()
            .find(|f| f.path.ends_with("driver.rs"))
            .expect("driver.rs");
        let file = syn::parse_file(&driver.contents).expect("the driver file parses");
        let wrappers = wrappers(&file);
        let names: Vec<&str> = wrappers.iter().map(|w| w.name.as_str()).collect();
        // Every declaration of the header has its wrapper, nothing else does.
        let mut declared: Vec<&str> = generated
            .model
            .driver
            .declared
            .functions
            .iter()
            .map(String::as_str)
            .filter(|f| !generated.model.driver.declared.denied.contains(*f))
            .collect();
        declared.sort_unstable();
        assert_eq!(
            names, declared,
            "CTK {ctk}: wrappers against the declarations of cuda.h"
        );
        let (mut with_variant, mut later) = (0, 0);
        let mut mismatches = Vec::new();
        for w in &wrappers {
            let twin = !w.name.contains("_v")
                && names.iter().any(|n| {
                    n.strip_prefix(w.name.as_str())
                        .and_then(|r| r.strip_prefix("_v"))
                        .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                });
            mismatches.extend(legacy_mismatches(w, &all, twin));
            if w.needs < w.version {
                mismatches.push(format!(
                    "{}: needs a {} driver, older than its ABI {}",
                    w.name, w.needs, w.version
                ));
            }
            later += usize::from(w.needs > w.version);
            let expected = expected_per_thread(w, &all);
            with_variant += usize::from(expected.is_some());
            if w.per_thread != expected {
                mismatches.push(format!(
                    "{}: wrapper {:?}, cudaTypedefs.h {:?}",
                    w.name, w.per_thread, expected
                ));
            }
        }
        assert!(
            mismatches.is_empty(),
            "CTK {ctk} ({}):\n{}",
            header.display(),
            mismatches.join("\n")
        );
        // The oracle must have had something to say, or it proves nothing.
        assert!(
            wrappers.len() >= 300 && with_variant >= 60,
            "CTK {ctk}: {} wrappers, {with_variant} per-thread variants",
            wrappers.len()
        );
        eprintln!(
            "CTK {ctk}: {} driver wrappers checked against {}, {with_variant} with a per-thread variant, {later} needing a newer driver than their ABI number",
            wrappers.len(),
            header.display()
        );
        check_spelled_pairs(ctk, &header, &text, &generated.model.driver.functions);
    }
}

/// On 12.9, the header's own spelled-out pairs agree with the model wherever they name a
/// declaration's current base and legacy version.
fn check_spelled_pairs(ctk: Ctk, header: &Path, text: &str, functions: &[Function]) {
    let pairs = spelled_pairs(text);
    if ctk != Ctk::V12_9 {
        return;
    }
    let mut compared = 0;
    for f in functions {
        let Some((legacy, per_thread, suffix)) = pairs.get(&f.base) else {
            continue;
        };
        if *legacy != f.version {
            continue;
        }
        compared += 1;
        assert_eq!(
            f.per_thread,
            Some(PerThreadVariant {
                symbol: format!("{}{suffix}", f.name),
                version: *per_thread
            }),
            "{}: {}",
            f.name,
            header.display()
        );
    }
    assert!(
        compared >= 15,
        "compared {compared} pairs with 12.9's macros"
    );
}

#[test]
fn the_functions_whose_per_thread_version_is_newer_carry_it() {
    let ws = config();
    let generated = pipeline::generate(&ws, Ctk::V13_0, &Default::default()).expect("generate");
    let find = |name: &str| {
        generated
            .model
            .driver
            .functions
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    for (name, legacy, symbol) in [
        ("cuStreamAddCallback", 5000, "cuStreamAddCallback_ptsz"),
        ("cuEventRecord", 2000, "cuEventRecord_ptsz"),
        ("cuStreamQuery", 2000, "cuStreamQuery_ptsz"),
        ("cuStreamSynchronize", 2000, "cuStreamSynchronize_ptsz"),
        ("cuStreamWaitEvent", 3020, "cuStreamWaitEvent_ptsz"),
        ("cuMemsetD8Async", 3020, "cuMemsetD8Async_ptsz"),
        ("cuMemsetD32Async", 3020, "cuMemsetD32Async_ptsz"),
        ("cuMemcpyHtoD_v2", 3020, "cuMemcpyHtoD_v2_ptds"),
        ("cuMemcpyDtoH_v2", 3020, "cuMemcpyDtoH_v2_ptds"),
        ("cuMemcpyDtoD_v2", 3020, "cuMemcpyDtoD_v2_ptds"),
        ("cuMemcpyHtoDAsync_v2", 3020, "cuMemcpyHtoDAsync_v2_ptsz"),
        ("cuMemcpyDtoHAsync_v2", 3020, "cuMemcpyDtoHAsync_v2_ptsz"),
        ("cuMemcpyDtoDAsync_v2", 3020, "cuMemcpyDtoDAsync_v2_ptsz"),
        ("cuMemsetD8_v2", 3020, "cuMemsetD8_v2_ptds"),
        ("cuMemsetD32_v2", 3020, "cuMemsetD32_v2_ptds"),
    ] {
        let f = find(name);
        assert_eq!(f.version, legacy, "{name}");
        assert_eq!(
            f.per_thread,
            Some(PerThreadVariant {
                symbol: symbol.into(),
                version: 7000
            }),
            "{name}"
        );
    }
}

#[test]
fn an_unsuffixed_declaration_beside_its_suffixed_twin_is_the_oldest_abi() {
    // 12.9's cuda.h declares both cuEventElapsedTime and cuEventElapsedTime_v2 with one
    // signature; PFN_cuEventElapsedTime_v2000 and _v12080 match both. A C program calling
    // cuEventElapsedTime links the export of that name, the 2000 ABI.
    let ws = config();
    let generated = pipeline::generate(&ws, Ctk::V12_9, &Default::default()).expect("generate");
    let version = |name: &str| {
        generated
            .model
            .driver
            .functions
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.version)
    };
    assert_eq!(version("cuEventElapsedTime"), Some(2000));
    assert_eq!(version("cuEventElapsedTime_v2"), Some(12080));
}

/// This checkout's configuration with its templates read from a copy, each edited by `edit`.
fn with_templates(edit: impl Fn(&str, String) -> String) -> Config {
    let config = config();
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(config.root.join("templates")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(entry.path()).unwrap();
        std::fs::write(dir.path().join(&name), edit(&name, text)).unwrap();
    }
    Config {
        templates: Templates::load(dir.path()).expect("the edited templates"),
        ..config
    }
}

#[test]
fn the_audit_stops_a_template_that_shadows_the_host_function() {
    let copy = with_templates(|name, text| {
        if name != "driver_function.rs" {
            return text;
        }
        // A wrapper that swaps in its own function under the caller's parameter name.
        let edited = text.replacen(
            "    driver_result(",
            "    let fn_: CUhostFn = None;\n    driver_result(",
            1,
        );
        assert_ne!(edited, text, "the template has the forwarding line");
        edited
    });
    let ws = config();
    let inputs = Inputs::gather(&ws.inputs, Ctk::V13_0, None).expect("the pinned inputs");
    let err = pipeline::generate_from(&copy, &inputs)
        .expect_err("a wrapper that rebinds its parameters must not be generated");
    let text = err.to_string();
    assert!(
        text.starts_with("the driver wrappers of CTK 13.0 fail the no-trampoline audit: ")
            && text.contains("cuLaunchHostFunc: binds `fn_ : CUhostFn` with `let`")
            && !text.contains('\n'),
        "{text}"
    );
}

/// The one error of generating 13.0 with the template `name` edited by `edit`.
fn generation_error(name: &str, edit: impl Fn(String) -> String) -> String {
    let copy = with_templates(|file, text| if file == name { edit(text) } else { text });
    let ws = config();
    let inputs = Inputs::gather(&ws.inputs, Ctk::V13_0, None).expect("the pinned inputs");
    pipeline::generate_from(&copy, &inputs)
        .expect_err("a misspelt placeholder must not be generated")
        .to_string()
}

#[test]
fn generation_stops_at_a_misspelt_placeholder_of_a_module_template() {
    let text = generation_error("target_mod.rs", |text| {
        text.replacen("macro_rules! __PART__", "macro_rules! __PRAT__", 1)
    });
    assert!(
        text.starts_with("src/bindings/ctk_13_0/mod.rs: the template ")
            && text.ends_with(
                "target_mod.rs names the placeholder(s) __PRAT__, which the writer has no value for: fix their spelling (its header lists those it fills) (nothing was written)"
            )
            && !text.contains('\n'),
        "{text}"
    );
}

#[test]
fn generation_stops_at_a_misspelt_placeholder_of_a_function_template() {
    // A word of a C string literal and an identifier of the wrapper, each misspelt.
    let text = generation_error("driver_function.rs", |text| {
        text.replacen("c\"__base__\"", "c\"__bsae__\"", 1).replacen(
            "entry::__name__.function()",
            "entry::__nmae__.function()",
            1,
        )
    });
    assert!(
        text.starts_with("src/bindings/ctk_13_0/driver.rs: the template ")
            && text.ends_with(
                "driver_function.rs names the placeholder(s) __bsae__, __nmae__, which the writer has no value for: fix their spelling (its header lists those it fills) (nothing was written)"
            )
            && !text.contains('\n'),
        "{text}"
    );
}
