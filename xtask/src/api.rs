//! `cargo xtask api [--bless]`: the public API of the crates users install, listed from rustdoc's
//! JSON output and compared with the listing committed under `api/` (the API of the last release),
//! as the version policy (`docs/releases.md`) allows.
//!
//! Each listing is one line per public item (`fn`, `struct`, field, method, trait impl, ...),
//! with its signature as rustdoc reads it, sorted. The generated crate's target modules
//! (`cuda_hostcb::ctk_*`: the whole CUDA API per target, thousands of items) and the types they
//! share (`cuda_hostcb::common`) are listed as one line per module and kind: the count of items and the SHA-256 of their sorted lines.
//!
//! A line only in the new listing is an addition; a line only in the committed one is a removal or
//! a change (a changed signature is a removal and an addition), as is a target module line whose
//! count or digest changed (such a digest cannot tell an addition from a change, so it is
//! counted as a change). Then:
//!
//! - removals or changes need a breaking version bump over the listing's version (`0.x` → `0.x+1`,
//!   `x.y` → `x+1.0` from 1.0 on);
//! - additions need a newer version;
//! - either needs a section of `CHANGELOG.md` for the workspace's version.
//!
//! `--bless` writes the listings for the current API and version: at a release, or (before the
//! first release) to accept a change on purpose, in a commit that says so.
//!
//! rustdoc's JSON output is unstable: it is made with `RUSTC_BOOTSTRAP=1` on the stable toolchain,
//! in a target folder of its own (`target/xtask-api/`), so the workspace's builds stay fresh. Its
//! format version is checked, so a toolchain that writes another format fails with one line.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The rustdoc JSON format versions this lister reads (Rust 1.95 writes 57).
const FORMATS: &[u64] = &[57];

/// A crate whose public API is listed: its package name, its library's name, and the cargo
/// arguments that build its documentation with the features that show all of it.
struct Listed {
    package: &'static str,
    lib: &'static str,
}

const LISTED: &[Listed] = &[
    Listed {
        package: "cuda-hostcb",
        lib: "cuda_hostcb",
    },
    Listed {
        package: "cuda-hostcb-safe",
        lib: "cuda_hostcb_safe",
    },
    Listed {
        package: "hostcb-seal",
        lib: "hostcb_seal",
    },
];

/// The folder of the committed listings.
pub const API_DIR: &str = "api";

pub fn run(root: &Path, bless: bool) -> anyhow::Result<()> {
    let version = workspace_version(root)?;
    let target_dir = root.join("target/xtask-api");
    build_rustdoc_json(root, &target_dir)?;
    let mut failures = Vec::new();
    for listed in LISTED {
        let json = read_rustdoc_json(&target_dir, listed)?;
        let lines = listing(&json, listed.lib)?;
        let path = root.join(API_DIR).join(format!("{}.txt", listed.package));
        if bless {
            write_listing(&path, listed.package, &version, &lines)?;
            eprintln!(
                "wrote {} ({} lines, version {version})",
                path.display(),
                lines.len()
            );
            continue;
        }
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read {}: write the listing with cargo xtask api --bless",
                path.display()
            )
        })?;
        let (baseline, old) = parse_listing(&text)
            .with_context(|| format!("{} is not a listing of cargo xtask api", path.display()))?;
        let new: BTreeSet<String> = lines.into_iter().collect();
        let removed: Vec<&String> = old.difference(&new).collect();
        let added: Vec<&String> = new.difference(&old).collect();
        for line in &removed {
            println!("{}: - {line}", listed.package);
        }
        for line in &added {
            println!("{}: + {line}", listed.package);
        }
        let needed = if !removed.is_empty() {
            Bump::Breaking
        } else if !added.is_empty() {
            Bump::Additive
        } else {
            Bump::None
        };
        eprintln!(
            "{}: {} line(s) removed or changed, {} added since {baseline}",
            listed.package,
            removed.len(),
            added.len()
        );
        if let Err(why) = allowed(needed, &baseline, &version, root) {
            failures.push(format!("{}: {why}", listed.package));
        }
    }
    if !failures.is_empty() {
        bail!(
            "the public API changed as the version policy (docs/releases.md) does not allow: {}; either undo the change, or bump the version and add its CHANGELOG.md section (or, before the first release, accept it with cargo xtask api --bless)",
            failures.join("; ")
        );
    }
    Ok(())
}

