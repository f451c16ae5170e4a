//! `cargo xtask`: the project's maintenance commands.
//!
//! - `regen --ctk <MAJOR.MINOR|all> [--cuda-home DIR] [--out DIR]`: (re)generate bindings (under
//!   `--out`, for the target list of that tree);
//! - `pin --ctk <MAJOR.MINOR> [--repin]`: pin the newest header packages of a target in the lock;
//! - `verify [--staged] [--allow-deletions] [PATH...]`: check every seal (no headers, no
//!   libclang);
//! - `check [--ctk <MAJOR.MINOR|all>]`: regenerate in memory and fail if anything committed
//!   differs;
//! - `diff A B [--exit-code]`: print what changes between the models of two pinned targets;
//! - `layout --ctk <all-pinned|all|MAJOR.MINOR> [--tamper]`: the layout oracle over pinned
//!   targets, in a scratch copy;
//! - `api [--bless]`: list the public API of the crates users install and compare it with the
//!   committed listing (`api/`), as the version policy allows;
//! - `bench [--reps N] [--skip-builds]`: time regen (next to its bindgen floor), verify, check
//!   and builds of the generated crate;
//! - `bench-cold [--ctk MAJOR.MINOR] [--reps N] [--skip-layout] [--generated DIR]`: cold builds
//!   of a one-target program against cudarc, sizes, oracle counts;
//! - `fuzz [--seconds S] [--seed N]`: the long run of the fuzzing harness over the parsers of
//!   untrusted input (`cargo test` runs a short one);
//! - `loom [--preemptions N] [FILTER]`: the concurrent protocols' models under loom, alone;
//! - `test`: everything CI runs (fmt, verify, check, clippy, docs, the API check, every test with
//!   the loom models among them, the CPU bench's instruction budgets).

mod api;
mod bench;
mod ci;
mod coldbench;
mod fuzz;
mod layout;
mod loom;
mod pin;
mod sources;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// mimalloc instead of glibc's allocator: regen and check allocate and free syntax trees, token
/// streams and strings on several threads at once, and glibc's malloc and free were about a fifth
/// of their samples. Interleaved against the system allocator, 2 cores: `check` 1.77 s median
/// wall against 1.97 and 3.0 s of CPU against 3.3 (six runs each), `regen --ctk 12.9` 0.77 s
/// against 0.84 (ten), for 7% more peak memory (389 MB against 363 for `check`).
#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// mimalloc, asked for plain blocks where a layout needs no more than word alignment: every
/// mimalloc block is word-aligned (its size classes are whole words, its pages start 16-aligned).
/// `mimalloc::MiMalloc` asks `mi_malloc_aligned` for every layout, whose path was about 2% of the
/// instructions of `regen --ctk 12.9` that are not SHA-256 (callgrind: 14.92 G against 14.77 G
/// in all). Not for larger alignments: a block of 24 bytes, say, is not 16-aligned, where
/// glibc's would be, and a layout's size need not be a multiple of its alignment.
struct Allocator;

/// The alignment of every mimalloc block: a word.
const MIN_ALIGN: usize = std::mem::size_of::<usize>();

fn plain(layout: std::alloc::Layout) -> bool {
    layout.align() <= MIN_ALIGN
}

// SAFETY: each method hands the layout to the mimalloc function that honours it: the plain one
// only where every mimalloc block of that size is aligned enough (see `plain`).
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_malloc, mi_malloc_aligned};
        // SAFETY: mimalloc's allocation functions take any size and a power-of-two alignment.
        unsafe {
            match plain(layout) {
                true => mi_malloc(layout.size()),
                false => mi_malloc_aligned(layout.size(), layout.align()),
            }
            .cast()
        }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};
        // SAFETY: as for `alloc`.
        unsafe {
            match plain(layout) {
                true => mi_zalloc(layout.size()),
                false => mi_zalloc_aligned(layout.size(), layout.align()),
            }
            .cast()
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _: std::alloc::Layout) {
        // SAFETY: `ptr` came from one of mimalloc's allocation functions, which `mi_free` takes.
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        use libmimalloc_sys::{mi_realloc, mi_realloc_aligned};
        let new = std::alloc::Layout::from_size_align(size, layout.align());
        // SAFETY: `ptr` came from mimalloc with `layout`; the new block keeps its alignment.
        unsafe {
            match new.is_ok_and(plain) {
                true => mi_realloc(ptr.cast(), size),
                false => mi_realloc_aligned(ptr.cast(), size, layout.align()),
            }
            .cast()
        }
    }
}

