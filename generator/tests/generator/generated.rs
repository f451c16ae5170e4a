//! Tests of the committed output and of the pipeline on the real, pinned inputs (fetched from
//! PyPI into the input cache on first use): the ABI versions the model picks, the no-trampoline
//! audit over every committed wrapper, stale output (`cargo xtask check`), and determinism.

use std::path::PathBuf;

use hostcb_generator::Ctk;
use hostcb_generator::audit;
use hostcb_generator::emit::{self, tree::Mode};
use hostcb_generator::model::PerThreadVariant;
use hostcb_generator::pipeline::{self, Options};

use crate::config;

fn committed(ctk: Ctk, api: &str) -> (PathBuf, syn::File) {
    let path = config()
        .out
        .join(emit::target_dir(ctk))
        .join(format!("{api}.rs"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (path, syn::parse_file(&text).expect("generated file parses"))
}

#[test]
fn every_committed_host_function_wrapper_forwards_its_arguments_unchanged() {
    let mut audited = Vec::new();
    let listed = config().targets;
    let common = config().out.join(emit::COMMON);
    let common =
        std::fs::read_to_string(&common).unwrap_or_else(|e| panic!("{}: {e}", common.display()));
    let common = syn::parse_file(&common).expect("common.rs parses").items;
    let common = audit::definitions(&common);
    for &ctk in &listed {
        for api in ["driver", "runtime"] {
            let (path, file) = committed(ctk, api);
            let violations = audit::forwarding_violations(&file, &common);
            assert!(violations.is_empty(), "{}: {violations:?}", path.display());
            let violations = audit::entry_point_violations(&file);
            assert!(violations.is_empty(), "{}: {violations:?}", path.display());
            audited.extend(
                audit::host_function_wrappers(&file, &common)
                    .iter()
                    .map(|f| format!("{ctk}/{api}/{}", f.sig.ident)),
            );
        }
    }
    // The audit must have seen the wrappers that matter, or it proves nothing: every listed
    // target's host-function wrappers, and those named here of the targets listed.
    for ctk in &listed {
        let seen = audited
            .iter()
            .filter(|a| a.starts_with(&format!("{ctk}/")))
            .count();
        assert!(seen >= 10, "CTK {ctk}: only {seen} wrappers audited");
    }
    let must = [
        "12.9/driver/cuLaunchHostFunc",
        "12.9/runtime/cudaLaunchHostFunc",
        "13.0/driver/cuStreamAddCallback",
        "13.0/driver/cuGraphAddHostNode",
        "13.0/driver/cuGraphExecHostNodeSetParams",
        "13.0/driver/cuUserObjectCreate",
        "13.0/runtime/cudaGraphHostNodeSetParams",
        "13.5/driver/cuLaunchHostFunc_v2",
        "13.5/runtime/cudaLaunchHostFunc_v2",
    ];
    let must = must
        .iter()
        .filter(|m| listed.iter().any(|c| m.starts_with(&format!("{c}/"))));
    for must in must {
        assert!(
            audited.iter().any(|a| a == must),
            "{must} was not audited: {audited:?}"
        );
    }
}

#[test]
fn the_13_5_model_gives_each_declaration_its_own_abi_version() {
    let generated =
        pipeline::generate(&config(), Ctk::V13_5, &Options::default()).expect("generate 13.5");
    let find = |name: &str| {
        generated
            .model
            .driver
            .functions
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} missing from the 13.5 model"))
    };
    // The header's 3-argument cuLaunchHostFunc is ABI 10000; asking for the target's 13050
    // could hand back the 4-argument 13.1 ABI.
    let v1 = find("cuLaunchHostFunc");
    assert_eq!(
        (v1.base.as_str(), v1.version, v1.params.len()),
        ("cuLaunchHostFunc", 10000, 3)
    );
    assert_eq!(
        v1.per_thread,
        Some(PerThreadVariant {
            symbol: "cuLaunchHostFunc_ptsz".into(),
            version: 10000
        })
    );
    let v2 = find("cuLaunchHostFunc_v2");
    assert_eq!(
        (v2.base.as_str(), v2.version, v2.params.len()),
        ("cuLaunchHostFunc", 13010, 4)
    );
    let capture = find("cuStreamBeginCapture_v2");
    assert_eq!(
        (capture.base.as_str(), capture.version),
        ("cuStreamBeginCapture", 10010)
    );
    assert_eq!(capture.aliases, ["cuStreamBeginCapture"]);
    let instantiate = find("cuGraphInstantiateWithFlags");
    assert_eq!(instantiate.aliases, ["cuGraphInstantiate"]);
    let runtime_v2 = generated
        .model
        .runtime
        .functions
        .iter()
        .find(|f| f.name == "cudaLaunchHostFunc_v2")
        .expect("cudaLaunchHostFunc_v2 in 13.5");
    // The runtime needs the first runtime that declares it: the 13.2 header (the driver ABI
    // is 13010, but the 13.1 runtime header lacks the function).
    assert_eq!(runtime_v2.version, 13020);
    assert_eq!(
        runtime_v2.per_thread,
        Some(PerThreadVariant {
            symbol: "cudaLaunchHostFunc_v2_ptsz".into(),
            version: 13020
        })
    );
}

/// Several targets in one process (as `regen --ctk all` runs them) record the pinned libclang
/// whatever the process environment says: the configuration alone chooses it.
#[test]
fn later_targets_in_one_process_still_record_the_pinned_libclang() {
    let mut config = config();
    config.inputs.libclang_path = None;
    for ctk in [Ctk::V13_0, Ctk::V13_5] {
        let generated = pipeline::generate(&config, ctk, &Options::default()).expect("generate");
        let provenance = &generated.files.last().expect("provenance").contents;
        assert!(!provenance.contains("override"), "{ctk}: {provenance}");
        assert!(
            provenance.contains("libclang-18.1.1"),
            "{ctk}: {provenance}"
        );
        assert!(
            generated.warnings.is_empty(),
            "{ctk}: {:?}",
            generated.warnings
        );
    }
}

#[test]
fn generation_is_deterministic_and_a_second_write_changes_nothing() {
    let config = config();
    let first = pipeline::generate(&config, Ctk::V12_9, &Options::default()).expect("generate");
    let second = pipeline::generate(&config, Ctk::V12_9, &Options::default()).expect("generate");
    assert_eq!(first.files, second.files);
    let out = tempfile::tempdir().unwrap();
    let written = emit::tree::ensure_tree(out.path(), &first.files, false, Mode::Write).unwrap();
    assert_eq!(written.written.len(), first.files.len());
    let again = emit::tree::ensure_tree(out.path(), &second.files, false, Mode::Write).unwrap();
    assert!(again.written.is_empty(), "{:?}", again.written);
    assert_eq!(again.unchanged.len(), first.files.len());
}

/// Every function and named type the headers declare is bound, but the deny-list's functions;
/// every deny-listed function is declared by some listed target's header (a typo or a stale
/// entry would otherwise deny nothing) and has no wrapper in any committed file.
#[test]
fn everything_declared_is_bound_but_the_deny_list_which_is_emitted_nowhere() {
    use hostcb_generator::allowlist::DenyList;
    use hostcb_generator::model::{Api, Shape};
    let ws = config();
    let apis = [Api::Driver, Api::Runtime];
    // Per API: what the headers declare but deny, and the wrappers the committed files emit.
    let mut declared = [(); 2].map(|()| std::collections::BTreeSet::new());
    let mut emitted: [Vec<String>; 2] = Default::default();
    // Each target's model is read once (both APIs), the slow part of this test.
    for &ctk in &ws.targets {
        let model =
            pipeline::read_model(&ws, ctk, &pipeline::Options::default()).expect("read the model");
        for (i, api) in apis.into_iter().enumerate() {
            declared[i].extend(model.api(api).declared.denied.iter().cloned());
            // Everything the headers declare is bound, but the deny-list's functions.
            let c = model.api(api).coverage();
            eprintln!("CTK {ctk} {}: {c}", api.as_str());
            assert_eq!(
                (c.functions_bound + c.functions_denied, c.types_bound),
                (c.functions_declared, c.types_declared),
                "CTK {ctk} {}: {c}",
                api.as_str()
            );
            assert!(
                c.functions_declared > 250,
                "CTK {ctk} {}: {c}",
                api.as_str()
            );
            // The model sees into every type of a signature or a definition: none is only
            // tokens (`CType::Other`, which the host-function analysis must take for a carrier).
            let part = model.api(api);
            let signatures = part
                .functions
                .iter()
                .flat_map(|f| f.params.iter().map(|p| &p.ty).chain([&f.ret]));
            let definitions = part
                .definitions
                .shapes
                .values()
                .flat_map(|shape| match shape {
                    Shape::Struct(fields) | Shape::Union(fields) => {
                        fields.iter().map(|f| &f.1).collect()
                    }
                    Shape::Tuple(tys) => tys.iter().collect(),
                    Shape::Alias(ty) => vec![ty],
                    Shape::Rename(_) => Vec::new(),
                });
            let opaque: Vec<String> = signatures
                .chain(definitions)
                .filter(|ty| opaque(ty))
                .map(ToString::to_string)
                .collect();
            assert!(
                opaque.is_empty(),
                "CTK {ctk} {}: types the model holds only as tokens: {opaque:?}",
                api.as_str()
            );
            let (_, file) = committed(ctk, api.as_str());
            emitted[i].extend(file.items.iter().filter_map(|item| match item {
                syn::Item::Fn(f) => Some(f.sig.ident.to_string()),
                _ => None,
            }));
        }
    }
    for (i, api) in apis.into_iter().enumerate() {
        let list = DenyList::load(
            &ws.root
                .join(format!("generator/allowlist/{}.txt", api.as_str())),
        )
        .unwrap();
        for d in &list.functions {
            assert!(
                declared[i].contains(&d.name),
                "{}: the deny-list names {}, which no listed target's header declares",
                api.as_str(),
                d.name
            );
            assert!(
                !emitted[i].contains(&d.name),
                "{}: {} is deny-listed but has a wrapper",
                api.as_str(),
                d.name
            );
        }
    }
}

/// Whether `ty` is, or holds, a type the model keeps only as tokens.
fn opaque(ty: &hostcb_generator::model::CType) -> bool {
    use hostcb_generator::model::CType;
    match ty {
        CType::Other(_) => true,
        CType::Pointer { to: t, .. } | CType::Array { of: t, .. } => opaque(t),
        CType::Generic { args, .. } => args.iter().any(opaque),
        CType::Named(_) | CType::Function { .. } => false,
    }
}

/// Every doc comment of a syntax tree, one string per item (consecutive `#[doc]` joined).
fn doc_comments(file: &syn::File) -> Vec<String> {
    use syn::visit::Visit;
    #[derive(Default)]
    struct Docs(Vec<String>);
    impl Docs {
        fn take(&mut self, attrs: &[syn::Attribute]) {
            let lines = hostcb_generator::reader::doc(attrs);
            if !lines.is_empty() {
                self.0.push(lines.join("\n"));
            }
        }
    }
    impl<'a> Visit<'a> for Docs {
        fn visit_file(&mut self, f: &'a syn::File) {
            self.take(&f.attrs);
            syn::visit::visit_file(self, f);
        }
        fn visit_item(&mut self, i: &'a syn::Item) {
            use quote::ToTokens;
            // Every item kind's attributes, without naming each kind.
            let attrs: Vec<syn::Attribute> = syn::parse2::<ItemAttrs>(i.to_token_stream())
                .map(|a| a.0)
                .unwrap_or_default();
            self.take(&attrs);
            syn::visit::visit_item(self, i);
        }
        fn visit_field(&mut self, f: &'a syn::Field) {
            self.take(&f.attrs);
            syn::visit::visit_field(self, f);
        }
        fn visit_impl_item_const(&mut self, c: &'a syn::ImplItemConst) {
            self.take(&c.attrs);
            syn::visit::visit_impl_item_const(self, c);
        }
        fn visit_variant(&mut self, v: &'a syn::Variant) {
            self.take(&v.attrs);
            syn::visit::visit_variant(self, v);
        }
    }
    /// The outer attributes an item starts with.
    struct ItemAttrs(Vec<syn::Attribute>);
    impl syn::parse::Parse for ItemAttrs {
        fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
            let attrs = input.call(syn::Attribute::parse_outer)?;
            input.parse::<proc_macro2::TokenStream>()?;
            Ok(ItemAttrs(attrs))
        }
    }
    let mut docs = Docs::default();
    docs.visit_file(file);
    docs.0
}

