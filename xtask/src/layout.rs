//! `cargo xtask layout --ctk <all-pinned|all|MAJOR.MINOR>`: the layout oracle
//! (`hostcb_generator::layout`) over any pinned targets, in a scratch copy of the workspace so
//! nothing committed changes.
//!
//! It copies the workspace's files (tracked and untracked, not ignored) to
//! `target/xtask-layout/work/`, lists the requested targets in the copy's
//! `generator/targets.txt`, generates them into the copy's `generated/`, runs each target's
//! layout tests there (`cargo test -p cuda-hostcb --lib layout::`, built in
//! `target/xtask-layout/build/`), and prints one row per target and API: structs, unions, enums
//! and fields checked, numbers compared, mismatches, items skipped. The bindings hold every struct, union
//! and enum of both headers, so the oracle covers the whole headers. `--tamper` adds one to the first
//! field offset gcc computed, in the copy, to see the check fail.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, anyhow, bail};
use hostcb_generator::Ctk;
use hostcb_generator::config::{Config, Environment};
use hostcb_generator::emit;
use hostcb_generator::emit::tree::Mode;
use hostcb_generator::inputs::Lock;
use hostcb_generator::pipeline;
use hostcb_generator::target::spelled;

/// Options of `cargo xtask layout`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The targets: all-pinned (every target of generator/inputs.lock), all (those of
    /// generator/targets.txt), or one pinned MAJOR.MINOR.
    #[arg(long)]
    ctk: String,
    /// Add one to the first field offset gcc computed (in the scratch copy), to see the check fail.
    #[arg(long)]
    tamper: bool,
}

/// One `layout:` line of the tests' output.
#[derive(Debug, PartialEq, Eq)]
struct Line {
    ctk: String,
    api: String,
    /// structs, unions, enums, fields, numbers, mismatches, skipped.
    counts: [usize; 7],
}

/// Parses `layout: CTK 13.5 driver: 4 structs, 1 unions, 13 enums, 14 fields, 62 numbers, 0
/// mismatches, 8 skipped`.
fn parse_line(line: &str) -> Option<Line> {
    // libtest's progress marks may share the line (`.layout: ...`).
    let rest = &line[line.find("layout: CTK ")? + "layout: CTK ".len()..];
    let (head, tail) = rest.split_once(": ")?;
    let (ctk, api) = head.split_once(' ')?;
    let mut counts = [0; 7];
    let parts: Vec<&str> = tail.split(", ").collect();
    if parts.len() != 7 {
        return None;
    }
    for (slot, part) in counts.iter_mut().zip(parts) {
        *slot = part.split(' ').next()?.parse().ok()?;
    }
    Some(Line {
        ctk: ctk.to_owned(),
        api: api.to_owned(),
        counts,
    })
}

/// The targets `--ctk` names.
fn targets(ws: &Config, lock: &Lock, ctk: &str) -> anyhow::Result<Vec<Ctk>> {
    let pinned = lock.targets();
    match ctk {
        "all-pinned" => Ok(pinned),
        "all" => Ok(ws.targets.clone()),
        one => match one.parse::<Ctk>() {
            Ok(c) if pinned.contains(&c) => Ok(vec![c]),
            _ => bail!(
                "--ctk '{one}' is not a pinned target: give all-pinned, all, or one of {} (generator/inputs.lock)",
                spelled(&pinned)
            ),
        },
    }
}

impl Args {
    /// The oracle over `ctk` (as `--ctk` takes it), as the allow-lists reach the headers.
    pub fn of(ctk: &str) -> Self {
        Args {
            ctk: ctk.to_owned(),
            tamper: false,
        }
    }
}

/// Runs the oracle and prints its table; see the module docs.
pub fn run(ws: &Config, args: Args) -> anyhow::Result<()> {
    let (table, _) = oracle(ws, &args)?;
    print!("{table}");
    Ok(())
}

