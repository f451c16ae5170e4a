//! The one configuration of a generation: everything checked in that it reads (the lock, the
//! target list, the deny-lists, the templates), where it caches inputs, which libclang it
//! loads, and where the generated crate lies. The caller (the xtask, a test) loads it once and
//! passes it down; nothing below it looks for a workspace or reads the environment.

use std::path::{Path, PathBuf};

use crate::Ctk;
use crate::allowlist::{DenyList, DenyListError};
use crate::inputs::{InputConfig, InputError, LOCK_PATH, Lock};
use crate::target::{TargetList, TargetListError};
use crate::writer::{TemplateError, Templates};

/// The committed list of the targets the generated crate holds, relative to the workspace root.
pub const TARGETS_PATH: &str = "generator/targets.txt";

/// What the caller read from its process environment, once, at start-up: the only process
/// state a generation depends on. [`Environment::of_process`] is the one place that reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Environment {
    /// `$LIBCLANG_PATH`, when set and not empty: a libclang that overrides the pinned one.
    pub libclang_path: Option<PathBuf>,
    /// `$HOSTCB_INPUTS_CACHE`, when set and not empty: the input cache to use.
    pub inputs_cache: Option<PathBuf>,
}

/// Variables of the process environment that bindgen, libclang or gcc read on their own and
/// that would change what they make of the headers: bindgen's extra clang arguments (also per
/// target, `BINDGEN_EXTRA_CLANG_ARGS_<target>`) and `TARGET` (its clang target), the include
/// folders clang and gcc search before their own (`CPATH` and friends: a `stdlib.h` there is read
/// in place of the system's), and what makes gcc run another compiler or write dependency files.
pub const FOREIGN_VARIABLES: [&str; 10] = [
    "BINDGEN_EXTRA_CLANG_ARGS",
    "TARGET",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "OBJC_INCLUDE_PATH",
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
    "DEPENDENCIES_OUTPUT",
    "SUNPRO_DEPENDENCIES",
];

/// Whether the variable `name` is one of the [`FOREIGN_VARIABLES`], or bindgen's extra clang
/// arguments for one target (`BINDGEN_EXTRA_CLANG_ARGS_<target>`).
pub fn is_foreign_variable(name: &str) -> bool {
    FOREIGN_VARIABLES.contains(&name) || name.starts_with("BINDGEN_EXTRA_CLANG_ARGS_")
}

/// Removes the [`FOREIGN_VARIABLES`] (and `BINDGEN_EXTRA_CLANG_ARGS_*`) from this process's
/// environment, so that no generation depends on them, and returns those that were set, with
/// their values (sorted by name): for the caller to warn of, and to give back to the programs it
/// runs (cargo rebuilds bindgen when a variable its build script names changes).
///
/// # Safety
///
/// No other thread may run (or read the environment) meanwhile: call it first thing in `main`.
pub unsafe fn remove_foreign_variables() -> Vec<(String, std::ffi::OsString)> {
    let mut removed: Vec<(String, std::ffi::OsString)> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value)))
        .filter(|(name, _)| is_foreign_variable(name))
        .collect();
    removed.sort();
    for (name, _) in &removed {
        // SAFETY: the caller runs this before any other thread.
        unsafe { std::env::remove_var(name) };
    }
    removed
}

impl Environment {
    /// `LIBCLANG_PATH` and `HOSTCB_INPUTS_CACHE` of this process (empty counts as unset).
    pub fn of_process() -> Self {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Environment {
            libclang_path: var("LIBCLANG_PATH"),
            inputs_cache: var("HOSTCB_INPUTS_CACHE"),
        }
    }
}

/// Everything a generation reads, loaded once.
#[derive(Clone, Debug)]
pub struct Config {
    /// The workspace root the configuration was read from.
    pub root: PathBuf,
    /// The targets the generated crate at `out` holds, oldest first: this checkout's
    /// `generator/targets.txt`, or that tree's own list ([`Config::for_out`]).
    pub targets: Vec<Ctk>,
    /// Where `targets` was read from.
    pub targets_from: TargetsFrom,
    /// The pinned inputs, the input cache and the libclang choice.
    pub inputs: InputConfig,
    /// The driver API's deny-list.
    pub driver_list: DenyList,
    /// The runtime API's deny-list.
    pub runtime_list: DenyList,
    /// The wrapper templates.
    pub templates: Templates,
    /// The generated crate's folder, where regen writes and check compares (`generated/`, or
    /// `regen --out`).
    pub out: PathBuf,
}

