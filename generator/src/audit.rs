//! The no-trampoline audit: every wrapper that takes a host function must hand the caller's
//! function pointer and user data to CUDA unchanged (no trampoline, no copy, no reordering).
//!
//! It is a stage of the pipeline ([`crate::pipeline`] runs it on every file before anything is
//! written or compared) and a test over the committed files. It works on syntax trees, so it
//! checks what is really emitted, and it allows a shape rather than forbidding known tricks: the
//! body of a host-function wrapper is one expression in which
//! - the only calls are the one forward, `entry::<wrapper>.function()(<every parameter, in
//!   order>)`, and the result mapper (`driver_result` / `runtime_result`) around it;
//! - nothing binds a name (no `let`, no shadowing, no closure, no `match` or `if let` arm), no
//!   item or macro is declared, nothing is assigned;
//! - each parameter appears exactly once, as a plain argument of the forward.
//!
//! Which wrappers are audited comes from the types themselves
//! ([`crate::model::Definitions::host_function_types`]): any parameter whose type is or holds a function
//! pointer, the same rule the writer uses to attach the lifetime notes.
//!
//! An entry point's first call goes through a stub that resolves the function and forwards the
//! arguments to it (the loader's `first` module); the stub resolves the entry point its static
//! names, so [`entry_point_violations`] checks that every static in the `entry` module names
//! itself (`static X` gives `DriverFn::new::<M>` a marker type `M` of its own whose
//! `NamedEntry::entry` returns `&X`): a stub that named another would call that function with
//! this one's arguments.

use std::collections::HashMap;

use quote::ToTokens;
use syn::visit::{self, Visit};

use crate::model::{CType, Definitions, Shape};

/// The functions a host-function wrapper may call besides its entry point: they map the status
/// code to a `Result` and see no parameter.
const RESULT_MAPPERS: &[&str] = &["driver_result", "runtime_result"];

/// A wrapper that does more than forward its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The wrapper.
    pub function: String,
    /// What it does wrong.
    pub problem: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.function, self.problem)
    }
}

/// The wrappers in `file` that take a host function (directly or through a params struct).
/// `common` holds what the types the file re-exports from the crate's `common` module
/// ([`crate::shared`]) define: a function-pointer type defined there is as much a carrier as one
/// the file defines.
pub fn host_function_wrappers<'a>(
    file: &'a syn::File,
    common: &Definitions,
) -> Vec<&'a syn::ItemFn> {
    let mut defined = definitions(&file.items);
    for (name, shape) in &common.shapes {
        defined
            .shapes
            .entry(name.clone())
            .or_insert_with(|| shape.clone());
    }
    let carriers = defined.host_function_types();
    file.items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Fn(f)
                if params(f)
                    .iter()
                    .any(|(_, ty)| CType::of(ty).carries(&carriers)) =>
            {
                Some(f)
            }
            _ => None,
        })
        .collect()
}

/// The shapes of the types that `items` (a generated file's) define: what the audit needs of
/// them to tell which types carry a host function ([`Definitions::host_function_types`]).
pub fn definitions(items: &[syn::Item]) -> Definitions {
    fn named<'a>(fields: impl IntoIterator<Item = &'a syn::Field>) -> Vec<(String, CType)> {
        fields
            .into_iter()
            .filter_map(|f| Some((f.ident.as_ref()?.to_string(), CType::of(&f.ty))))
            .collect()
    }
    let mut d = Definitions::default();
    for item in items {
        let (name, shape) = match item {
            syn::Item::Struct(s) => match &s.fields {
                syn::Fields::Named(_) => (&s.ident, Shape::Struct(named(&s.fields))),
                fields => (
                    &s.ident,
                    Shape::Tuple(fields.iter().map(|f| CType::of(&f.ty)).collect()),
                ),
            },
            syn::Item::Union(u) => (&u.ident, Shape::Union(named(&u.fields.named))),
            syn::Item::Type(a) => (&a.ident, Shape::Alias(CType::of(&a.ty))),
            _ => continue,
        };
        d.shapes.insert(name.to_string(), shape);
    }
    d
}

fn params(f: &syn::ItemFn) -> Vec<(String, &syn::Type)> {
    f.sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            syn::FnArg::Typed(p) => Some((p.pat.to_token_stream().to_string(), &*p.ty)),
            syn::FnArg::Receiver(_) => None,
        })
        .collect()
}