/// The bump that a set of changes needs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Bump {
    None,
    Additive,
    Breaking,
}

/// Whether `version` may follow `baseline` after changes that need `needed`.
fn allowed(needed: Bump, baseline: &str, version: &str, root: &Path) -> Result<(), String> {
    let (old, new) = (parse_version(baseline)?, parse_version(version)?);
    let breaking = if old.0 == 0 {
        new.0 > 0 || new.1 > old.1
    } else {
        new.0 > old.0
    };
    match needed {
        Bump::None => return Ok(()),
        Bump::Additive if new <= old => {
            return Err(format!(
                "public items were added since {baseline}, so the version must be newer than {baseline} (it is {version})"
            ));
        }
        Bump::Breaking if !breaking => {
            return Err(format!(
                "public items were removed or changed since {baseline}, which needs a breaking version bump ({}; it is {version})",
                if old.0 == 0 {
                    format!("0.{}.0 or newer", old.1 + 1)
                } else {
                    format!("{}.0.0 or newer", old.0 + 1)
                }
            ));
        }
        _ => {}
    }
    let changelog = std::fs::read_to_string(root.join("CHANGELOG.md")).unwrap_or_default();
    let has_section = changelog.lines().any(|l| {
        l.strip_prefix("## ")
            .is_some_and(|h| h.trim_start_matches('[').starts_with(version))
    });
    if has_section {
        Ok(())
    } else {
        Err(format!(
            "the API changed since {baseline}, but CHANGELOG.md has no section `## [{version}]` that says how"
        ))
    }
}

fn parse_version(v: &str) -> Result<(u64, u64, u64), String> {
    let parts: Vec<u64> = v
        .split('.')
        .map(|p| p.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("version {v} is not MAJOR.MINOR.PATCH"))?;
    match parts[..] {
        [a, b, c] => Ok((a, b, c)),
        _ => Err(format!("version {v} is not MAJOR.MINOR.PATCH")),
    }
}

/// The `version` of `[workspace.package]` in the root manifest.
fn workspace_version(root: &Path) -> anyhow::Result<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let section = manifest
        .split("\n[workspace.package]\n")
        .nth(1)
        .context("Cargo.toml has no [workspace.package]")?;
    section
        .lines()
        .take_while(|l| !l.starts_with('['))
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .map(str::to_owned)
        .context("[workspace.package] of Cargo.toml has no version")
}

