//! One Rust type per C type: which of the listed targets' types are written once, in the
//! generated crate's `common` module, and re-exported by every target's `driver` and `runtime`
//! module under their C names.
//!
//! In C, `CUstream` is one type whichever toolkit's headers and whichever API (`cudaStream_t`)
//! declare it. bindgen writes a definition per header set, so without this step every target and
//! API would have a type of its own, and a program crossing them would need a pointer cast.
//!
//! The rule, over every listed target's driver and runtime model ([`decide`]): a name is shared
//! when every definition of it (in any target, in either API) is the same, documentation aside,
//! and everything its definition names is shared too. A type whose definition differs anywhere
//! (an enumeration that gained a value, a structure that grew) stays per target, and so does
//! each type that names it; `cargo xtask diff` lists how they differ. The two status types
//! (`CUresult`, `cudaError_t`) and what they are made of stay per target by rule: each target's
//! file implements the loader's `Status` trait for its own.
//!
//! The shared definition is the newest listed target's (the driver's where both APIs define the
//! name), so its documentation is the newest header's. Each target's layout test still checks
//! every type it re-exports against gcc's layout of that target's headers.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{TokenStream, TokenTree};

use crate::model::{Api, Summary};

/// The status types, which stay per target with everything they are made of.
const PER_TARGET: [&str; 2] = ["CUresult", "cudaError_t"];

/// What [`decide`] shares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shared {
    /// The shared names: each target's files re-export these instead of defining them.
    pub names: BTreeSet<String>,
    /// The definition written once for each shared name (its tokens, as [`crate::model::TypeText::text`]),
    /// by name.
    pub definitions: BTreeMap<String, String>,
}

/// One definition of a name, as [`decide`] compares it.
struct Definition<'a> {
    /// Its tokens without doc comments.
    key: &'a str,
    /// The names of its API's types that it uses, itself excepted.
    uses: BTreeSet<&'a str>,
    /// Its text, documentation included.
    text: &'a str,
    /// Which definition [`decide`] writes: the greatest (the newest target's, its driver's first).
    rank: (usize, bool),
}

/// The shared types of the targets summarised in `summaries`, oldest first (see the module
/// documentation for the rule).
pub fn decide(summaries: &[&Summary]) -> Shared {
    let mut defs: BTreeMap<&str, Vec<Definition<'_>>> = BTreeMap::new();
    for (at, summary) in summaries.iter().enumerate() {
        for api in [Api::Driver, Api::Runtime] {
            for t in summary.types.iter().filter(|t| t.api == api) {
                defs.entry(&t.name).or_default().push(Definition {
                    key: &t.key,
                    uses: t.uses.iter().map(String::as_str).collect(),
                    text: &t.text,
                    rank: (at, api == Api::Driver),
                });
            }
        }
    }
    // The status types and everything they are made of stay per target.
    let mut per_target: BTreeSet<&str> = BTreeSet::new();
    let mut pending: Vec<&str> = PER_TARGET.to_vec();
    while let Some(name) = pending.pop() {
        if per_target.insert(name) {
            for d in defs.get(name).into_iter().flatten() {
                pending.extend(d.uses.iter().copied());
            }
        }
    }
    let mut shared: BTreeSet<&str> = defs
        .iter()
        .filter(|(name, ds)| {
            // A name of no item (items bindgen emits that no name groups) is never shared.
            !name.is_empty() && !per_target.contains(*name) && ds.iter().all(|d| d.key == ds[0].key)
        })
        .map(|(name, _)| *name)
        .collect();
    // A shared definition names only shared types: drop any that uses a per-target one, until
    // none does.
    loop {
        let dropped: Vec<&str> = shared
            .iter()
            .copied()
            .filter(|name| defs[name].iter().any(|d| !d.uses.is_subset(&shared)))
            .collect();
        if dropped.is_empty() {
            break;
        }
        for name in dropped {
            shared.remove(name);
        }
    }
    let definitions = shared
        .iter()
        .map(|name| {
            let newest = defs[name].iter().max_by_key(|d| d.rank);
            let text = newest.expect("a name has a definition").text;
            (name.to_string(), text.to_owned())
        })
        .collect();
    Shared {
        names: shared.into_iter().map(str::to_owned).collect(),
        definitions,
    }
}

/// `tokens` without their outer doc attributes (`#[doc = ..]`), at every depth.
pub fn without_docs(tokens: TokenStream) -> TokenStream {
    let mut out = Vec::new();
    let mut iter = tokens.into_iter().peekable();
    while let Some(tt) = iter.next() {
        match tt {
            TokenTree::Punct(p) if p.as_char() == '#' => {
                if let Some(TokenTree::Group(g)) = iter.peek()
                    && g.delimiter() == proc_macro2::Delimiter::Bracket
                    && matches!(g.stream().into_iter().next(), Some(TokenTree::Ident(i)) if i == "doc")
                {
                    iter.next();
                    continue;
                }
                out.push(TokenTree::Punct(p));
            }
            TokenTree::Group(g) => {
                let mut inner = proc_macro2::Group::new(g.delimiter(), without_docs(g.stream()));
                inner.set_span(g.span());
                out.push(TokenTree::Group(inner));
            }
            other => out.push(other),
        }
    }
    out.into_iter().collect()
}