/// Checks every host-function wrapper in `file` (see the module documentation for the rules);
/// `common` as for [`host_function_wrappers`].
pub fn forwarding_violations(file: &syn::File, common: &Definitions) -> Vec<Violation> {
    let mut out = Vec::new();
    for f in host_function_wrappers(file, common) {
        let function = f.sig.ident.to_string();
        let names: Vec<String> = params(f).into_iter().map(|(n, _)| n).collect();
        let mut body = Body {
            wrapper: &function,
            names: &names,
            counts: HashMap::new(),
            forwards: 0,
            problems: Vec::new(),
        };
        match f.block.stmts.as_slice() {
            [syn::Stmt::Expr(e, None)] => body.visit_expr(e),
            stmts => {
                body.problems.push(format!(
                    "its body must be one forwarding expression, found {} statement(s)",
                    stmts.len()
                ));
                body.visit_block(&f.block);
            }
        }
        if body.forwards != 1 {
            body.problems.push(format!(
                "expected exactly one call forwarding ({}) in order, found {}",
                names.join(", "),
                body.forwards
            ));
        }
        for n in &names {
            let count = body.counts.get(n).copied().unwrap_or(0);
            if count != 1 {
                body.problems.push(format!(
                    "parameter `{n}` is used {count} times; it must appear once, as an argument of the forwarding call"
                ));
            }
        }
        out.extend(body.problems.into_iter().map(|problem| Violation {
            function: function.clone(),
            problem,
        }));
    }
    out
}

struct Body<'a> {
    wrapper: &'a str,
    names: &'a [String],
    counts: HashMap<String, usize>,
    forwards: usize,
    problems: Vec<String>,
}

impl Body<'_> {
    fn count(&mut self, id: &syn::Ident) {
        let id = id.to_string();
        if self.names.contains(&id) {
            *self.counts.entry(id).or_default() += 1;
        }
    }

    /// Whether `callee` is `entry::<wrapper>.function()`, the wrapper's own entry point.
    fn is_own_entry_point(&self, callee: &syn::Expr) -> bool {
        let syn::Expr::MethodCall(m) = callee else {
            return false;
        };
        let syn::Expr::Path(p) = &*m.receiver else {
            return false;
        };
        let path: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        m.method == "function" && m.args.is_empty() && path == ["entry", self.wrapper]
    }
}

/// Checks that every entry point in `file`'s `entry` module names itself to its first-call
/// stub: the initializer of `static X` declares a marker type `M` (an `enum` without variants),
/// implements `NamedEntry` for it with `entry` returning `&X`, and ends with
/// `DriverFn::new::<M>(..)` or `RuntimeFn::new::<M>(..)`.
pub fn entry_point_violations(file: &syn::File) -> Vec<Violation> {
    let mut out = Vec::new();
    for item in &file.items {
        let syn::Item::Mod(m) = item else { continue };
        if m.ident != "entry" {
            continue;
        }
        for item in m.content.iter().flat_map(|(_, items)| items) {
            let syn::Item::Static(s) = item else { continue };
            let syn::Expr::Block(block) = &*s.expr else {
                continue;
            };
            let stmts = &block.block.stmts;
            let Some(call) = stmts.last().and_then(|st| match st {
                syn::Stmt::Expr(e, None) => constructor(e),
                _ => None,
            }) else {
                continue;
            };
            let names = marker_of(call).and_then(|marker| named_by(stmts, &marker));
            if names.as_ref() != Some(&s.ident) {
                out.push(Violation {
                    function: s.ident.to_string(),
                    problem: format!(
                        "its entry point's first-call stub resolves `{}`, not `{}` (`{}` must be \
                         given a marker type declared beside it, an enum without variants whose \
                         `NamedEntry::entry` returns `&{}`)",
                        names.map_or_else(|| "?".to_owned(), |n| n.to_string()),
                        s.ident,
                        spelled(&call.func),
                        s.ident
                    ),
                });
            }
        }
    }
    out
}

/// The `DriverFn::new::<M>(..)` / `RuntimeFn::new::<M>(..)` call of an entry point's
/// initializer (`unsafe { .. }` around it or not).
fn constructor(e: &syn::Expr) -> Option<&syn::ExprCall> {
    match e {
        syn::Expr::Unsafe(u) => match u.block.stmts.as_slice() {
            [syn::Stmt::Expr(e, None)] => constructor(e),
            _ => None,
        },
        syn::Expr::Call(c) => match &*c.func {
            syn::Expr::Path(p)
                if p.path.segments.len() == 2
                    && ["DriverFn", "RuntimeFn"]
                        .iter()
                        .any(|t| p.path.segments[0].ident == t)
                    && p.path.segments[1].ident == "new" =>
            {
                Some(c)
            }
            _ => None,
        },
        _ => None,
    }
}

