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
    /// The targets the generated crate holds (`generator/targets.txt`), oldest first.
    pub targets: Vec<Ctk>,
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