use anyhow::bail;
use clap::{Parser, Subcommand};
use hostcb_generator::Ctk;
use hostcb_generator::config::{Config, Environment, TARGETS_PATH, TargetsFrom};
use hostcb_generator::emit;
use hostcb_generator::emit::render::RecordedGenerator;
use hostcb_generator::emit::tree::{Mode, TreeReport};
use hostcb_generator::inputs::Lock;
use hostcb_generator::pipeline::{self, Options, Others, TargetOutput};
use hostcb_generator::target::spelled;
use hostcb_seal::{CTK_PLACEHOLDER, Source, VerifyOptions, VerifyRoot};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    version,
    about = "Maintenance commands of the CUDA host-callback bindings",
    after_help = "Exit status: 0 on success; 1 on a failure, after one `error:` line that says \
                  what is wrong and what to do (verify: a seal fails; check: output is stale); \
                  2 on a usage error. diff exits 0 whether or not the targets differ; with \
                  --exit-code it exits 1 when they differ (no `error:` line: its summary line \
                  counts the differences) and 0 when they do not."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Regenerate the bindings of one CTK target (or all), writing only files that change.
    Regen {
        /// The target, MAJOR.MINOR (one of generator/targets.txt), or all.
        #[arg(long)]
        ctk: String,
        /// Read the headers of a local CUDA toolkit (its CUDA_VERSION must match --ctk).
        #[arg(long, value_name = "DIR")]
        cuda_home: Option<PathBuf>,
        /// Write the generated crate at DIR instead of generated/ (e.g. a maintenance checkout's
        /// generated/), for DIR's own target list: its checkout's generator/targets.txt, else the
        /// ctk-* features of DIR/Cargo.toml; a --ctk target that list lacks is refused.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Check the seal of every generated file (default: generated/); needs no headers or libclang.
    Verify {
        /// Files or folders to check.
        paths: Vec<PathBuf>,
        /// Check git's index (what the next commit will contain) instead of the work tree.
        #[arg(long)]
        staged: bool,
        /// Accept that a file sealed in HEAD is gone (a dropped target): noted, not failed.
        #[arg(long)]
        allow_deletions: bool,
    },
    /// Run everything CI checks: fmt, verify, check, clippy, docs, the API check, every test (the
    /// loom models among them) and the CPU bench's instruction budgets.
    Test,
    /// List the public API of cuda-hostcb, cuda-hostcb-safe and hostcb-seal (rustdoc JSON) and
    /// compare it with the listings of the last release in api/, as docs/releases.md allows.
    Api {
        /// Write the listings for the current API and version instead (at a release).
        #[arg(long)]
        bless: bool,
    },
    /// Time regen (next to its bindgen floor), verify, check and builds of the generated crate.
    Bench(bench::Args),
    /// Fuzz the parsers of untrusted input (seal lines, sealed files, inputs.lock, cached
    /// summaries, wheels and their RECORD) for a long run; `cargo test` runs a short one.
    Fuzz(fuzz::Args),
    /// Model-check the safe layer's and the loader's concurrent protocols with loom, alone
    /// (tests/loom, built with its feature `loom`); `cargo xtask test` explores the same models
    /// in its test run.
    Loom(loom::Args),
    /// Time cold builds of a program using one target, against cudarc's sys layer, side by side;
    /// sealed source per target; the layout oracle's counts.
    BenchCold(coldbench::Args),
    /// Regenerate every listed target (or the one --ctk names) in memory and fail if the
    /// committed output differs.
    Check {
        /// The target to check, MAJOR.MINOR, or all (default).
        #[arg(long, default_value = "all")]
        ctk: String,
    },
    /// Compare the models of two pinned targets (any of generator/inputs.lock): functions, ABI
    /// versions, signatures, types, fields and enum values added, removed or changed. Exits 0
    /// whether or not they differ, unless --exit-code is given.
    Diff {
        /// The older target, MAJOR.MINOR.
        a: String,
        /// The newer target, MAJOR.MINOR.
        b: String,
        /// Exit 1 when the targets differ and 0 when they do not, as `git diff --exit-code`.
        #[arg(long)]
        exit_code: bool,
    },
    /// Check gcc's layout of every struct, union and enum against rustc's for pinned targets
    /// (all-pinned, all, or one), in a scratch copy of the workspace (nothing committed changes).
    Layout(layout::Args),
    /// Pin the newest header packages of a CTK target on PyPI in generator/inputs.lock (fetched
    /// and hashed); then list the target in generator/targets.txt to generate it.
    Pin {
        /// The target, MAJOR.MINOR (12.x or 13.x).
        #[arg(long)]
        ctk: String,
        /// Accept new bytes for a version the lock already holds (refused otherwise).
        #[arg(long)]
        repin: bool,
    },
}

