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
use hostcb_generator::config::{Config, Environment};
use hostcb_generator::inputs::Inputs;
use hostcb_generator::model::{Function, PerThreadVariant};
use hostcb_generator::pipeline;
use hostcb_generator::writer::Templates;
use regex::Regex;

/// This checkout's configuration, with the environment's input cache and libclang choice.
fn config() -> Config {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    Config::load(root, &Environment::of_process()).expect("the configuration")
}

/// `cudaTypedefs.h` of a target's pinned headers, its text, and the generated model's driver
/// functions.
fn typedefs_and_model(config: &Config, ctk: Ctk) -> (std::path::PathBuf, String, Vec<Function>) {
    let inputs = Inputs::gather(&config.inputs, ctk, None).expect("the pinned inputs");
    let header = inputs.headers.include_dirs[0].join("cudaTypedefs.h");
    let text = std::fs::read_to_string(&header).unwrap();
    let generated = pipeline::generate_from(config, &inputs).expect("generate");
    (header, text, generated.model.driver.functions)
}

/// One `PFN_` typedef: its version, per-thread suffix (`""`, `_ptsz`, `_ptds`), and arity.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Typedef {
    version: u32,
    suffix: String,
    arity: usize,
}

fn arity(params: &str) -> usize {
    let params = params.trim();
    if params.is_empty() || params == "void" {
        0
    } else {
        params.split(',').count()
    }
}

/// Every `PFN_` typedef of the header, by base name.
fn typedefs(text: &str) -> BTreeMap<String, Vec<Typedef>> {
    let re = Regex::new(
        r"typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*PFN_(\w+?)_v(\d+)(_ptsz|_ptds)?\s*\)\s*\(([^;]*)\)\s*;",
    )
    .unwrap();
    let mut out: BTreeMap<String, Vec<Typedef>> = BTreeMap::new();
    for c in re.captures_iter(text) {
        out.entry(c[1].to_owned()).or_default().push(Typedef {
            version: c[2].parse().unwrap(),
            suffix: c.get(3).map_or("", |m| m.as_str()).to_owned(),
            arity: arity(&c[4]),
        });
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

/// What the header says a declaration's per-thread variant is: the newest per-thread typedef
/// of its base with the legacy typedef's arity.
fn expected_per_thread(
    f: &Function,
    all: &BTreeMap<String, Vec<Typedef>>,
) -> Option<PerThreadVariant> {
    let versions = all.get(&f.base)?;
    let legacy = versions
        .iter()
        .find(|t| t.version == f.version && t.suffix.is_empty())
        .unwrap_or_else(|| panic!("{}: no PFN_{}_v{}", f.name, f.base, f.version));
    versions
        .iter()
        .filter(|t| !t.suffix.is_empty() && t.arity == legacy.arity)
        .max_by_key(|t| t.version)
        .map(|t| PerThreadVariant {
            symbol: format!("{}{}", f.name, t.suffix),
            version: t.version,
        })
}

#[test]
fn every_driver_wrapper_has_the_legacy_and_per_thread_versions_of_cuda_typedefs_h() {
    let config = config();
    for &ctk in &config.targets {
        let (header, text, functions) = typedefs_and_model(&config, ctk);
        let all = typedefs(&text);
        let mut with_variant = 0;
        let mut mismatches = Vec::new();
        for f in &functions {
            let expected = expected_per_thread(f, &all);
            with_variant += usize::from(expected.is_some());
            if f.per_thread != expected {
                mismatches.push(format!(
                    "{}: model {:?}, cudaTypedefs.h {:?}",
                    f.name, f.per_thread, expected
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
            with_variant >= 20,
            "CTK {ctk}: {with_variant} per-thread variants"
        );
    }
}

/// 12.9's header spells its pairs out (pinned, so checked whether or not 12.9 is listed): they
/// agree with the model wherever they name a declaration's current base and legacy version.
#[test]
fn the_pairs_12_9_spells_out_agree_with_the_model() {
    let (header, text, functions) = typedefs_and_model(&config(), Ctk::V12_9);
    let pairs = spelled_pairs(&text);
    let mut compared = 0;
    for f in &functions {
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
    let generated =
        pipeline::generate(&config(), Ctk::V13_0, &Default::default()).expect("generate");
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
    let generated =
        pipeline::generate(&config(), Ctk::V12_9, &Default::default()).expect("generate");
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
    let inputs = Inputs::gather(&copy.inputs, Ctk::V13_0, None).expect("the pinned inputs");
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

/// A placeholder misspelt in a template is not filled, and must stop generation rather than
/// reach the output (`c"__bsae__"` compiles, and would ask the driver for no function at all).
#[test]
fn an_unfilled_template_placeholder_stops_generation() {
    let copy = with_templates(|name, text| {
        if name != "driver_function.rs" {
            return text;
        }
        let edited = text.replacen("c\"__base__\"", "c\"__bsae__\"", 1);
        assert_ne!(edited, text, "the template names __base__");
        edited
    });
    let Err(err) = pipeline::generate(&copy, Ctk::V13_0, &Default::default()) else {
        panic!("an unfilled placeholder was generated");
    };
    let text = err.to_string();
    assert_eq!(
        text,
        "src/bindings/ctk_13_0/driver.rs: the template placeholder(s) c\"__bsae__\" were left unfilled; \
         the generator fills only the placeholders templates/*.rs lists, so fix their spelling \
         there (nothing was written)"
    );
}