/// A configuration that cannot be loaded; each message is one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The target list.
    #[error(transparent)]
    Targets(#[from] TargetListError),
    /// The lock.
    #[error(transparent)]
    Lock(#[from] InputError),
    /// A deny-list.
    #[error(transparent)]
    DenyList(#[from] DenyListError),
    /// The templates.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The target list of an output tree (its generated crate's `Cargo.toml`).
    #[error(transparent)]
    Out(#[from] crate::emit::EmitError),
}

/// Where the target list of a generated crate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetsFrom {
    /// A checkout's `generator/targets.txt` (this file).
    List(PathBuf),
    /// The generated features (`ctk-*`) of a generated crate's `Cargo.toml` (this file), for a
    /// crate folder that lies in no checkout with a target list.
    Manifest(PathBuf),
}

impl Config {
    /// Reads the configuration checked in under the workspace `root`, with what `env` says about
    /// the cache and libclang (the cache defaults to `<root>/target/hostcb-inputs`).
    pub fn load(root: &Path, env: &Environment) -> Result<Self, ConfigError> {
        let cache = env
            .inputs_cache
            .clone()
            .unwrap_or_else(|| root.join("target/hostcb-inputs"));
        Ok(Config {
            root: root.to_path_buf(),
            targets: Self::listed_targets(root)?,
            targets_from: TargetsFrom::List(root.join(TARGETS_PATH)),
            inputs: InputConfig {
                lock: Lock::load(&root.join(LOCK_PATH))?,
                cache,
                libclang_path: env.libclang_path.clone(),
            },
            driver_list: DenyList::load(&root.join("generator/allowlist/driver.txt"))?,
            runtime_list: DenyList::load(&root.join("generator/allowlist/runtime.txt"))?,
            templates: Templates::load(&root.join("templates"))?,
            out: root.join("generated"),
        })
    }

    /// This configuration writing (or checking) the generated crate at `out` instead (`regen
    /// --out`), for the target list of that tree: when `out` is the `generated/` folder of a
    /// checkout with a `generator/targets.txt`, that list; otherwise the `ctk-*` features its
    /// `Cargo.toml` declares ([`crate::manifest::targets`]). So the all-target files written there (`src/bindings/mod.rs`, the cargo features) name the
    /// targets that tree holds, not this checkout's. Everything else (lock, deny-lists,
    /// templates, cache) stays this checkout's: they are the generator.
    pub fn for_out(self, out: PathBuf) -> Result<Self, ConfigError> {
        let list = std::fs::canonicalize(&out)
            .ok()
            .filter(|dir| dir.file_name().is_some_and(|n| n == "generated"))
            .and_then(|dir| Some(dir.parent()?.join(TARGETS_PATH)))
            .filter(|list| list.is_file());
        let (targets, targets_from) = match list {
            Some(list) => (TargetList::load(&list)?.targets, TargetsFrom::List(list)),
            None => (
                crate::manifest::targets(&out)?,
                TargetsFrom::Manifest(out.join(crate::manifest::PATH)),
            ),
        };
        Ok(Config {
            targets,
            targets_from,
            out,
            ..self
        })
    }

    /// The target list of the workspace at `root` alone, for what needs nothing else
    /// (`cargo xtask verify`).
    pub fn listed_targets(root: &Path) -> Result<Vec<Ctk>, TargetListError> {
        TargetList::load(&root.join(TARGETS_PATH)).map(|l| l.targets)
    }

    /// The cache of downloaded and unpacked inputs.
    pub fn cache(&self) -> &Path {
        &self.inputs.cache
    }

    /// The pinned inputs.
    pub fn lock(&self) -> &Lock {
        &self.inputs.lock
    }
}
