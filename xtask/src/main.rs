//! `cargo xtask`: the project's maintenance commands.
//!
//! - `regen --ctk <MAJOR.MINOR|all> [--cuda-home DIR] [--out DIR]`: (re)generate bindings;
//! - `pin --ctk <MAJOR.MINOR>`: pin the newest header packages of a target in the lock;
//! - `verify [PATH...]`: check every seal (no headers, no libclang);
//! - `check`: regenerate in memory and fail if anything committed differs;
//! - `diff A B`: print what changes between the models of two pinned targets;
//! - `bench-cold`: cold builds of a one-target program against cudarc, sizes, oracle counts;
//! - `layout --ctk <all-pinned|all|MAJOR.MINOR>`: the layout oracle over pinned targets, in a
//!   scratch copy;
//! - `test`: everything CI runs (fmt, verify, check, clippy, docs, every test).

mod bench;
mod ci;
mod coldbench;
mod layout;
mod pin;
mod sources;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::bail;
use clap::{Parser, Subcommand};
use hostcb_generator::Ctk;
use hostcb_generator::emit::{self, GeneratedFile};
use hostcb_generator::inputs::Lock;
use hostcb_generator::model::Model;
use hostcb_generator::pipeline::{self, Options, Workspace};
use hostcb_generator::target::spelled;
use hostcb_seal::{CTK_PLACEHOLDER, VerifyOptions, VerifyRoot};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Maintenance commands of the CUDA host-callback bindings"
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
        /// Write the generated crate's files under DIR instead of generated/ (e.g. a backport checkout).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Check the seal of every generated file (default: generated/); needs no headers or libclang.
    Verify {
        /// Files or folders to check.
        paths: Vec<PathBuf>,
    },
    /// Run everything CI checks: fmt, verify, check, clippy, docs and every test.
    Test,
    /// Time regen (next to its bindgen floor), verify, check and builds of the generated crate.
    Bench(bench::Args),
    /// Time cold builds of a program using one target, against cudarc's sys layer, side by side;
    /// sealed source per target; the layout oracle's counts.
    BenchCold(coldbench::Args),
    /// Regenerate every target in memory and fail if the committed output differs.
    Check {
        /// The target to check, MAJOR.MINOR, or all (default).
        #[arg(long, default_value = "all")]
        ctk: String,
    },
    /// Compare the models of two pinned targets (any of generator/inputs.lock): functions, ABI
    /// versions, signatures, types, fields and enum values added, removed or changed.
    Diff {
        /// The older target, MAJOR.MINOR.
        a: String,
        /// The newer target, MAJOR.MINOR.
        b: String,
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
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Every error of the generator carries its cause in its own one-line message.
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The targets a `--ctk` value names: `all` is every target of `generator/targets.txt`; one
/// target must be listed there (its files live in the generated crate beside the others).
fn targets(ws: &Workspace, ctk: &str) -> anyhow::Result<Vec<Ctk>> {
    let listed = ws.targets()?;
    if ctk == "all" {
        return Ok(listed);
    }
    let one = ctk.parse::<Ctk>()?;
    if listed.contains(&one) {
        return Ok(vec![one]);
    }
    let lock = Lock::committed()?;
    if lock.targets().contains(&one) {
        bail!(
            "CTK {one} is pinned but generated/ does not hold it: add {one} to generator/targets.txt (which lists {}), then run cargo xtask regen --ctk all",
            spelled(&listed)
        );
    }
    bail!(
        "CTK {one} is not a target here: generator/targets.txt lists {} and generator/inputs.lock pins {}; pin it with cargo xtask pin --ctk {one}",
        spelled(&listed),
        spelled(&lock.targets())
    )
}

fn run(command: Command) -> anyhow::Result<()> {
    let ws = Workspace::locate()?;
    sources::ensure_built_from(&ws.root)?;
    match command {
        Command::Regen {
            ctk,
            cuda_home,
            out,
        } => regen(&ws, &ctk, cuda_home, out),
        Command::Verify { paths } => verify(&ws, paths),
        Command::Check { ctk } => check(&ws, &ctk),
        Command::Pin { ctk } => pin::run(&ws, &ctk),
        Command::Diff { a, b } => diff(&ws, &a, &b),
        Command::Test => ci::run(&ws.root),
        Command::Bench(args) => bench::run(&ws, args),
        Command::Layout(args) => layout::run(&ws, args),
        Command::BenchCold(args) => coldbench::run(&ws, args),
    }
}

fn generate_all(
    ws: &Workspace,
    ctks: &[Ctk],
    opts: &Options,
) -> anyhow::Result<Vec<pipeline::Generated>> {
    let mut all = Vec::new();
    for &ctk in ctks {
        let started = Instant::now();
        let generated = pipeline::generate(ws, ctk, opts)?;
        for w in &generated.warnings {
            eprintln!("warning: {w}");
        }
        eprintln!(
            "CTK {ctk}: {} driver and {} runtime functions, {:.2} s",
            generated.model.driver.functions.len(),
            generated.model.runtime.functions.len(),
            started.elapsed().as_secs_f64()
        );
        all.push(generated);
    }
    Ok(all)
}

/// The files of every target in `generated`, and the files that depend on the whole target list
/// (the module list with its compatibility table, the manifest's features), for the crate at
/// `root`. The table needs the model of every listed target: those not generated here are read
/// from their pinned headers (nothing of theirs is written).
fn all_files(
    ws: &Workspace,
    root: &Path,
    generated: Vec<pipeline::Generated>,
) -> anyhow::Result<(Vec<GeneratedFile>, Vec<GeneratedFile>)> {
    let mut models = Vec::new();
    for ctk in ws.targets()? {
        match generated.iter().find(|g| g.ctk == ctk) {
            Some(g) => models.push(g.model.clone()),
            None => models.push(pipeline::read_model(ws, ctk, &Options::default())?),
        }
    }
    let models: Vec<&Model> = models.iter().collect();
    let crate_files = pipeline::crate_files(root, &models)?;
    let files = generated.into_iter().flat_map(|g| g.files).collect();
    Ok((files, crate_files))
}

fn regen(
    ws: &Workspace,
    ctk: &str,
    cuda_home: Option<PathBuf>,
    out: Option<PathBuf>,
) -> anyhow::Result<()> {
    let ctks = targets(ws, ctk)?;
    if cuda_home.is_some() && ctks.len() != 1 {
        bail!(
            "--cuda-home reads one toolkit, so it needs one --ctk target ({}), not 'all'",
            spelled(&ws.targets()?)
        );
    }
    let root = out.unwrap_or_else(|| ws.generated());
    if !root.is_dir() {
        bail!(
            "the output directory {} does not exist; create it or pass an existing --out DIR",
            root.display()
        );
    }
    if !is_generated_crate(&root) {
        bail!(
            "--out {} is not the folder of the generated crate: it has no Cargo.toml of the package {GENERATED_PACKAGE}; point --out at the generated/ folder of a checkout (nothing was written)",
            root.display()
        );
    }
    let started = Instant::now();
    let generated = generate_all(ws, &ctks, &Options { cuda_home })?;
    let (mut files, crate_files) = all_files(ws, &root, generated)?;
    files.extend(crate_files);
    // Only a full regen knows every file the list produces, so only it deletes the others.
    let delete = if ctk == "all" {
        emit::unproduced_sealed_files(&root, &files)
    } else {
        Vec::new()
    };
    let summary = emit::write_tree(&root, &files, &delete)?;
    for f in &summary.written {
        eprintln!("wrote {}", root.join(f).display());
    }
    for f in &summary.deleted {
        eprintln!(
            "deleted {} (its target is no longer listed)",
            root.join(f).display()
        );
    }
    eprintln!(
        "regen: {} files, {} written, {} unchanged, {} deleted, in {:.2} s",
        files.len(),
        summary.written.len(),
        summary.unchanged.len(),
        summary.deleted.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The package name of the generated crate, which `regen --out` requires of its folder.
const GENERATED_PACKAGE: &str = "cuda-hostcb";

/// Whether `dir` holds the generated crate: a `Cargo.toml` whose `[package]` is named
/// `cuda-hostcb`. A line-wise reading is enough for the one key of one section this asks about,
/// and keeps a TOML parser out of the xtask's dependencies.
fn is_generated_crate(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
        return false;
    };
    let mut in_package = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "name"
        {
            return value.trim().trim_matches('"') == GENERATED_PACKAGE;
        }
    }
    false
}

fn verify(ws: &Workspace, paths: Vec<PathBuf>) -> anyhow::Result<()> {
    let roots = verify_roots(&ws.generated(), &ws.targets()?, paths);
    // The report lists each failure on its own line, then a summary; the same as `hostcb-seal verify`.
    hostcb_seal::run_verify(&roots, &verify_options(), &mut std::io::stderr())?;
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
        temp_prefix: Some(emit::TEMP_PREFIX.to_owned()),
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

fn diff(ws: &Workspace, a: &str, b: &str) -> anyhow::Result<()> {
    let lock = Lock::committed()?;
    let (a, b) = (pinned(&lock, a)?, pinned(&lock, b)?);
    let started = Instant::now();
    let from = pipeline::read_model(ws, a, &Options::default())?;
    let to = pipeline::read_model(ws, b, &Options::default())?;
    let diff = hostcb_generator::diff::diff(&from, &to);
    print!("{diff}");
    eprintln!(
        "diff: {} difference(s) between CTK {a} and {b}, in {:.2} s",
        diff.differences.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn check(ws: &Workspace, ctk: &str) -> anyhow::Result<()> {
    let ctks = targets(ws, ctk)?;
    let generated = generate_all(ws, &ctks, &Options::default())?;
    let (mut files, crate_files) = all_files(ws, &ws.generated(), generated)?;
    files.extend(crate_files.iter().cloned());
    let mut diffs = emit::diff_tree(&ws.generated(), &files, 40);
    if ctk == "all" {
        diffs.extend(
            emit::unproduced_sealed_files(&ws.generated(), &files)
                .into_iter()
                .map(|path| emit::Difference {
                    path,
                    diff: "sealed, but its target is not listed in generator/targets.txt any more: regen deletes it".to_owned(),
                }),
        );
    }
    if diffs.is_empty() {
        eprintln!(
            "check: {} generated files match the committed ones",
            files.len()
        );
        return Ok(());
    }
    for d in &diffs {
        eprintln!(
            "--- {} differs from what the generator produces now:\n{}",
            d.path.display(),
            d.diff
        );
    }
    let shared = diffs.iter().any(|d| {
        crate_files.iter().any(|f| f.path == d.path)
            || !ctks
                .iter()
                .any(|c| d.path.starts_with(emit::target_dir(*c)))
    });
    let stale: Vec<String> = if shared {
        vec!["cargo xtask regen --ctk all".to_owned()]
    } else {
        ctks.iter()
            .filter(|c| {
                diffs
                    .iter()
                    .any(|d| d.path.starts_with(emit::target_dir(**c)))
            })
            .map(|c| format!("cargo xtask regen --ctk {c}"))
            .collect()
    };
    bail!(
        "{} generated file(s) are stale; run: {}",
        diffs.len(),
        stale.join(" && ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of the committed generated crate's sealed files under a temporary `generated/`.
    fn copy_of_generated() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("generated");
        let ws = Workspace::locate().expect("the workspace");
        let committed = ws.generated();
        for file in emit::sealed_files(&ws.targets().unwrap()) {
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
        let targets = Workspace::locate().unwrap().targets().unwrap();
        let report = verify_report(&root, &targets, Vec::new());
        assert!(report.is_ok(), "{report}");
        assert_eq!(report.checked.len(), emit::sealed_files(&targets).len());

        let gone = Path::new("src/bindings/ctk_13_5/runtime.rs");
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
                     regenerate with cargo xtask regen --ctk 13.5",
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