/// The headers' Doxygen is Markdown in every committed file: no command, HTML list or old
/// escape of one survives outside a code block.
#[test]
fn no_raw_doxygen_survives_in_committed_docs() {
    let command = regex::Regex::new(r"\\[A-Za-z]").unwrap();
    let code_span = regex::Regex::new(r"`[^`]*`").unwrap();
    let mut raw = Vec::new();
    let mut seen = 0;
    for ctk in config().targets {
        for api in ["driver", "runtime"] {
            let (path, file) = committed(ctk, api);
            for doc in doc_comments(&file) {
                seen += 1;
                let mut fenced = false;
                for line in doc.lines() {
                    if line.trim_start().starts_with("```") {
                        fenced = !fenced;
                        continue;
                    }
                    if fenced {
                        continue;
                    }
                    // Inline code (`\n`) is C, not Doxygen.
                    let line = &code_span.replace_all(line, "``");
                    let bad = [
                        "\\param", "\\return", "\\brief", "\\note", "\\sa", "\\p ", "<li>", "\\<",
                        "<ul>",
                    ]
                    .iter()
                    .any(|s| line.contains(s))
                        || command.is_match(line);
                    if bad {
                        raw.push(format!("{}: {line}", path.display()));
                    }
                }
            }
        }
    }
    assert!(seen > 1000, "only {seen} doc comments found");
    assert!(
        raw.is_empty(),
        "{} lines:\n{}",
        raw.len(),
        raw[..raw.len().min(40)].join("\n")
    );
}

