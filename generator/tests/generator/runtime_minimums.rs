//! The runtime version each committed wrapper names (the `needs` of its "not available" error,
//! the libcudart a user must install) is the first pinned target of its major whose
//! `cuda_runtime_api.h` declares the function: checked against the pinned headers themselves,
//! read here from the hash-checked runtime wheels of every pinned target (fetched into the input
//! cache on first use), with a scan of their own (C statements, not the generator's pattern).

use std::collections::BTreeMap;

use hostcb_generator::Ctk;
use hostcb_generator::emit;
use hostcb_generator::inputs::{Fetcher, unpack_wheel};
use syn::visit::Visit;

use crate::config;

/// Where each major's runtime wheel keeps `cuda_runtime_api.h`.
fn header_path(major: u32) -> &'static str {
    match major {
        12 => "nvidia/cuda_runtime/include/cuda_runtime_api.h",
        13 => "nvidia/cu13/include/cuda_runtime_api.h",
        other => panic!("no runtime wheel layout known for CUDA {other}"),
    }
}

/// The functions a runtime header declares: every C statement (text between `;`, `{` and `}`,
/// comments removed) that starts with `extern` names the identifier before its first `(`, under the `_vN`
/// export that an object-like `#define cudaX [wrapper(]cudaX_vN[)]` renames it to.
fn declared(text: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let renames: BTreeMap<String, String> = text
        .lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix('#')?.trim_start();
            let mut words = rest.strip_prefix("define")?.split_whitespace();
            let from = words.next()?.to_owned();
            let value = words.collect::<String>();
            let inner = value
                .split_once('(')
                .map_or(value.as_str(), |(_, inner)| inner);
            let to = ident(inner);
            let suffix = to.strip_prefix(from.as_str())?.strip_prefix("_v")?;
            (!suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit())).then_some((from, to))
        })
        .collect();
    let mut code = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("/*") {
        code.push_str(&rest[..at]);
        rest = rest[at..]
            .find("*/")
            .map_or("", |end| &rest[at + end + 2..]);
    }
    code.push_str(rest);
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    code.split([';', '{', '}'])
        .filter_map(|statement| {
            let statement = statement.trim_start().strip_prefix("extern")?;
            if statement.trim_start().starts_with('"') {
                return None;
            }
            let (before, _) = statement.split_once('(')?;
            let name = before
                .trim_end()
                .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()?
                .to_owned();
            let name = renames.get(&name).cloned().unwrap_or(name);
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The `RuntimeFn::new(c"name", major, per_thread, version, ..)` initialisers of a file.
#[derive(Default)]
struct Initialisers(Vec<(String, u32, u32)>);

impl<'a> Visit<'a> for Initialisers {
    fn visit_expr_call(&mut self, call: &'a syn::ExprCall) {
        let is_new = matches!(&*call.func, syn::Expr::Path(p)
            if p.path.segments.len() == 2
                && p.path.segments[0].ident == "RuntimeFn"
                && p.path.segments[1].ident == "new");
        if is_new {
            let args: Vec<&syn::Expr> = call.args.iter().collect();
            let lit = |e: &syn::Expr| match e {
                syn::Expr::Lit(l) => Some(l.lit.clone()),
                _ => None,
            };
            match (lit(args[0]), lit(args[1]), lit(args[3])) {
                (
                    Some(syn::Lit::CStr(name)),
                    Some(syn::Lit::Int(major)),
                    Some(syn::Lit::Int(v)),
                ) => self.0.push((
                    name.value().to_string_lossy().into_owned(),
                    major.base10_parse().unwrap(),
                    v.base10_parse().unwrap(),
                )),
                _ => panic!(
                    "an unexpected RuntimeFn::new call: {}",
                    quote::quote!(#call)
                ),
            }
        }
        syn::visit::visit_expr_call(self, call);
    }
}

#[test]
fn every_committed_runtime_minimum_is_the_first_pinned_header_that_declares_it() {
    let config = config();
    let lock = config.lock();
    let fetcher = Fetcher::pinned(&config.inputs);
    let scratch = tempfile::tempdir().unwrap();
    // Every pinned target's declarations, by target.
    let mut headers: BTreeMap<Ctk, Vec<String>> = BTreeMap::new();
    for ctk in lock.targets() {
        let (wheel, _) = fetcher
            .wheel(&lock.target(ctk).unwrap().headers, &config.inputs.cache)
            .unwrap_or_else(|e| panic!("the runtime wheel of {ctk}: {e}"));
        let dest = scratch.path().join(ctk.module());
        std::fs::create_dir(&dest).unwrap();
        let path = header_path(ctk.major());
        unpack_wheel(wheel.path(), path, &dest).unwrap();
        let text = std::fs::read_to_string(dest.join(path)).unwrap();
        headers.insert(ctk, declared(&text));
    }
    let first = |name: &str, of: Ctk| {
        headers
            .iter()
            .filter(|(ctk, _)| ctk.major() == of.major() && **ctk <= of)
            .find(|(_, names)| names.iter().any(|n| n == name))
            .map(|(ctk, _)| ctk.cuda_version())
    };

    let mut report = Vec::new();
    for &ctk in &config.targets {
        let path = config.out.join(emit::target_dir(ctk)).join("runtime.rs");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut found = Initialisers::default();
        found.visit_file(&syn::parse_file(&text).unwrap());
        assert!(
            found.0.len() > 250,
            "{}: only {} runtime entry points",
            path.display(),
            found.0.len()
        );
        let wrong: Vec<String> = found
            .0
            .iter()
            .filter_map(|(name, major, version)| {
                assert_eq!(*major, ctk.major(), "{name}");
                let want = first(name, ctk);
                (want != Some(*version)).then(|| format!("{name} says {version}, headers {want:?}"))
            })
            .collect();
        if !wrong.is_empty() {
            report.push(format!(
                "{ctk}: {} of {} runtime minimums differ from the pinned headers, e.g. {}",
                wrong.len(),
                found.0.len(),
                wrong.iter().take(4).cloned().collect::<Vec<_>>().join("; ")
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn the_statement_scan_sees_declarations_not_comments() {
    let text = "/* CUDARTAPI cudaInComment( */\n// CUDARTAPI cudaInLineComment(\n\
                #define cudaRenamed __CUDART_API_PTSZ(cudaRenamed_v2)\n\
                #define cudaReal __CUDART_API_PTDS(cudaReal)\n\
                extern __host__ cudaError_t CUDARTAPI\n cudaReal(int x);\n\
                extern __host__ cudaError_t CUDARTAPI cudaRenamed(int x);\n\
                extern __host__ const char* CUDARTAPI cudaOther(void) { }\n\
                extern \"C\" {\n extern __host__ cudaError_t cudaNoMacro(int x);\n }";
    assert_eq!(
        declared(text),
        ["cudaReal", "cudaRenamed_v2", "cudaOther", "cudaNoMacro"]
    );
}
