//! The lock file `generator/inputs.lock`: for each pinned `name==version`, the wheel file name and
//! its SHA-256; and for each CTK target the generator can make, which two wheels hold its headers
//! (`target <MAJOR.MINOR> <headers spec> <crt spec>`). The lock is the list of targets.

use std::fmt;
use std::path::Path;

use super::error::InputError;
use crate::Ctk;

/// Where the lock lives in the workspace.
pub const LOCK_PATH: &str = "generator/inputs.lock";

/// One input generation read, as recorded in the provenance of the generated files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// The package (`nvidia-cuda-runtime`, `libclang`), or `cuda-home` for a local toolkit.
    pub name: String,
    /// The package version, or the toolkit's CUDA version (`12.9`).
    pub version: String,
    /// The wheel file name, or the path of a local file (`override: <library>` for the library
    /// that `LIBCLANG_PATH` leads clang-sys to).
    pub file: String,
    /// SHA-256 of that file, lower-case hex.
    pub sha256: String,
}

impl fmt::Display for Provenance {
    /// One line: `<name>==<version> <file> sha256:<hex>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}=={} {} sha256:{}",
            self.name, self.version, self.file, self.sha256
        )
    }
}

/// A parsed lock file.
#[derive(Clone, Debug)]
pub struct Lock {
    entries: Vec<LockEntry>,
    targets: Vec<TargetPin>,
}

/// The header wheels of one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetPin {
    /// The target.
    pub ctk: Ctk,
    /// `name==version` of the wheel with `cuda.h`, `cuda_runtime_api.h`, `cudaTypedefs.h`.
    pub headers: String,
    /// `name==version` of the wheel with `crt/host_defines.h`.
    pub crt: String,
}

/// One locked wheel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockEntry {
    /// The package name, e.g. `nvidia-cuda-runtime`.
    pub name: String,
    /// The exact version, e.g. `13.0.96`.
    pub version: String,
    /// The wheel file name pip saves.
    pub file: String,
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
}

impl LockEntry {
    /// `name==version`.
    pub fn spec(&self) -> String {
        format!("{}=={}", self.name, self.version)
    }

    /// The provenance line of this wheel.
    pub fn provenance(&self) -> Provenance {
        Provenance {
            name: self.name.clone(),
            version: self.version.clone(),
            file: self.file.clone(),
            sha256: self.sha256.clone(),
        }
    }
}

