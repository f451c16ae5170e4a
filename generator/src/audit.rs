//! Audits of generated code. The one that matters most: every wrapper that takes a host function
//! must hand the caller's function pointer and user data to CUDA unchanged (no trampoline, no
//! copy, no reordering). It works on syntax trees, so it checks what was really emitted.

use std::collections::HashMap;

use quote::ToTokens;
use syn::visit::{self, Visit};

use crate::model::HOST_FUNCTION_TYPES;

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

/// Whether a parameter type carries a host function (directly or through a params struct).
pub fn carries_host_function(ty: &syn::Type) -> bool {
    let text = ty.to_token_stream().to_string();
    text.split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|w| HOST_FUNCTION_TYPES.contains(&w))
}

/// The wrappers in `file` that take a host function, by name.
pub fn host_function_wrappers(file: &syn::File) -> Vec<&syn::ItemFn> {
    file.items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Fn(f) if params(f).iter().any(|(_, ty)| carries_host_function(ty)) => {
                Some(f)
            }
            _ => None,
        })
        .collect()
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

/// Checks that every host-function wrapper in `file` forwards its parameters unchanged: exactly
/// one call in its body takes all of them, as plain names, in declaration order, and no
/// parameter is used anywhere else.
pub fn forwarding_violations(file: &syn::File) -> Vec<Violation> {
    let mut out = Vec::new();
    for f in host_function_wrappers(file) {
        let names: Vec<String> = params(f).into_iter().map(|(n, _)| n).collect();
        let mut uses = Uses {
            names: &names,
            counts: HashMap::new(),
            forwarding_calls: 0,
        };
        uses.visit_block(&f.block);
        let function = f.sig.ident.to_string();
        if uses.forwarding_calls != 1 {
            out.push(Violation {
                function: function.clone(),
                problem: format!(
                    "expected exactly one call forwarding ({}) in order, found {}",
                    names.join(", "),
                    uses.forwarding_calls
                ),
            });
        }
        for n in &names {
            let count = uses.counts.get(n).copied().unwrap_or(0);
            if count != 1 {
                out.push(Violation {
                    function: function.clone(),
                    problem: format!(
                        "parameter `{n}` is used {count} times; it must appear once, as an argument of the forwarding call"
                    ),
                });
            }
        }
    }
    out
}

struct Uses<'a> {
    names: &'a [String],
    counts: HashMap<String, usize>,
    forwarding_calls: usize,
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        let args: Vec<String> = call
            .args
            .iter()
            .map(|a| match a {
                syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                    p.path.to_token_stream().to_string()
                }
                _ => String::new(),
            })
            .collect();
        if args == self.names {
            self.forwarding_calls += 1;
        }
        visit::visit_expr_call(self, call);
    }

    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        if let Some(id) = p.path.get_ident() {
            let id = id.to_string();
            if self.names.contains(&id) {
                *self.counts.entry(id).or_default() += 1;
            }
        }
        visit::visit_expr_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // A parameter hidden in a macro's tokens is a use the tree walk cannot see: count it so
        // that it shows up as a second use.
        for t in m.tokens.clone() {
            if let proc_macro2::TokenTree::Ident(i) = t {
                let id = i.to_string();
                if self.names.contains(&id) {
                    *self.counts.entry(id).or_default() += 1;
                }
            }
        }
        visit::visit_macro(self, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(src: &str) -> Vec<Violation> {
        forwarding_violations(&syn::parse_file(src).unwrap())
    }

    #[test]
    fn a_forwarding_wrapper_passes() {
        let v = check(
            r#"pub unsafe fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) -> Result<(), Error> {
                let f = get()?;
                driver_result("cuLaunchHostFunc", unsafe { f(hStream, fn_, userData) }.0)
            }"#,
        );
        assert_eq!(v, []);
    }

    #[test]
    fn a_trampoline_is_caught() {
        let v = check(
            r#"pub unsafe fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) -> Result<(), Error> {
                let record = Box::into_raw(Box::new((fn_, userData)));
                driver_result("cuLaunchHostFunc", unsafe { f(hStream, Some(trampoline), record.cast()) }.0)
            }"#,
        );
        assert!(
            v.iter().any(|v| v.problem.contains("exactly one call")),
            "{v:?}"
        );
    }

    #[test]
    fn swapped_or_duplicated_arguments_are_caught() {
        let swapped = check(
            "pub unsafe fn cuStreamAddCallback(s: CUstream, cb: CUstreamCallback, d: *mut c_void, fl: u32) { f(s, cb, fl, d) }",
        );
        assert!(!swapped.is_empty());
        let twice = check(
            "pub unsafe fn cuStreamAddCallback(s: CUstream, cb: CUstreamCallback, d: *mut c_void, fl: u32) { keep(d); f(s, cb, d, fl) }",
        );
        assert!(
            twice
                .iter()
                .any(|v| v.problem.contains("`d` is used 2 times")),
            "{twice:?}"
        );
        let in_macro = check(
            "pub unsafe fn cuLaunchHostFunc(s: CUstream, fn_: CUhostFn, d: *mut c_void) { println!(\"{:?}\", d); f(s, fn_, d) }",
        );
        assert!(!in_macro.is_empty());
    }

    #[test]
    fn wrappers_without_host_functions_are_not_audited() {
        assert_eq!(check("pub unsafe fn cuInit(flags: u32) { g() }"), []);
    }
}