/// Every function the headers mark `__CUDA_DEPRECATED` carries `#[deprecated]` in the committed
/// files (under its own name or through the alias the header's macro maps it to), and no other
/// does: read from the header text, not from the libclang scan the generator uses.
#[test]
fn the_headers_deprecations_reach_the_committed_wrappers() {
    let ws = config();
    let re = regex::Regex::new(r"__CUDA_DEPRECATED\b[^;{}#]*?\b(cu\w+)\s*\(").unwrap();
    for &ctk in &ws.targets {
        let inputs = hostcb_generator::inputs::Inputs::gather(&ws.inputs, ctk, None)
            .expect("the pinned inputs");
        for (api, header) in [("driver", "cuda.h"), ("runtime", "cuda_runtime_api.h")] {
            let text =
                std::fs::read_to_string(inputs.headers.include_dirs[0].join(header)).unwrap();
            let marked: std::collections::BTreeSet<String> =
                re.captures_iter(&text).map(|c| c[1].to_owned()).collect();
            let (_, file) = committed(ctk, api);
            let mut deprecated = std::collections::BTreeSet::new();
            let mut alias_of = std::collections::BTreeMap::new();
            for item in &file.items {
                match item {
                    syn::Item::Fn(f) if f.attrs.iter().any(|a| a.path().is_ident("deprecated")) => {
                        deprecated.insert(f.sig.ident.to_string());
                    }
                    syn::Item::Use(u) => {
                        if let syn::UseTree::Path(p) = &u.tree
                            && let syn::UseTree::Rename(r) = &*p.tree
                        {
                            alias_of.insert(r.rename.to_string(), r.ident.to_string());
                        }
                    }
                    _ => {}
                }
            }
            let resolve = |n: &String| alias_of.get(n).cloned().unwrap_or_else(|| n.clone());
            let expected: std::collections::BTreeSet<String> = marked.iter().map(resolve).collect();
            assert_eq!(
                deprecated, expected,
                "CTK {ctk} {api}: #[deprecated] wrappers against {header}'s __CUDA_DEPRECATED"
            );
            assert!(
                !expected.is_empty(),
                "CTK {ctk} {api}: the oracle found nothing"
            );
            eprintln!("CTK {ctk} {api}: {} deprecated", expected.len());
        }
    }
}