impl Lock {
    /// Reads and parses a lock file.
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let text = std::fs::read_to_string(path).map_err(|e| InputError::BadLock {
            line: 0,
            detail: format!("cannot read {}: {e}", path.display()),
        })?;
        Lock::parse(&text)
    }

    /// Parses lock text: `#` starts a comment; every other non-blank line is
    /// `<name>==<version> <wheel file> <sha256>` or `target <MAJOR.MINOR> <headers spec> <crt
    /// spec>`, fields separated by whitespace; a target's specs must be locked.
    pub fn parse(text: &str) -> Result<Self, InputError> {
        let mut entries: Vec<LockEntry> = Vec::new();
        let mut targets: Vec<(usize, TargetPin)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |detail: String| InputError::BadLock {
                line: i + 1,
                detail,
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.first() == Some(&"target") {
                let ["target", ctk, headers, crt] = fields[..] else {
                    return Err(bad(format!(
                        "a target line is `target <MAJOR.MINOR> <headers spec> <crt spec>`, found {} fields",
                        fields.len()
                    )));
                };
                let ctk: Ctk = ctk
                    .parse()
                    .map_err(|e: crate::target::UnknownCtk| bad(e.to_string()))?;
                if targets.iter().any(|(_, t)| t.ctk == ctk) {
                    return Err(bad(format!("target {ctk} is pinned twice")));
                }
                targets.push((
                    i + 1,
                    TargetPin {
                        ctk,
                        headers: headers.to_owned(),
                        crt: crt.to_owned(),
                    },
                ));
                continue;
            }
            let [spec, file, sha256] = fields[..] else {
                return Err(bad(format!("expected 3 fields, found {}", fields.len())));
            };
            let Some((name, version)) = spec.split_once("==") else {
                return Err(bad(format!("'{spec}' is not name==version")));
            };
            if name.is_empty() || version.is_empty() {
                return Err(bad(format!("'{spec}' is not name==version")));
            }
            if !file.ends_with(".whl") || file.contains('/') {
                return Err(bad(format!("'{file}' is not a wheel file name")));
            }
            if sha256.len() != 64
                || !sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Err(bad(format!(
                    "'{sha256}' is not a lower-case hex SHA-256 (64 digits)"
                )));
            }
            let entry = LockEntry {
                name: name.to_owned(),
                version: version.to_owned(),
                file: file.to_owned(),
                sha256: sha256.to_owned(),
            };
            if entries.iter().any(|e| e.spec() == entry.spec()) {
                return Err(bad(format!("{spec} is locked twice")));
            }
            entries.push(entry);
        }
        for (line, t) in &targets {
            for spec in [&t.headers, &t.crt] {
                if !entries.iter().any(|e| &e.spec() == spec) {
                    return Err(InputError::BadLock {
                        line: *line,
                        detail: format!("target {} names {spec}, which has no wheel line", t.ctk),
                    });
                }
            }
        }
        let mut targets: Vec<TargetPin> = targets.into_iter().map(|(_, t)| t).collect();
        targets.sort_by_key(|t| t.ctk);
        Ok(Lock { entries, targets })
    }

    /// The targets the generator can make: those the lock pins headers for, oldest first.
    pub fn targets(&self) -> Vec<Ctk> {
        self.targets.iter().map(|t| t.ctk).collect()
    }

    /// The header wheels of `ctk`.
    pub fn target(&self, ctk: Ctk) -> Result<&TargetPin, InputError> {
        self.targets
            .iter()
            .find(|t| t.ctk == ctk)
            .ok_or_else(|| InputError::NotPinned {
                ctk,
                pinned: crate::target::spelled(&self.targets()),
            })
    }

    /// The pinned targets older than `ctk` of its major, oldest first: its runtime history,
    /// whose runtime headers say since when each function exists.
    pub fn history(&self, ctk: Ctk) -> Vec<Ctk> {
        self.targets()
            .into_iter()
            .filter(|t| t.major() == ctk.major() && *t < ctk)
            .collect()
    }

    /// The specs of every wheel that reading `ctk`'s headers takes: its two header wheels, then
    /// the runtime header wheel of each target of its [`history`](Lock::history).
    pub fn specs_read_by(&self, ctk: Ctk) -> Result<Vec<String>, InputError> {
        let pin = self.target(ctk)?;
        let mut specs = vec![pin.headers.clone(), pin.crt.clone()];
        for older in self.history(ctk) {
            specs.push(self.target(older)?.headers.clone());
        }
        Ok(specs)
    }

    /// The lock with `pin` and its two wheels in place of whatever it pinned for that target
    /// before (wheels no other target uses are dropped).
    pub fn with_target(&self, pin: TargetPin, wheels: [LockEntry; 2]) -> Lock {
        let mut targets: Vec<TargetPin> = self
            .targets
            .iter()
            .filter(|t| t.ctk != pin.ctk)
            .cloned()
            .collect();
        targets.push(pin);
        targets.sort_by_key(|t| t.ctk);
        let used = |spec: &str| targets.iter().any(|t| t.headers == spec || t.crt == spec);
        let mut entries: Vec<LockEntry> = self
            .entries
            .iter()
            .filter(|e| !e.name.starts_with("nvidia-") || used(&e.spec()))
            .filter(|e| wheels.iter().all(|w| w.spec() != e.spec()))
            .cloned()
            .collect();
        entries.extend(wheels);
        Lock { entries, targets }
    }

    /// The lock as text, in a fixed layout: a header, one block per target (its target line and
    /// its two wheels), then every other wheel.
    pub fn render(&self) -> String {
        let mut out = String::from(LOCK_HEADER);
        let mut placed: Vec<String> = Vec::new();
        for t in &self.targets {
            out.push_str(&format!(
                "\n# CUDA {}\ntarget {}  {}  {}\n",
                t.ctk, t.ctk, t.headers, t.crt
            ));
            for spec in [&t.headers, &t.crt] {
                if placed.contains(spec) {
                    continue;
                }
                if let Some(e) = self.entries.iter().find(|e| &e.spec() == spec) {
                    out.push_str(&format!("{}  {}  {}\n", e.spec(), e.file, e.sha256));
                    placed.push(spec.clone());
                }
            }
        }
        let rest: Vec<&LockEntry> = self
            .entries
            .iter()
            .filter(|e| !placed.contains(&e.spec()))
            .collect();
        if !rest.is_empty() {
            out.push_str("\n# Tools: libclang for bindgen (ships clang/native/libclang.so, no resource headers).\n");
            for e in rest {
                out.push_str(&format!("{}  {}  {}\n", e.spec(), e.file, e.sha256));
            }
        }
        out
    }

    /// The entry for `name==version`.
    pub fn get(&self, spec: &str) -> Result<&LockEntry, InputError> {
        self.entries
            .iter()
            .find(|e| e.spec() == spec)
            .ok_or_else(|| InputError::NotLocked {
                spec: spec.to_owned(),
            })
    }

    /// Every entry, in file order.
    pub fn entries(&self) -> &[LockEntry] {
        &self.entries
    }
}