/// Runs the oracle: its table, and how many targets it covered.
pub fn oracle(ws: &Config, args: &Args) -> anyhow::Result<(String, usize)> {
    let lock = ws.lock().clone();
    let ctks = targets(ws, &lock, &args.ctk)?;
    let started = Instant::now();
    let base = ws.root.join("target/xtask-layout");
    let work = base.join("work");
    copy_workspace(&ws.root, &work)?;
    only_the_generated_crate(&work)?;
    let list: String = ctks.iter().map(|c| format!("{c}\n")).collect();
    write(&work.join("generator/targets.txt"), &list)?;
    // The scratch copy's own configuration, over this checkout's input cache and libclang.
    let env = Environment {
        libclang_path: ws.inputs.libclang_path.clone(),
        inputs_cache: Some(ws.cache().to_path_buf()),
    };
    let scratch = Config::load(&work, &env)?;
    let output = pipeline::generate_crate(
        &scratch,
        &scratch.targets,
        &pipeline::Options::default(),
        pipeline::Others::Read,
        |generated| {
            eprintln!(
                "CTK {}: generated in the scratch copy, {:.2} s",
                generated.ctk,
                generated.took.as_secs_f64()
            )
        },
    )?;
    let root = scratch.out.clone();
    emit::tree::ensure_tree(&root, &output.files, output.complete, Mode::Write)?;
    if args.tamper {
        tamper(&root, ctks[0])?;
    }

    let features: Vec<String> = ctks.iter().map(|c| c.feature()).collect();
    eprintln!(
        "building and running the layout tests of {} target(s) in {} ...",
        ctks.len(),
        work.display()
    );
    let out = crate::cargo()
        .current_dir(&work)
        .env("CARGO_TARGET_DIR", base.join("build"))
        // A scratch copy gains nothing from incremental state, which is most of its disk.
        .env("CARGO_INCREMENTAL", "0")
        .args([
            "test",
            "--quiet",
            "-p",
            "cuda-hostcb",
            "--lib",
            "--features",
        ])
        .arg(features.join(","))
        .args(["--", "--nocapture", "--test-threads=1", "layout::"])
        .output()
        .map_err(|e| anyhow!("cannot run cargo ({e}); is it on PATH (or named by $CARGO)?"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Line> = stdout.lines().filter_map(parse_line).collect();
    let table = table(&lines);
    // With --nocapture the failing tests' panic messages go to stderr.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let failed: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| l.starts_with("CTK ") || l.starts_with("  "))
        .filter(|l| l.contains("differ between gcc and rustc") || l.contains(": gcc "))
        .collect();
    if !failed.is_empty() || !out.status.success() {
        print!("{table}");
    }
    for l in &failed {
        println!("{l}");
    }
    let want = 2 * ctks.len();
    if !out.status.success() {
        if lines.is_empty() {
            let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
        bail!(
            "the layout oracle found mismatches (or the scratch crate did not build): see above; the scratch copy is {}",
            work.display()
        );
    }
    if lines.len() != want {
        bail!(
            "the layout tests printed {} report lines, not the {want} of {} target(s) and two APIs",
            lines.len(),
            ctks.len()
        );
    }
    eprintln!(
        "layout: {} target(s), 0 mismatches, in {:.1} s",
        ctks.len(),
        started.elapsed().as_secs_f64()
    );
    Ok((table, ctks.len()))
}

/// The table of the report lines.
fn table(lines: &[Line]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "layout oracle (gcc against rustc), every struct, union and enum of the bindings:"
    );
    let _ = writeln!(
        out,
        "| target | API | structs | unions | enums | fields | numbers | mismatches | skipped |"
    );
    let _ = writeln!(
        out,
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let mut total = [0; 7];
    for l in lines {
        let cells: Vec<String> = l.counts.iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "| {} | {} | {} |", l.ctk, l.api, cells.join(" | "));
        for (t, c) in total.iter_mut().zip(l.counts) {
            *t += c;
        }
    }
    let cells: Vec<String> = total.iter().map(ToString::to_string).collect();
    let _ = writeln!(out, "| all | both | {} |", cells.join(" | "));
    out
}

/// Copies the files git knows in `root` (tracked and untracked, not ignored) to a fresh `to`.
fn copy_workspace(root: &Path, to: &Path) -> anyhow::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to).with_context(|| format!("cannot remove {}", to.display()))?;
    }
    let out = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .map_err(|e| anyhow!("cannot run git ls-files in {} ({e})", root.display()))?;
    if !out.status.success() {
        bail!(
            "git ls-files failed in {}: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    for rel in out.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        let rel = PathBuf::from(String::from_utf8_lossy(rel).into_owned());
        let from = root.join(&rel);
        // Regular files only: a tracked file deleted in the work tree, or a link, is left out.
        if !std::fs::symlink_metadata(&from).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let dest = to.join(&rel);
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::copy(&from, &dest)
            .with_context(|| format!("cannot copy {} to {}", from.display(), dest.display()))?;
    }
    Ok(())
}

/// Makes the copy's workspace hold only the generated crate: the other members name targets by
/// feature (the examples, the tests), which the copy's target list may not have.
fn only_the_generated_crate(work: &Path) -> anyhow::Result<()> {
    let path = work.join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut replaced = 0;
    let edited: Vec<String> = text
        .lines()
        .map(|line| {
            let key = line.split('=').next().unwrap_or("").trim();
            if key == "members" || key == "default-members" {
                replaced += 1;
                format!("{key} = [\"generated\"]")
            } else {
                line.to_owned()
            }
        })
        .collect();
    if replaced == 0 {
        bail!(
            "{} has no `members = [...]` line to point at the generated crate alone",
            path.display()
        );
    }
    write(&path, &(edited.join("\n") + "\n"))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Adds one to the first field offset of `ctk`'s layout file under `root` (sealed or not: the
/// test does not read the seal).
fn tamper(root: &Path, ctk: Ctk) -> anyhow::Result<()> {
    let path = root.join(emit::target_dir(ctk)).join("layout.rs");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let Some(at) = text.find("offset!(") else {
        bail!("{} has no field offset to tamper with", path.display());
    };
    let end = at + text[at..].find(')').expect("a closed row");
    let comma = at + text[at..end].rfind(", ").expect("a row with a number") + 2;
    let number: usize = text[comma..end].trim().parse()?;
    let row = &text[at..=end];
    eprintln!(
        "tamper: {}: `{row}` now says gcc computed {}",
        path.display(),
        number + 1
    );
    let tampered = format!("{}{}{}", &text[..comma], number + 1, &text[end..]);
    write(&path, &tampered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_parse() {
        let line = parse_line(
            "layout: CTK 13.5 driver: 4 structs, 1 unions, 13 enums, 14 fields, 62 numbers, 0 mismatches, 8 skipped",
        )
        .unwrap();
        assert_eq!(line.ctk, "13.5");
        assert_eq!(line.api, "driver");
        assert_eq!(line.counts, [4, 1, 13, 14, 62, 0, 8]);
        assert_eq!(parse_line("layout: CTK 13.5 driver: 4 structs"), None);
        let dotted = parse_line(
            ".layout: CTK 12.0 runtime: 1 structs, 0 unions, 0 enums, 2 fields, 6 numbers, 1 mismatches, 0 skipped",
        )
        .unwrap();
        assert_eq!((dotted.api.as_str(), dotted.counts[5]), ("runtime", 1));
    }
}