/// The status a first-call stub returns when it cannot resolve its function
/// (`cuda_hostcb::load::UNRESOLVED`), read from the loader's source.
fn unresolved_status() -> u64 {
    let path = crate::root().join("generated/src/load/first.rs");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = syn::parse_file(&text).expect("the loader parses");
    file.items
        .iter()
        .find_map(|item| match item {
            syn::Item::Const(c) if c.ident == "UNRESOLVED" => match &*c.expr {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(i),
                    ..
                }) => Some(i.base10_parse::<u64>().expect("an integer")),
                _ => None,
            },
            _ => None,
        })
        .expect("first.rs defines `const UNRESOLVED: u32 = <literal>`")
}

#[test]
fn unresolved_is_no_cuda_status() {
    // A first-call stub that cannot resolve its function returns UNRESOLVED, and the result
    // mappers turn it into the error the stub left: no CUresult or cudaError_t may have it.
    let unresolved = unresolved_status();
    for ctk in config().targets {
        for (api, status) in [("driver", "cudaError_enum"), ("runtime", "cudaError")] {
            let (path, file) = committed(ctk, api);
            let mut values = Vec::new();
            for item in &file.items {
                let syn::Item::Impl(i) = item else { continue };
                let syn::Type::Path(t) = &*i.self_ty else {
                    continue;
                };
                if !t.path.is_ident(status) {
                    continue;
                }
                for item in &i.items {
                    let syn::ImplItem::Const(c) = item else {
                        continue;
                    };
                    let syn::Expr::Call(call) = &c.expr else {
                        continue;
                    };
                    if let Some(syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(v),
                        ..
                    })) = call.args.first()
                    {
                        values.push((c.ident.to_string(), v.base10_parse::<u64>().unwrap()));
                    }
                }
            }
            assert!(
                values.len() > 90,
                "{}: found only {} values of {status}",
                path.display(),
                values.len()
            );
            let clash: Vec<_> = values.iter().filter(|(_, v)| *v == unresolved).collect();
            assert!(
                clash.is_empty(),
                "{}: {clash:?} is UNRESOLVED",
                path.display()
            );
        }
    }
}