/// What `main` removed of the environment ([`hostcb_generator::config::remove_foreign_variables`]),
/// given back to the cargo it runs ([`cargo`]): a cargo run without a variable that bindgen's
/// build script names rebuilds bindgen, and the next `cargo xtask`, with it, rebuilds it again.
static FOREIGN: std::sync::OnceLock<Vec<(String, std::ffi::OsString)>> = std::sync::OnceLock::new();

/// The variables of [`FOREIGN`].
pub fn foreign_variables() -> impl Iterator<Item = (&'static String, &'static std::ffi::OsString)> {
    FOREIGN.get().into_iter().flatten().map(|(n, v)| (n, v))
}

/// The cargo that runs this (`$CARGO`, else `cargo`), with the environment this process was
/// given.
pub fn cargo() -> std::process::Command {
    let mut cmd =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.envs(foreign_variables());
    cmd
}

fn main() -> ExitCode {
    // SAFETY: first thing in main, before any other thread starts.
    let removed = unsafe { hostcb_generator::config::remove_foreign_variables() };
    for (name, _) in &removed {
        eprintln!(
            "warning: ignoring {name} of the environment: the generated files depend only on the pinned inputs"
        );
    }
    FOREIGN.get_or_init(|| removed);
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            // Every error of the generator carries its cause in its own one-line message.
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The checkout the running command belongs to, found at run time: the nearest folder at or
/// above `$CARGO_MANIFEST_DIR` (as cargo sets it when it runs a program: `cargo xtask`, `cargo
/// test`), else the current directory, that holds `Cargo.toml` and `generator/allowlist/`. Never
/// the folder the xtask was compiled in: two checkouts that share one `CARGO_TARGET_DIR` can run
/// the same binary, built in the other checkout. The only place anything looks for a workspace.
fn workspace_root() -> anyhow::Result<PathBuf> {
    let start = match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => std::env::current_dir().unwrap_or_default(),
    };
    match start
        .ancestors()
        .find(|dir| dir.join("Cargo.toml").is_file() && dir.join("generator/allowlist").is_dir())
    {
        Some(root) => Ok(root.to_path_buf()),
        None => bail!(
            "cannot find the workspace to act on: no folder above {} holds Cargo.toml and generator/allowlist/; run cargo xtask inside a checkout of cuda-hostcb",
            start.display()
        ),
    }
}