/// Builds the rustdoc JSON of every listed crate, with all its features (hostcb-seal has none),
/// in one cargo run: each crate's docs beside the check of another's (cuda-hostcb's, which the
/// safe layer's docs need), not one after the other.
fn build_rustdoc_json(root: &Path, target_dir: &Path) -> anyhow::Result<()> {
    let status = crate::cargo()
        .args(["doc", "--no-deps", "--quiet", "--all-features"])
        .args(LISTED.iter().flat_map(|l| ["-p", l.package]))
        .arg("--target-dir")
        .arg(target_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("RUSTDOCFLAGS", "-Z unstable-options --output-format json")
        .current_dir(root)
        .status()?;
    if !status.success() {
        bail!("cargo doc of the listed crates with JSON output failed ({status})");
    }
    Ok(())
}

/// Reads the rustdoc JSON of a listed crate that [`build_rustdoc_json`] built.
fn read_rustdoc_json(target_dir: &Path, listed: &Listed) -> anyhow::Result<Value> {
    let path = target_dir.join(format!("doc/{}.json", listed.lib));
    let json: Value = serde_json::from_slice(&std::fs::read(&path)?)
        .with_context(|| format!("{} is not JSON", path.display()))?;
    let format = json["format_version"].as_u64().unwrap_or(0);
    if !FORMATS.contains(&format) {
        bail!(
            "{} has rustdoc JSON format {format}, which this lister does not read ({FORMATS:?}): the toolchain changed; check the listing code in xtask/src/api.rs against the new format",
            path.display()
        );
    }
    Ok(json)
}

/// The listing of a crate: one line per public item, sorted; target modules as digests.
fn listing(json: &Value, lib: &str) -> anyhow::Result<Vec<String>> {
    let index = json["index"].as_object().context("no index")?;
    let item = |id: &Value| -> Option<&Value> {
        index.get(&match id {
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            _ => return None,
        })
    };
    let mut out = Lister {
        item: &item,
        lines: Vec::new(),
    };
    let root = item(&json["root"]).context("no root item")?;
    out.module(lib, root);
    let mut plain = BTreeSet::new();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (path, line) in out.lines {
        // `cuda_hostcb::ctk_13_5::driver::...`: a target module of the generated crate.
        let parts: Vec<&str> = path.split("::").collect();
        // `cuda_hostcb::common::...`: the types every target shares.
        let module = match parts.get(1) {
            Some(m) if lib == "cuda_hostcb" && m.starts_with("ctk_") && parts.len() > 3 => {
                Some(parts[..3].join("::"))
            }
            Some(&"common") if lib == "cuda_hostcb" && parts.len() > 2 => {
                Some(parts[..2].join("::"))
            }
            _ => None,
        };
        if let Some(module) = module {
            let kind = line.split(' ').next().unwrap_or_default();
            groups
                .entry(format!("{module} {kind}"))
                .or_default()
                .push(line);
        } else {
            plain.insert(line);
        }
    }
    for (group, mut lines) in groups {
        lines.sort();
        let mut hash = Sha256::new();
        for l in &lines {
            hash.update(l.as_bytes());
            hash.update(b"\n");
        }
        let digest: String = hash.finalize().iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        });
        plain.insert(format!(
            "group {group}: {} items, sha256 {digest}",
            lines.len()
        ));
    }
    Ok(plain.into_iter().collect())
}

struct Lister<'a> {
    item: &'a dyn Fn(&Value) -> Option<&'a Value>,
    /// (path of the item, line).
    lines: Vec<(String, String)>,
}

impl<'a> Lister<'a> {
    fn push(&mut self, path: &str, line: String) {
        self.lines.push((path.to_owned(), line));
    }

    fn module(&mut self, path: &str, module: &'a Value) {
        let Some(items) = module["inner"]["module"]["items"].as_array() else {
            return;
        };
        for id in items {
            let Some(it) = (self.item)(id) else { continue };
            if let Some(re_export) = it["inner"].get("use") {
                self.re_export(path, re_export);
                continue;
            }
            let name = it["name"].as_str().unwrap_or("_");
            let here = format!("{path}::{name}");
            self.item_at(&here, it);
        }
    }

    /// A `pub use`: the item it names, listed where it is re-exported (a glob: every item of the
    /// module it names); an item of another crate as one `use` line.
    fn re_export(&mut self, path: &str, re_export: &'a Value) {
        let name = re_export["name"].as_str().unwrap_or("_");
        let source = re_export["source"].as_str().unwrap_or("?");
        let target = (self.item)(&re_export["id"]);
        match (target, re_export["is_glob"].as_bool() == Some(true)) {
            (Some(module), true) => self.module(path, module),
            (Some(item), false) => self.item_at(&format!("{path}::{name}"), item),
            (None, true) => self.push(path, format!("use {path}::*: {source}::*")),
            (None, false) => self.push(path, format!("use {path}::{name}: {source}")),
        }
    }