/// `M` of `new::<M>`.
fn marker_of(call: &syn::ExprCall) -> Option<syn::Ident> {
    let syn::Expr::Path(p) = &*call.func else {
        return None;
    };
    let syn::PathArguments::AngleBracketed(args) = &p.path.segments.last()?.arguments else {
        return None;
    };
    match args.args.iter().collect::<Vec<_>>()[..] {
        [syn::GenericArgument::Type(syn::Type::Path(t))] if t.qself.is_none() => {
            t.path.get_ident().cloned()
        }
        _ => None,
    }
}

/// `X`, where `stmts` declare `enum marker {}` and `impl NamedEntry for marker` whose `entry`
/// returns `&X`.
fn named_by(stmts: &[syn::Stmt], marker: &syn::Ident) -> Option<syn::Ident> {
    let items = || {
        stmts.iter().filter_map(|st| match st {
            syn::Stmt::Item(item) => Some(item),
            _ => None,
        })
    };
    let declared = items().any(|item| {
        matches!(item, syn::Item::Enum(e) if e.ident == *marker && e.variants.is_empty() && e.generics.params.is_empty())
    });
    if !declared {
        return None;
    }
    let mut named = items().filter_map(|item| {
        let syn::Item::Impl(i) = item else {
            return None;
        };
        let (trait_path, _) = i.trait_.as_ref()?;
        let syn::Type::Path(self_ty) = &*i.self_ty else {
            return None;
        };
        if trait_path.segments.last()?.ident != "NamedEntry"
            || self_ty.path.get_ident() != Some(marker)
        {
            return None;
        }
        i.items.iter().find_map(|item| match item {
            syn::ImplItem::Fn(f) if f.sig.ident == "entry" => match f.block.stmts.as_slice() {
                [syn::Stmt::Expr(syn::Expr::Reference(r), None)] if r.mutability.is_none() => {
                    match &*r.expr {
                        syn::Expr::Path(p) => p.path.get_ident().cloned(),
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        })
    });
    let first = named.next();
    // One implementation: a second would make the marker name two statics.
    if named.next().is_some() { None } else { first }
}

fn spelled(e: &impl ToTokens) -> String {
    e.to_token_stream().to_string()
}

impl<'ast> Visit<'ast> for Body<'_> {
    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        let args: Vec<String> = call
            .args
            .iter()
            .map(|a| match a {
                syn::Expr::Path(p) if p.path.get_ident().is_some() => spelled(&p.path),
                _ => String::new(),
            })
            .collect();
        if args == self.names {
            self.forwards += 1;
            if !self.is_own_entry_point(&call.func) {
                self.problems.push(format!(
                    "forwards to `{}`, not to its own entry point `entry::{}.function()`",
                    spelled(&call.func),
                    self.wrapper
                ));
                self.visit_expr(&call.func);
            }
        } else {
            let mapper = matches!(&*call.func, syn::Expr::Path(p)
                if p.path.get_ident().is_some_and(|i| RESULT_MAPPERS.iter().any(|m| i == m)));
            if !mapper {
                self.problems.push(format!(
                    "calls `{}`; a host-function wrapper may only call its entry point and {}",
                    spelled(&call.func),
                    RESULT_MAPPERS.join(" or ")
                ));
            }
            self.visit_expr(&call.func);
        }
        for a in &call.args {
            self.visit_expr(a);
        }
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        self.problems.push(format!(
            "calls the method `{}` outside the forward to its entry point",
            m.method
        ));
        visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        if let Some(id) = p.path.get_ident() {
            self.count(id);
        }
        visit::visit_expr_path(self, p);
    }

    fn visit_local(&mut self, l: &'ast syn::Local) {
        self.problems.push(format!(
            "binds `{}` with `let`; a host-function wrapper binds nothing",
            spelled(&l.pat)
        ));
        visit::visit_local(self, l);
    }

    fn visit_pat(&mut self, p: &'ast syn::Pat) {
        self.problems.push(format!(
            "binds the pattern `{}`; a host-function wrapper binds nothing",
            spelled(p)
        ));
        visit::visit_pat(self, p);
    }

    fn visit_expr_closure(&mut self, c: &'ast syn::ExprClosure) {
        self.problems
            .push("defines a closure; a host-function wrapper only forwards".to_owned());
        visit::visit_expr_closure(self, c);
    }

    fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
        self.problems.push(format!(
            "assigns to `{}`; a host-function wrapper only forwards",
            spelled(&a.left)
        ));
        visit::visit_expr_assign(self, a);
    }

    fn visit_item(&mut self, i: &'ast syn::Item) {
        self.problems
            .push("declares an item in its body; a host-function wrapper only forwards".to_owned());
        visit::visit_item(self, i);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.problems.push(format!(
            "invokes the macro `{}!`, whose expansion the audit cannot see",
            spelled(&m.path)
        ));
        // A parameter in a macro's tokens is a use the tree walk cannot see: count it.
        for t in m.tokens.clone() {
            if let proc_macro2::TokenTree::Ident(i) = t {
                self.count(&i);
            }
        }
        visit::visit_macro(self, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: &str = "pub type CUstream = *mut CUstream_st;
        pub type CUhostFn = ::core::option::Option<unsafe extern \"C\" fn(userData: *mut ::core::ffi::c_void)>;
        pub type CUstreamCallback = ::core::option::Option<unsafe extern \"C\" fn(s: CUstream, st: u32, d: *mut ::core::ffi::c_void)>;
        #[repr(C)] pub struct CUDA_HOST_NODE_PARAMS_v2_st { pub fn_: CUhostFn, pub userData: *mut ::core::ffi::c_void }
        pub type CUDA_HOST_NODE_PARAMS_v2 = CUDA_HOST_NODE_PARAMS_v2_st;";

    fn check(wrapper: &str) -> Vec<Violation> {
        forwarding_violations(
            &syn::parse_file(&format!("{TYPES}\n{wrapper}")).unwrap(),
            &Definitions::default(),
        )
    }

    fn assert_caught(wrapper: &str, problem: &str) {
        let v = check(wrapper);
        assert!(
            v.iter().any(|v| v.problem.contains(problem)),
            "expected a violation containing {problem:?}, got {v:?}"
        );
    }

    #[test]
    fn the_templates_forwarding_wrapper_passes() {
        let v = check(
            r#"pub unsafe fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) -> Result<(), Error> {
                driver_result("cuLaunchHostFunc", unsafe { entry::cuLaunchHostFunc.function()(hStream, fn_, userData) }.0)
            }"#,
        );
        assert_eq!(v, []);
    }

    #[test]
    fn a_trampoline_is_caught() {
        assert_caught(
            r#"pub unsafe fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) -> Result<(), Error> {
                let record = Box::into_raw(Box::new((fn_, userData)));
                driver_result("cuLaunchHostFunc", unsafe { entry::cuLaunchHostFunc.function()(hStream, Some(trampoline), record.cast()) }.0)
            }"#,
            "exactly one call",
        );
    }

    #[test]
    fn a_shadowing_binding_before_the_forward_is_caught() {
        // The names are right and each is used once in the call, but `fn_` is not the caller's.
        assert_caught(
            r#"pub unsafe fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) -> Result<(), Error> {
                let fn_: CUhostFn = Some(trampoline);
                driver_result("cuLaunchHostFunc", unsafe { entry::cuLaunchHostFunc.function()(hStream, fn_, userData) }.0)
            }"#,
            "binds `fn_ : CUhostFn` with `let`",
        );
    }

    #[test]
    fn shadowing_without_let_is_caught() {
        for body in [
            "match Some(trampoline) { fn_ => entry::cuLaunchHostFunc.function()(hStream, fn_, userData) }",
            "if let fn_ = Some(trampoline) { entry::cuLaunchHostFunc.function()(hStream, fn_, userData) } else { 0 }",
            "(|fn_: CUhostFn| entry::cuLaunchHostFunc.function()(hStream, fn_, userData))(Some(trampoline))",
        ] {
            assert_caught(
                &format!(
                    "pub unsafe fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) {{ {body} }}"
                ),
                "binds",
            );
        }
    }

    #[test]
    fn a_forward_to_anything_but_the_own_entry_point_is_caught() {
        assert_caught(
            "pub unsafe fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) { entry::cuStreamAddCallback.function()(hStream, fn_, userData) }",
            "not to its own entry point",
        );
        assert_caught(
            "pub unsafe fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) { wrap(entry::cuLaunchHostFunc.function())(hStream, fn_, userData) }",
            "not to its own entry point",
        );
    }

    #[test]
    fn other_calls_assignments_items_and_macros_are_caught() {
        let wrapper = |body: &str| {
            format!(
                "pub unsafe fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) {{ {body}; entry::cuLaunchHostFunc.function()(hStream, fn_, userData) }}"
            )
        };
        assert_caught(&wrapper("register()"), "calls `register`");
        assert_caught(&wrapper("GLOBAL.push(1)"), "calls the method `push`");
        assert_caught(&wrapper("COUNT = 1"), "assigns to `COUNT`");
        assert_caught(&wrapper("fn helper() {}"), "declares an item");
        assert_caught(
            &wrapper("println!(\"{:?}\", 1)"),
            "invokes the macro `println!`",
        );
    }

    #[test]
    fn swapped_or_duplicated_arguments_are_caught() {
        assert_caught(
            "pub unsafe fn cuStreamAddCallback(s: CUstream, cb: CUstreamCallback, d: *mut c_void, fl: u32) { entry::cuStreamAddCallback.function()(s, cb, fl, d) }",
            "exactly one call",
        );
        assert_caught(
            "pub unsafe fn cuLaunchHostFunc(s: CUstream, fn_: CUhostFn, d: *mut c_void) { println!(\"{:?}\", d); entry::cuLaunchHostFunc.function()(s, fn_, d) }",
            "`d` is used 2 times",
        );
    }

    #[test]
    fn an_entry_point_must_name_itself_to_its_stub() {
        let file = |init: &str| {
            syn::parse_file(&format!(
                "pub mod entry {{ pub static cuInit: DriverFn<unsafe extern \"C\" fn(u32) -> CUresult> = {init}; }}"
            ))
            .unwrap()
        };
        let init = |marker: &str, named: &str, given: &str, ctor: &str| {
            format!(
                "{{ {marker} impl NamedEntry for This {{ type Entry = DriverFn<unsafe extern \"C\" fn(u32) -> CUresult>; fn entry() -> &'static Self::Entry {{ {named} }} }} unsafe {{ {ctor}::new::<{given}>(c\"cuInit\", c\"cuInit\", 2000, 2000, None) }} }}"
            )
        };
        let own = file(&init("enum This {}", "&cuInit", "This", "DriverFn"));
        assert_eq!(entry_point_violations(&own), []);
        for wrong in [
            init("enum This {}", "&cuLaunchHostFunc", "This", "DriverFn"),
            init("enum This {}", "&super::cuInit", "This", "RuntimeFn"),
            init("enum This {}", "&cuInit", "Other", "DriverFn"),
            init("enum This { A }", "&cuInit", "This", "DriverFn"),
            init("", "&cuInit", "This", "DriverFn"),
            init(
                "enum This {} impl NamedEntry for This { fn entry() -> &'static X { &cuLaunchHostFunc } }",
                "&cuInit",
                "This",
                "DriverFn",
            ),
        ] {
            let v = entry_point_violations(&file(&wrong));
            assert_eq!(v.len(), 1, "{wrong}: {v:?}");
            assert!(v[0].problem.contains("first-call stub"), "{v:?}");
        }
    }

    #[test]
    fn host_functions_inside_params_structs_are_found_from_the_definitions() {
        let file = syn::parse_file(&format!(
            "{TYPES}\npub unsafe fn cuGraphAddHostNode(n: *mut u8, p: *const CUDA_HOST_NODE_PARAMS_v2) {{ keep(p); entry::cuGraphAddHostNode.function()(n, p) }}\npub unsafe fn cuInit(flags: u32) {{ g() }}"
        ))
        .unwrap();
        let none = Definitions::default();
        let audited: Vec<String> = host_function_wrappers(&file, &none)
            .iter()
            .map(|f| f.sig.ident.to_string())
            .collect();
        assert_eq!(audited, ["cuGraphAddHostNode"]);
        assert!(!forwarding_violations(&file, &none).is_empty());
    }

    #[test]
    fn host_functions_of_types_the_file_re_exports_are_found_too() {
        // The types live in the crate's `common` module; the file only re-exports them.
        let common = definitions(&syn::parse_file(TYPES).unwrap().items);
        let file = syn::parse_file(
            "pub use crate::common::CUhostFn;\npub unsafe fn cuLaunchHostFunc(s: *mut u8, f: CUhostFn, d: *mut u8) { keep(f); entry::cuLaunchHostFunc.function()(s, f, d) }",
        )
        .unwrap();
        let names = |common: &Definitions| -> Vec<String> {
            host_function_wrappers(&file, common)
                .iter()
                .map(|f| f.sig.ident.to_string())
                .collect()
        };
        assert!(
            names(&Definitions::default()).is_empty(),
            "without the common types there is no carrier"
        );
        assert_eq!(names(&common), ["cuLaunchHostFunc"]);
        assert!(!forwarding_violations(&file, &common).is_empty());
    }
}