/// The comment at the top of the lock, which [`Lock::render`] writes.
const LOCK_HEADER: &str = "\
# The pinned inputs of the generator, and the list of CTK targets it can make.
#
#   target <MAJOR.MINOR>  <headers package==version>  <crt package==version>
#   <package>==<version>  <wheel file name>  <sha256 of the wheel>
#
# The generator fetches each wheel with `python3 -m pip download --no-deps --only-binary=:all:
# --platform manylinux2014_x86_64` and refuses any file whose name or SHA-256 differs from this
# list. A target reads cuda.h, cuda_runtime_api.h and cudaTypedefs.h from its headers wheel and
# crt/ from its crt wheel. `cargo xtask pin --ctk X.Y` adds or refreshes a target (the newest
# wheels of X.Y) and rewrites this file; generator/targets.txt says which targets generated/ holds.
";

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "25bba2dfb01d48a9b59ca474a1ac43c6ebf7011f1b0b8cc44f54eb6ac48a96c3";

    #[test]
    fn parses_lines_and_skips_comments() {
        let lock = Lock::parse(&format!(
            "# header\n\n a==1.0  a-1.0-py3-none-any.whl  {SHA} # why\n"
        ))
        .unwrap();
        let e = lock.get("a==1.0").unwrap();
        assert_eq!(e.file, "a-1.0-py3-none-any.whl");
        assert_eq!(e.sha256, SHA);
        let err = lock.get("a==2.0").unwrap_err().to_string();
        assert!(err.contains("no entry for a==2.0"), "{err}");
    }

    #[test]
    fn rejects_malformed_lines() {
        for (text, want) in [
            ("a==1 a.whl\n".to_owned(), "line 1: expected 3 fields"),
            (
                format!("\na-1 a.whl {SHA}"),
                "line 2: 'a-1' is not name==version",
            ),
            (format!("a==1 a.zip {SHA}"), "not a wheel file name"),
            (
                format!("a==1 a.whl {}", SHA.to_uppercase()),
                "not a lower-case hex",
            ),
            (
                format!("a==1 a.whl {SHA}\na==1 b.whl {SHA}"),
                "locked twice",
            ),
        ] {
            let err = Lock::parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{err} lacks {want}");
        }
    }
}