    fn item_at(&mut self, path: &str, it: &'a Value) {
        let Some((kind, inner)) = it["inner"].as_object().and_then(|o| o.iter().next()) else {
            return;
        };
        let deprecated = if it["deprecation"].is_null() {
            ""
        } else {
            " #[deprecated]"
        };
        match kind.as_str() {
            "module" => {
                self.push(path, format!("mod {path}"));
                self.module(path, it);
            }
            "function" => {
                let sig = function(inner);
                self.push(path, format!("fn {path}{sig}{deprecated}"));
            }
            "constant" => {
                let line = format!("const {path}: {}{deprecated}", ty(&inner["type"]));
                self.push(path, line);
            }
            "static" => {
                let m = if inner["is_mutable"].as_bool() == Some(true) {
                    "mut "
                } else {
                    ""
                };
                let line = format!("static {m}{path}: {}{deprecated}", ty(&inner["type"]));
                self.push(path, line);
            }
            "type_alias" => {
                let line = format!(
                    "type {path}{} = {}{deprecated}",
                    generics(&inner["generics"]),
                    ty(&inner["type"])
                );
                self.push(path, line);
            }
            "macro" | "proc_macro" => self.push(path, format!("macro {path}")),
            "struct" | "union" | "enum" => {
                let g = generics(&inner["generics"]);
                let shape = match &inner["kind"] {
                    Value::String(s) => format!(" {s}"),
                    Value::Object(o) => match o.iter().next() {
                        Some((k, v)) if k == "tuple" => format!(
                            " tuple({})",
                            v.as_array()
                                .map(|a| a
                                    .iter()
                                    .map(|f| if f.is_null() { "_" } else { "pub" })
                                    .collect::<Vec<_>>()
                                    .join(", "))
                                .unwrap_or_default()
                        ),
                        Some((k, v)) if k == "plain" => {
                            if v["has_stripped_fields"].as_bool() == Some(true) {
                                " {..}".to_owned()
                            } else {
                                String::new()
                            }
                        }
                        _ => String::new(),
                    },
                    _ => String::new(),
                };
                let non_exhaustive = if it["attrs"].to_string().contains("non_exhaustive") {
                    " #[non_exhaustive]"
                } else {
                    ""
                };
                self.push(
                    path,
                    format!("{kind} {path}{g}{shape}{non_exhaustive}{deprecated}"),
                );
                let fields = inner["kind"]["plain"]["fields"]
                    .as_array()
                    .or_else(|| inner["fields"].as_array());
                for id in fields.into_iter().flatten() {
                    if let Some(f) = (self.item)(id) {
                        let name = f["name"].as_str().unwrap_or("_");
                        let line =
                            format!("field {path}::{name}: {}", ty(&f["inner"]["struct_field"]));
                        self.push(path, line);
                    }
                }
                for id in inner["variants"].as_array().into_iter().flatten() {
                    if let Some(v) = (self.item)(id) {
                        let name = v["name"].as_str().unwrap_or("_");
                        let vk = &v["inner"]["variant"]["kind"];
                        let shape = match vk {
                            Value::Object(o) => {
                                let (k, fields) = o.iter().next().unwrap();
                                let ids = if k == "tuple" {
                                    fields.as_array()
                                } else {
                                    fields["fields"].as_array()
                                };
                                let fs: Vec<String> = ids
                                    .into_iter()
                                    .flatten()
                                    .filter_map(|id| (self.item)(id))
                                    .map(|f| {
                                        format!(
                                            "{}: {}",
                                            f["name"].as_str().unwrap_or("_"),
                                            ty(&f["inner"]["struct_field"])
                                        )
                                    })
                                    .collect();
                                format!(" {k} {{ {} }}", fs.join(", "))
                            }
                            _ => String::new(),
                        };
                        self.push(path, format!("variant {path}::{name}{shape}"));
                    }
                }
                for id in inner["impls"].as_array().into_iter().flatten() {
                    if let Some(imp) = (self.item)(id) {
                        self.implementation(path, &imp["inner"]["impl"]);
                    }
                }
            }
            "trait" => {
                self.push(
                    path,
                    format!("trait {path}{}", generics(&inner["generics"])),
                );
                for id in inner["items"].as_array().into_iter().flatten() {
                    if let Some(m) = (self.item)(id) {
                        let name = m["name"].as_str().unwrap_or("_");
                        self.item_at(&format!("{path}::{name}"), m);
                    }
                }
            }
            "assoc_const" => {
                let line = format!("const {path}: {}{deprecated}", ty(&inner["type"]));
                self.push(path, line);
            }
            "assoc_type" => self.push(path, format!("type {path}")),
            _ => {}
        }
    }