/// The targets a `--ctk` value names: `all` is every target of the output tree's list (this
/// checkout's `generator/targets.txt`, or, under `regen --out`, that tree's own list); one target
/// must be on that list (its files live in the generated crate beside the others).
fn targets(config: &Config, ctk: &str) -> anyhow::Result<Vec<Ctk>> {
    let listed = &config.targets;
    let lock = config.lock();
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let own = matches!(&config.targets_from, TargetsFrom::List(list)
        if canonical(list) == canonical(&config.root.join(TARGETS_PATH)));
    if !own && let Some(unpinned) = listed.iter().find(|c| !lock.targets().contains(c)) {
        bail!(
            "the tree at {} holds CTK {unpinned} ({} lists {}), which this checkout's generator/inputs.lock does not pin; pin it here with cargo xtask pin --ctk {unpinned}, or take it off that list (nothing was written)",
            config.out.display(),
            targets_from(config),
            spelled(listed)
        );
    }
    if ctk == "all" {
        return Ok(listed.clone());
    }
    let one = ctk.parse::<Ctk>()?;
    if listed.contains(&one) {
        return Ok(vec![one]);
    }
    if !own {
        let how = match &config.targets_from {
            TargetsFrom::List(list) => format!(
                "add {one} to {} (keep it sorted) and run this again",
                list.display()
            ),
            TargetsFrom::Manifest(manifest) => format!(
                "add the line `{} = []` to the generated features of {} and run this again",
                one.feature(),
                manifest.display()
            ),
        };
        bail!(
            "CTK {one} is not a target of the tree at {}: {} lists {}; {how}, or pick a target it lists (nothing was written)",
            config.out.display(),
            targets_from(config),
            spelled(listed)
        );
    }
    if lock.targets().contains(&one) {
        bail!(
            "CTK {one} is pinned but generated/ does not hold it: add {one} to generator/targets.txt (which lists {}), then run cargo xtask regen --ctk all",
            spelled(listed)
        );
    }
    bail!(
        "CTK {one} is not a target here: generator/targets.txt lists {} and generator/inputs.lock pins {}; pin it with cargo xtask pin --ctk {one}",
        spelled(listed),
        spelled(&lock.targets())
    )
}

/// Where the target list of the output tree comes from, for messages.
fn targets_from(config: &Config) -> String {
    match &config.targets_from {
        TargetsFrom::List(list) => list.display().to_string(),
        TargetsFrom::Manifest(manifest) => format!(
            "the generated features of {} (no generator/targets.txt lies beside that folder)",
            manifest.display()
        ),
    }
}

/// Runs one command; the exit status on success is 0, except `diff --exit-code` over targets
/// that differ (1, as `git diff --exit-code`).
fn run(command: Command) -> anyhow::Result<ExitCode> {
    let root = workspace_root()?;
    sources::ensure_built_from(&root)?;
    // What the generator reads of the environment, read here once; below, only the configuration.
    let load = || Config::load(&root, &Environment::of_process());
    let done = match command {
        Command::Regen {
            ctk,
            cuda_home,
            out,
        } => regen(load()?, &ctk, cuda_home, out),
        Command::Verify {
            paths,
            staged,
            allow_deletions,
        } => {
            let options = VerifyOptions {
                source: if staged {
                    Source::Index
                } else {
                    Source::WorkTree
                },
                allow_deletions: allow_deletions
                    || std::env::var_os(hostcb_seal::ALLOW_DELETIONS_ENV).is_some_and(|v| v == "1"),
                ..verify_options()
            };
            verify(&root, paths, &options)
        }
        Command::Check { ctk } => check(&load()?, &ctk),
        Command::Pin { ctk, repin } => pin::run(&load()?, &ctk, repin),
        Command::Diff { a, b, exit_code } => {
            let differ = diff(&load()?, &a, &b)?;
            return Ok(if differ && exit_code {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            });
        }
        Command::Test => ci::run(&root),
        Command::Api { bless } => api::run(&root, bless),
        Command::Bench(args) => bench::run(&load()?, args),
        Command::Layout(args) => layout::run(&load()?, args),
        Command::BenchCold(args) => coldbench::run(&load()?, args),
        Command::Fuzz(args) => fuzz::run(&root, args),
        Command::Loom(args) => loom::run(&root, args),
    };
    done.map(|()| ExitCode::SUCCESS)
}

/// One line per generated target, as it is done.
fn report_target(generated: &TargetOutput) {
    for w in &generated.warnings {
        eprintln!("warning: {w}");
    }
    eprintln!(
        "CTK {}: {} driver and {} runtime functions, {:.2} s",
        generated.ctk,
        generated.summary.driver.len(),
        generated.summary.runtime.len(),
        generated.took.as_secs_f64()
    );
}

/// One `warning:` line per file a complete output does not produce but regen cannot prove it
/// wrote, so it keeps it.
fn report_kept(root: &Path, report: &TreeReport) {
    for (path, why) in &report.kept {
        eprintln!(
            "warning: kept {}: {why}; delete it yourself if it is not wanted",
            root.join(path).display()
        );
    }
}

