//! Whether each workspace crate linked into this binary was compiled from the sources of the
//! checkout it runs in, and a rebuild through cargo when one was not.
//!
//! Two checkouts that share one `CARGO_TARGET_DIR` share one `target/debug/xtask` and one set of
//! workspace-crate rlibs (cargo names them by their place in the workspace and finds them fresh
//! by file times), so `cargo xtask` in the checkout built less recently can run or link the other
//! checkout's code. Each crate records the hash of its own `src/` as compiled
//! ([`hostcb_seal::sources`]); [`stale`] compares every one with that crate's folder here.

use std::path::Path;
use std::time::SystemTime;

use anyhow::bail;

/// A workspace crate whose code is in this binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Linked {
    /// The package name.
    pub name: &'static str,
    /// Its folder, relative to the workspace root.
    pub dir: &'static str,
    /// Its crate root, relative to its folder: the file touched to have cargo rebuild it.
    pub root_file: &'static str,
    /// The SHA-256 of the sources it was compiled from.
    pub built_from: &'static str,
}

/// Every workspace crate this binary links, itself included.
pub const LINKED: [Linked; 3] = [
    Linked {
        name: "hostcb-seal",
        dir: "generator/seal",
        root_file: "src/lib.rs",
        built_from: hostcb_seal::BUILT_FROM_SOURCES,
    },
    Linked {
        name: "hostcb-generator",
        dir: "generator",
        root_file: "src/lib.rs",
        built_from: hostcb_generator::BUILT_FROM_SOURCES,
    },
    Linked {
        name: "xtask",
        dir: "xtask",
        root_file: "src/main.rs",
        built_from: env!("HOSTCB_BUILT_FROM_SOURCES"),
    },
];

/// Set when this process is the rebuild that [`ensure_built_from`] asked cargo for.
const REBUILT_ENV: &str = "HOSTCB_XTASK_REBUILT";

/// The crates of `linked` whose sources under the workspace `root` differ from those they were
/// compiled from. A crate whose `src/` the checkout lacks (a copy holding only data) is not
/// compared: no build there can have made it.
pub fn stale<'a>(root: &Path, linked: &'a [Linked]) -> anyhow::Result<Vec<&'a Linked>> {
    let mut stale = Vec::new();
    for krate in linked {
        let dir = root.join(krate.dir);
        if !dir.join(hostcb_seal::sources::SOURCE_DIR).is_dir() {
            continue;
        }
        let here = hostcb_seal::sources::sources_sha256(&dir).map_err(|e| {
            anyhow::anyhow!(
                "cannot read the sources of {} under {}: {e}",
                krate.name,
                dir.display()
            )
        })?;
        if here != krate.built_from {
            stale.push(krate);
        }
    }
    Ok(stale)
}

/// Makes sure every crate of [`LINKED`] was compiled from the checkout at `root`. When one was not
/// and cargo ran this binary, the stale crates' root files are touched (their time only), so that
/// cargo's freshness check rebuilds them, and the same command runs again through cargo; this
/// process exits with that run's status. Run directly, or when the rebuild did not help, it is an
/// error that says what to do.
pub fn ensure_built_from(root: &Path) -> anyhow::Result<()> {
    let stale = stale(root, &LINKED)?;
    if stale.is_empty() {
        return Ok(());
    }
    let names = stale.iter().map(|k| k.name).collect::<Vec<_>>().join(", ");
    let cargo = std::env::var_os("CARGO");
    let cargo = match cargo {
        Some(cargo) if std::env::var_os(REBUILT_ENV).is_none() => cargo,
        _ => bail!(
            "this xtask binary links {names} compiled from other sources than those of {} (does another checkout share its CARGO_TARGET_DIR?); run `cargo xtask` from this checkout, or give it its own CARGO_TARGET_DIR",
            root.display()
        ),
    };
    let now = SystemTime::now();
    for krate in &stale {
        let file = root.join(krate.dir).join(krate.root_file);
        std::fs::File::options()
            .append(true)
            .open(&file)
            .and_then(|f| f.set_modified(now))
            .map_err(|e| anyhow::anyhow!("cannot touch {}: {e}", file.display()))?;
    }
    eprintln!(
        "xtask: {names} in this binary came from another checkout's sources (a shared CARGO_TARGET_DIR); touched and rebuilding from {}",
        root.display()
    );
    let status = std::process::Command::new(cargo)
        .envs(crate::foreign_variables())
        .args(["run", "--package", "xtask", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .arg("--")
        .args(std::env::args_os().skip(1))
        .env(REBUILT_ENV, "1")
        .status()?;
    std::process::exit(status.code().unwrap_or(1));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linked(built_from: &'static str) -> [Linked; 2] {
        [
            Linked {
                name: "one",
                dir: "one",
                root_file: "src/lib.rs",
                built_from,
            },
            Linked {
                name: "absent",
                dir: "absent",
                root_file: "src/lib.rs",
                built_from: "not compared",
            },
        ]
    }

    #[test]
    fn a_crate_is_stale_exactly_when_its_sources_differ_from_those_it_was_built_from() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("one/src/inner");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(dir.path().join("one/src/lib.rs"), "mod inner;\n").unwrap();
        std::fs::write(src.join("mod.rs"), "pub fn f() {}\n").unwrap();
        let built: &'static str = hostcb_seal::sources::sources_sha256(&dir.path().join("one"))
            .unwrap()
            .leak();
        let crates = linked(built);
        assert_eq!(stale(dir.path(), &crates).unwrap(), Vec::<&Linked>::new());

        // A swap file is not a source; a changed file, a new one or a moved one is.
        std::fs::write(src.join(".mod.rs.swp"), "x").unwrap();
        assert!(stale(dir.path(), &crates).unwrap().is_empty());
        std::fs::write(src.join("mod.rs"), "pub fn g() {}\n").unwrap();
        assert_eq!(stale(dir.path(), &crates).unwrap(), vec![&crates[0]]);
        std::fs::write(src.join("mod.rs"), "pub fn f() {}\n").unwrap();
        assert!(stale(dir.path(), &crates).unwrap().is_empty());
        std::fs::write(src.join("new.rs"), "").unwrap();
        assert_eq!(stale(dir.path(), &crates).unwrap(), vec![&crates[0]]);
        std::fs::remove_file(src.join("new.rs")).unwrap();
        std::fs::rename(src.join("mod.rs"), dir.path().join("one/src/mod.rs")).unwrap();
        assert_eq!(stale(dir.path(), &crates).unwrap(), vec![&crates[0]]);
    }

    #[test]
    fn this_binary_was_built_from_this_checkout() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert_eq!(stale(root, &LINKED).unwrap(), Vec::<&Linked>::new());
    }
}