    /// An impl block of a type: inherent items, or one line naming the trait.
    fn implementation(&mut self, path: &str, imp: &'a Value) {
        if !imp["blanket_impl"].is_null() {
            return;
        }
        if imp["trait"].is_null() {
            for id in imp["items"].as_array().into_iter().flatten() {
                if let Some(m) = (self.item)(id) {
                    let name = m["name"].as_str().unwrap_or("_");
                    self.item_at(&format!("{path}::{name}"), m);
                }
            }
        } else {
            let negative = if imp["is_negative"].as_bool() == Some(true) {
                "!"
            } else {
                ""
            };
            let line = format!(
                "impl{} {negative}{} for {}",
                generics(&imp["generics"]),
                path_of(&imp["trait"]),
                path
            );
            self.push(path, line);
        }
    }
}

/// `<generics>(inputs) -> output where ...`, with `unsafe`/`const`/`async`/ABI in front.
fn function(inner: &Value) -> String {
    let h = &inner["header"];
    let mut front = String::new();
    for (key, word) in [
        ("is_const", "const "),
        ("is_async", "async "),
        ("is_unsafe", "unsafe "),
    ] {
        if h[key].as_bool() == Some(true) {
            front.push_str(word);
        }
    }
    match &h["abi"] {
        Value::String(s) if s == "Rust" => {}
        // `{"C": {"unwind": false}}`: `extern "C"` (`"C-unwind"` when it may unwind).
        Value::Object(o) if o.len() == 1 => {
            let (name, how) = o.iter().next().unwrap();
            let unwind = if how["unwind"].as_bool() == Some(true) {
                "-unwind"
            } else {
                ""
            };
            front.push_str(&format!("extern \"{name}{unwind}\" "));
        }
        abi => front.push_str(&format!("extern {} ", compact(abi))),
    }
    let sig = &inner["sig"];
    let inputs: Vec<String> = sig["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| format!("{}: {}", p[0].as_str().unwrap_or("_"), ty(&p[1])))
        .collect();
    let output = if sig["output"].is_null() {
        String::new()
    } else {
        format!(" -> {}", ty(&sig["output"]))
    };
    let front = if front.is_empty() {
        String::new()
    } else {
        format!(" [{}]", front.trim_end())
    };
    format!(
        "{}({}){output}{}{front}",
        generics(&inner["generics"]),
        inputs.join(", "),
        where_clause(&inner["generics"])
    )
}

fn generics(g: &Value) -> String {
    let params: Vec<String> = g["params"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["kind"]["type"]["is_synthetic"].as_bool() != Some(true))
        .map(|p| {
            let name = p["name"].as_str().unwrap_or("_");
            match p["kind"].as_object().and_then(|o| o.iter().next()) {
                Some((k, v)) if k == "type" => {
                    let b = bounds(&v["bounds"]);
                    if b.is_empty() {
                        name.to_owned()
                    } else {
                        format!("{name}: {b}")
                    }
                }
                Some((k, v)) if k == "const" => format!("const {name}: {}", ty(&v["type"])),
                _ => name.to_owned(),
            }
        })
        .collect();
    if params.is_empty() {
        String::new()
    } else {
        format!("<{}>", params.join(", "))
    }
}

fn where_clause(g: &Value) -> String {
    let preds: Vec<String> = g["where_predicates"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| match p.as_object().and_then(|o| o.iter().next()) {
            Some((k, v)) if k == "bound_predicate" => {
                format!("{}: {}", ty(&v["type"]), bounds(&v["bounds"]))
            }
            _ => compact(p),
        })
        .collect();
    if preds.is_empty() {
        String::new()
    } else {
        format!(" where {}", preds.join(", "))
    }
}

fn bounds(b: &Value) -> String {
    b.as_array()
        .into_iter()
        .flatten()
        .map(|b| match b.as_object().and_then(|o| o.iter().next()) {
            Some((k, v)) if k == "trait_bound" => {
                let m = if v["modifier"].as_str() == Some("maybe") {
                    "?"
                } else {
                    ""
                };
                format!("{m}{}", path_of(&v["trait"]))
            }
            Some((k, v)) if k == "outlives" => v.as_str().unwrap_or("'_").to_owned(),
            _ => compact(b),
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// A path with its generic arguments.
fn path_of(p: &Value) -> String {
    let name = p["path"].as_str().unwrap_or("?");
    format!("{name}{}", args(&p["args"]))
}

fn args(a: &Value) -> String {
    if let Some(ab) = a.get("angle_bracketed") {
        let mut parts: Vec<String> = ab["args"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| match g.as_object().and_then(|o| o.iter().next()) {
                Some((k, v)) if k == "type" => ty(v),
                Some((k, v)) if k == "lifetime" => v.as_str().unwrap_or("'_").to_owned(),
                Some((k, v)) if k == "const" => compact(&v["expr"]),
                _ => compact(g),
            })
            .collect();
        for c in ab["constraints"].as_array().into_iter().flatten() {
            let name = c["name"].as_str().unwrap_or("?");
            let value = match c["binding"].as_object().and_then(|o| o.iter().next()) {
                Some((k, v)) if k == "equality" => format!(" = {}", ty(&v["type"])),
                Some((_, v)) => format!(": {}", bounds(v)),
                None => String::new(),
            };
            parts.push(format!("{name}{value}"));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("<{}>", parts.join(", "))
        }
    } else if let Some(p) = a.get("parenthesized") {
        let inputs: Vec<String> = p["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(ty)
            .collect();
        let output = if p["output"].is_null() {
            String::new()
        } else {
            format!(" -> {}", ty(&p["output"]))
        };
        format!("({}){output}", inputs.join(", "))
    } else {
        String::new()
    }
}

/// A type as Rust spells it (paths as rustdoc records them).
fn ty(t: &Value) -> String {
    let Some((kind, v)) = t.as_object().and_then(|o| o.iter().next()) else {
        return compact(t);
    };
    match kind.as_str() {
        "resolved_path" => path_of(v),
        "primitive" | "generic" => v.as_str().unwrap_or("?").to_owned(),
        "borrowed_ref" => {
            let lt = v["lifetime"]
                .as_str()
                .map(|l| format!("{l} "))
                .unwrap_or_default();
            let m = if v["is_mutable"].as_bool() == Some(true) {
                "mut "
            } else {
                ""
            };
            format!("&{lt}{m}{}", ty(&v["type"]))
        }
        "raw_pointer" => {
            let m = if v["is_mutable"].as_bool() == Some(true) {
                "mut"
            } else {
                "const"
            };
            format!("*{m} {}", ty(&v["type"]))
        }
        "tuple" => format!(
            "({})",
            v.as_array()
                .into_iter()
                .flatten()
                .map(ty)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "slice" => format!("[{}]", ty(v)),
        "array" => format!("[{}; {}]", ty(&v["type"]), v["len"].as_str().unwrap_or("?")),
        "impl_trait" => format!("impl {}", bounds(v)),
        "dyn_trait" => {
            let traits: Vec<String> = v["traits"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| path_of(&t["trait"]))
                .collect();
            let lt = v["lifetime"]
                .as_str()
                .map(|l| format!(" + {l}"))
                .unwrap_or_default();
            format!("dyn {}{lt}", traits.join(" + "))
        }
        "function_pointer" => {
            let f = function(&serde_json::json!({
                "header": v["header"],
                "sig": v["sig"],
                "generics": {"params": [], "where_predicates": []},
            }));
            format!("fn{f}")
        }
        "qualified_path" => {
            let trait_ = if v["trait"].is_null() {
                String::new()
            } else {
                format!(" as {}", path_of(&v["trait"]))
            };
            format!(
                "<{}{trait_}>::{}",
                ty(&v["self_type"]),
                v["name"].as_str().unwrap_or("?")
            )
        }
        "infer" => "_".to_owned(),
        _ => compact(t),
    }
}

/// JSON without rustdoc's per-build item ids, on one line.
fn compact(v: &Value) -> String {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(o) => Value::Object(
                o.iter()
                    .filter(|(k, _)| k.as_str() != "id")
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    strip(v).to_string()
}

const HEADER: &str = "# The public API of the last release, listed by `cargo xtask api --bless` from rustdoc's JSON.\n# `cargo xtask api` (a step of `cargo xtask test`) compares the crate with it: see docs/releases.md.\n";

fn write_listing(
    path: &Path,
    package: &str,
    version: &str,
    lines: &[String],
) -> anyhow::Result<()> {
    let mut text = format!("{HEADER}package {package}\nversion {version}\n");
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)?;
    Ok(())
}

fn parse_listing(text: &str) -> anyhow::Result<(String, BTreeSet<String>)> {
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    lines
        .next()
        .filter(|l| l.starts_with("package "))
        .context("no package line")?;
    let version = lines
        .next()
        .and_then(|l| l.strip_prefix("version "))
        .context("no version line")?
        .to_owned();
    Ok((version, lines.map(str::to_owned).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace root whose CHANGELOG.md has a section for 0.1.1 and 0.2.0 (and none for 1.1.0).
    fn root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("CHANGELOG.md"),
            "# Changelog\n\n## [0.2.0] - unreleased\n\n## 0.1.1\n",
        )
        .unwrap();
        dir
    }

    #[test]
    fn the_policy_asks_the_bump_each_change_needs() {
        let root = root();
        let ok = |needed, old, new| allowed(needed, old, new, root.path());
        assert_eq!(ok(Bump::None, "0.1.0", "0.1.0"), Ok(()));
        assert_eq!(ok(Bump::Additive, "0.1.0", "0.1.1"), Ok(()));
        assert_eq!(ok(Bump::Breaking, "0.1.0", "0.2.0"), Ok(()));
        assert!(
            ok(Bump::Additive, "0.1.0", "0.1.0")
                .unwrap_err()
                .contains("newer than 0.1.0")
        );
        assert!(
            ok(Bump::Breaking, "0.1.0", "0.1.1")
                .unwrap_err()
                .contains("0.2.0 or newer")
        );
        assert!(
            ok(Bump::Breaking, "1.0.0", "1.1.0")
                .unwrap_err()
                .contains("2.0.0 or newer")
        );
        // The right bump, but no CHANGELOG section for it.
        assert!(
            ok(Bump::Breaking, "0.1.0", "0.3.0")
                .unwrap_err()
                .contains("CHANGELOG.md")
        );
    }

    #[test]
    fn a_listing_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api/x.txt");
        let lines = vec!["fn a::b()".to_owned(), "struct a::C".to_owned()];
        write_listing(&path, "x", "0.1.0", &lines).unwrap();
        let (version, read) = parse_listing(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(version, "0.1.0");
        assert_eq!(read, lines.into_iter().collect());
    }
}