fn regen(
    config: Config,
    ctk: &str,
    cuda_home: Option<PathBuf>,
    out: Option<PathBuf>,
) -> anyhow::Result<()> {
    // Another tree is written for its own target list: its all-target files (the module list,
    // the cargo features, the target macros) name what it holds.
    let config = match out {
        Some(out) => {
            output_folder(&out)?;
            config.for_out(out)?
        }
        None => config,
    };
    let ctks = targets(&config, ctk)?;
    if cuda_home.is_some() && ctks.len() != 1 {
        bail!(
            "--cuda-home reads one toolkit, so it needs one --ctk target ({}), not 'all'",
            spelled(&config.targets)
        );
    }
    let root = config.out.clone();
    output_folder(&root)?;
    let started = Instant::now();
    let output = pipeline::generate_crate(
        &config,
        &ctks,
        &Options { cuda_home },
        Others::Cached,
        report_target,
    )?;
    for w in &output.warnings {
        eprintln!("warning: {w}");
    }
    let summary = emit::tree::ensure_tree(&root, &output.files, output.complete, Mode::Write)?;
    for f in &summary.written {
        eprintln!("wrote {}", root.join(f).display());
    }
    for f in &summary.deleted {
        eprintln!(
            "deleted {} (its target is no longer listed)",
            root.join(f).display()
        );
    }
    report_kept(&root, &summary);
    eprintln!(
        "regen: {} files, {} written, {} unchanged, {} deleted, in {:.2} s",
        output.files.len(),
        summary.written.len(),
        summary.unchanged.len(),
        summary.deleted.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Refuses an output folder that is not the folder of the generated crate.
fn output_folder(root: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!(
            "the output directory {} is not a folder; pass the folder of the generated crate as --out DIR (nothing was written)",
            root.display()
        ),
        Err(_) => bail!(
            "the output directory {} does not exist; create it or pass an existing --out DIR",
            root.display()
        ),
    }
    if !is_generated_crate(root)? {
        bail!(
            "--out {} is not the folder of the generated crate: it has no Cargo.toml of the package {GENERATED_PACKAGE}; point --out at the generated/ folder of a checkout (nothing was written)",
            root.display()
        );
    }
    Ok(())
}

/// The package name of the generated crate, which `regen --out` requires of its folder.
const GENERATED_PACKAGE: &str = "cuda-hostcb";

/// Whether `dir` holds the generated crate: a `Cargo.toml` whose `[package]` is named
/// `cuda-hostcb`. A line-wise reading is enough for the one key of one section this asks about,
/// and keeps a TOML parser out of the xtask's dependencies.
/// The manifest is opened only if it is a regular file (a FIFO there is an error, not a hang).
fn is_generated_crate(dir: &Path) -> anyhow::Result<bool> {
    let Some(bytes) = emit::tree::read_regular(&dir.join("Cargo.toml"))? else {
        return Ok(false);
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut in_package = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "name"
        {
            return Ok(value.trim().trim_matches('"') == GENERATED_PACKAGE);
        }
    }
    Ok(false)
}

/// Needs only the target list: no lock, templates or inputs.
fn verify(root: &Path, paths: Vec<PathBuf>, options: &VerifyOptions) -> anyhow::Result<()> {
    let targets = Config::listed_targets(root)?;
    let roots = verify_roots(&root.join("generated"), &targets, paths);
    // The report lists each failure on its own line, then a summary; the same as `hostcb-seal verify`.
    hostcb_seal::run_verify(&roots, options, &mut std::io::stderr())?;
    Ok(())
}

/// The roots to verify for `paths` (default: the generated crate at `generated`). The generated
/// crate's root, however it is spelled, must hold every target's sealed files.
fn verify_roots(generated: &Path, targets: &[Ctk], paths: Vec<PathBuf>) -> Vec<VerifyRoot> {
    let paths = if paths.is_empty() {
        vec![generated.to_path_buf()]
    } else {
        paths
    };
    let generated = std::fs::canonicalize(generated).ok();
    paths
        .into_iter()
        .map(|path| {
            let is_generated =
                generated.is_some() && std::fs::canonicalize(&path).ok() == generated;
            let root = VerifyRoot::new(path);
            if is_generated {
                root.expecting(emit::sealed_files(targets))
            } else {
                root
            }
        })
        .collect()
}

/// Failures name the `cargo xtask regen --ctk` that fixes them; a killed regen's temporary
/// files are skipped with a note.
fn verify_options() -> VerifyOptions {
    VerifyOptions {
        regen_command: format!("cargo xtask regen --ctk {CTK_PLACEHOLDER}"),
        temp_prefix: Some(emit::tree::TEMP_PREFIX.to_owned()),
        ..VerifyOptions::default()
    }
}

/// A target of `diff`: any target the lock pins, listed in `generator/targets.txt` or not.
fn pinned(lock: &Lock, given: &str) -> anyhow::Result<Ctk> {
    let pinned = lock.targets();
    match given.parse::<Ctk>() {
        Ok(ctk) if pinned.contains(&ctk) => Ok(ctk),
        _ => bail!(
            "'{given}' is not a pinned CTK target: generator/inputs.lock pins {}; pick two of them (cargo xtask pin --ctk MAJOR.MINOR pins another)",
            spelled(&pinned)
        ),
    }
}

/// Prints the differences between the models of `a` and `b`; returns whether there are any.
fn diff(config: &Config, a: &str, b: &str) -> anyhow::Result<bool> {
    let (a, b) = (pinned(config.lock(), a)?, pinned(config.lock(), b)?);
    let started = Instant::now();
    let from = pipeline::read_model(config, a, &Options::default())?;
    let to = pipeline::read_model(config, b, &Options::default())?;
    let diff = hostcb_generator::diff::diff(&from, &to);
    print!("{diff}");
    eprintln!(
        "diff: {} difference(s) between CTK {a} and {b}, in {:.2} s",
        diff.differences.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(!diff.differences.is_empty())
}

fn check(config: &Config, ctk: &str) -> anyhow::Result<()> {
    let ctks = targets(config, ctk)?;
    let output = pipeline::generate_crate(
        config,
        &ctks,
        &Options::default(),
        Others::Read,
        report_target,
    )?;
    for w in &output.warnings {
        eprintln!("warning: {w}");
    }
    let report = emit::tree::ensure_tree(&config.out, &output.files, output.complete, Mode::Check)?;
    report_kept(&config.out, &report);
    let diffs = &report.differences;
    if diffs.is_empty() {
        eprintln!(
            "check: {} generated files match the committed ones",
            output.files.len()
        );
        return Ok(());
    }
    for d in diffs {
        eprintln!(
            "--- {} differs from what the generator produces now:\n{}",
            d.path.display(),
            d.diff
        );
    }
    let this = RecordedGenerator::this(config.templates.sha256());
    let others = other_generators(&config.out, &report, &this);
    if let Some((other, files)) = others.iter().next() {
        let also = match others.len() {
            1 => String::new(),
            n => format!(" ({} other generators in all)", n),
        };
        bail!(
            "{} generated file(s) are stale: {} of them (e.g. {}) were made by another generator, {other}{also}, not by this checkout's, {}; to keep this checkout's generator, run cargo xtask regen --ctk all; to backport the other one, bring its generator here first (git restore --source=<its commit> --staged --worktree -- generator templates xtask ':!generator/targets.txt', as the README's \"Backporting to a maintenance branch\" says), then run cargo xtask regen --ctk all here, or cargo xtask regen --ctk all --out <this checkout>/generated from the checkout it was made in",
            diffs.len(),
            others.values().map(Vec::len).sum::<usize>(),
            files[0].display(),
            this
        );
    }
    bail!(
        "{} generated file(s) are stale; run: {}",
        diffs.len(),
        fixes(&ctks, &report).join(" && ")
    )
}

/// The files of `report` that differ and whose header records another generator than `this`
/// (another version, other sources or other templates), by generator.
fn other_generators(
    root: &Path,
    report: &TreeReport,
    this: &RecordedGenerator,
) -> std::collections::BTreeMap<String, Vec<PathBuf>> {
    let mut others = std::collections::BTreeMap::<String, Vec<PathBuf>>::new();
    for d in &report.differences {
        let Ok(Some(bytes)) = emit::tree::read_regular(&root.join(&d.path)) else {
            continue;
        };
        if let Some(made_by) = RecordedGenerator::of_file(&bytes)
            && made_by != *this
        {
            others
                .entry(made_by.to_string())
                .or_default()
                .push(d.path.clone());
        }
    }
    others
}

/// The regen commands that fix the differences of `report`: one per target whose own files
/// differ, or `--ctk all` when a file of the whole list does.
fn fixes(ctks: &[Ctk], report: &TreeReport) -> Vec<String> {
    let of_target = |path: &Path| {
        ctks.iter()
            .copied()
            .find(|c| path.starts_with(emit::target_dir(*c)))
    };
    let per_target: Vec<Option<Ctk>> = report
        .differences
        .iter()
        .map(|d| of_target(&d.path))
        .collect();
    if per_target.iter().any(Option::is_none) {
        return vec!["cargo xtask regen --ctk all".to_owned()];
    }
    ctks.iter()
        .filter(|c| per_target.contains(&Some(**c)))
        .map(|c| format!("cargo xtask regen --ctk {c}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allocator_honours_every_alignment_and_keeps_the_bytes_on_realloc() {
        use std::alloc::{GlobalAlloc, Layout};
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 7, 8, 24, 52, 100, 5000, 1 << 20] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a layout of non-zero size; each block is freed once, with its layout.
                unsafe {
                    let zeroed = ALLOCATOR.alloc_zeroed(layout);
                    assert_eq!(zeroed as usize % align, 0, "alloc_zeroed({size}, {align})");
                    assert!(
                        std::slice::from_raw_parts(zeroed, size)
                            .iter()
                            .all(|b| *b == 0)
                    );
                    ALLOCATOR.dealloc(zeroed, layout);
                    let p = ALLOCATOR.alloc(layout);
                    assert_eq!(p as usize % align, 0, "alloc({size}, {align})");
                    p.write_bytes(0xa5, size);
                    let q = ALLOCATOR.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "realloc({size}, {align})");
                    assert!(
                        std::slice::from_raw_parts(q, size)
                            .iter()
                            .all(|b| *b == 0xa5)
                    );
                    ALLOCATOR.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                }
            }
        }
    }

    /// A copy of the committed generated crate's sealed files under a temporary `generated/`.
    fn copy_of_generated() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("generated");
        let ws = workspace_root().expect("the workspace");
        let committed = ws.join("generated");
        for file in emit::sealed_files(&Config::listed_targets(&ws).unwrap()) {
            std::fs::create_dir_all(root.join(&file).parent().unwrap()).unwrap();
            std::fs::copy(committed.join(&file), root.join(&file)).unwrap();
        }
        (dir, root)
    }

    fn verify_report(
        generated: &Path,
        targets: &[Ctk],
        paths: Vec<PathBuf>,
    ) -> hostcb_seal::VerifyReport {
        hostcb_seal::verify_roots(&verify_roots(generated, targets, paths), &verify_options())
            .unwrap()
    }

    #[test]
    fn verify_expects_every_targets_files_in_the_generated_crate() {
        let (_dir, root) = copy_of_generated();
        let targets = Config::listed_targets(&workspace_root().unwrap()).unwrap();
        let report = verify_report(&root, &targets, Vec::new());
        assert!(report.is_ok(), "{report}");
        assert_eq!(report.checked.len(), emit::sealed_files(&targets).len());

        let newest = *targets.last().unwrap();
        let gone = emit::target_dir(newest).join("runtime.rs");
        let gone = gone.as_path();
        std::fs::remove_file(root.join(gone)).unwrap();
        // By default, and when the generated crate is named, however it is spelled.
        for spelled in [None, Some(root.join("src/.."))] {
            let paths: Vec<PathBuf> = spelled.iter().cloned().collect();
            let report = verify_report(&root, &targets, paths);
            let lines: Vec<String> = report.failures.iter().map(|f| f.to_string()).collect();
            let path = spelled.as_ref().unwrap_or(&root).join(gone);
            assert_eq!(
                lines,
                [format!(
                    "{}: is missing: it is one of the sealed files expected here; \
                     regenerate with cargo xtask regen --ctk {newest}",
                    path.display()
                )],
                "{report}"
            );
        }
        // Another folder expects nothing.
        let report = verify_report(&root, &targets, vec![root.join("src")]);
        assert!(report.is_ok(), "{report}");
    }
}
