//! `cargo xtask bench`: the generator's own costs — `regen --ctk all` next to its floor (one bare
//! bindgen parse of each header), `regen` of the first listed target next to that target's own
//! floor, `verify`, `check` — and build times of the generated crate with
//! one target feature and with all (cold in a fresh target folder, cold for the crate alone with
//! its dependencies built, incremental after `touch generated/src/lib.rs`), each as min / median
//! / max over repetitions. Builds use their own target folders under `target/xtask-bench/`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, ensure};
use hostcb_generator::allowlist::DenyList;
use hostcb_generator::config::Config;
use hostcb_generator::emit::{self, tree::Mode};
use hostcb_generator::inputs::Inputs;
use hostcb_generator::manifest;
use hostcb_generator::model::Api;
use hostcb_generator::pipeline::{self, CrateOutput, Options};
use hostcb_generator::reader::{self, HeaderSet};

/// Options of `cargo xtask bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Timed repetitions of each measurement (regen also runs once untimed first, as a warm-up).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Leave out the build times of the generated crate (the slowest part).
    #[arg(long)]
    skip_builds: bool,
}

/// The generated crate's features measured: one target (the newest listed), and all of them.
fn builds(ws: &Config) -> [(String, String); 2] {
    let newest = ws.targets.last().map(|c| c.feature()).unwrap_or_default();
    [
        (newest.clone(), format!("one target ({newest})")),
        ("all-targets".to_owned(), "all targets".to_owned()),
    ]
}

/// Runs every measurement and prints the table on stdout (progress goes to stderr).
pub fn run(ws: &Config, args: Args) -> anyhow::Result<()> {
    let reps = args.reps as usize;
    let scratch = ws.root.join("target/xtask-bench");
    std::fs::create_dir_all(&scratch)
        .map_err(|e| anyhow!("cannot create {}: {e}", scratch.display()))?;
    let steps = 1 + 8 * reps + if args.skip_builds { 0 } else { 6 * reps };
    let mut progress = Progress::new(steps);
    let mut table = Table::default();

    // The pipeline gathers the inputs (downloading them on a first run); the floor's bare parses
    // below load the same libclang.
    let output = progress.step("regen --ctk all, warm-up", || generate_all(ws, 1))?;
    let sealed = output.files.len();

    // Serial and parallel runs interleaved, rep by rep, so both see the same machine. Regen runs
    // at most one thread per API of a target.
    let threads = pipeline::default_threads().min(2 * ws.targets.len().max(1));
    let out = scratch.join("regen-out");
    let (mut serial, mut parallel) = (Vec::new(), Vec::new());
    for rep in 1..=reps {
        serial.push(progress.step(
            &format!("regen --ctk all, one thread, rep {rep}/{reps}"),
            || regen_into(ws, &out, 1),
        )?);
        parallel.push(progress.step(
            &format!("regen --ctk all, {threads} threads, rep {rep}/{reps}"),
            || regen_into(ws, &out, threads),
        )?);
    }
    let files = format!("{} targets, {sealed} files", ws.targets.len());
    let serial = table.row(format!("regen --ctk all, one thread ({files})"), serial);
    let regen = table.row(
        format!("regen --ctk all, {threads} threads (what regen runs)"),
        parallel,
    );
    table.ratio("  one thread / parallel (medians)", serial / regen);

    // regen of one target, the others' summaries cached (the warm-up cached them).
    let first = ws.targets.first().copied();
    let mut one = None;
    if let Some(first) = first {
        let mut samples = Vec::new();
        for rep in 1..=reps {
            samples.push(
                progress.step(&format!("regen --ctk {first}, rep {rep}/{reps}"), || {
                    regen_one(ws, first)
                })?,
            );
        }
        one = Some(table.row(
            format!("regen --ctk {first} (in memory; the other targets' summaries cached)"),
            samples,
        ));
    }

    let parses = floor_inputs(ws)?;
    let (mut samples, mut samples_one) = (Vec::new(), Vec::new());
    for rep in 1..=reps {
        let t = progress.step(
            &format!("floor: bare bindgen parses, rep {rep}/{reps}"),
            || floor(parses.iter()),
        )?;
        samples.push(t);
        if let Some(first) = first {
            let t = progress.step(
                &format!("floor of {first}: its bare bindgen parses, rep {rep}/{reps}"),
                || floor(parses.iter().filter(|p| p.headers.ctk == first)),
            )?;
            samples_one.push(t);
        }
    }
    let floor_all = table.row(
        format!(
            "floor: one bare bindgen parse of each of {} headers",
            parses.len()
        ),
        samples,
    );
    table.ratio("  regen / floor (medians)", regen / floor_all);
    if let (Some(first), Some(one)) = (first, one) {
        let floor_one = table.row(
            format!("floor of {first}: one bare bindgen parse of each of its 2 headers"),
            samples_one,
        );
        table.ratio(
            &format!("  regen --ctk {first} / its floor (medians)"),
            one / floor_one,
        );
    }

    let mut samples = Vec::new();
    let mut note = None;
    for rep in 1..=reps {
        let (t, n) = progress.step(&format!("verify, rep {rep}/{reps}"), || verify(ws))?;
        samples.push(t);
        note = Some(n);
    }
    table.row(
        format!("verify generated/ ({})", note.unwrap_or_default()),
        samples,
    );

    let mut samples = Vec::new();
    for rep in 1..=reps {
        samples.push(
            progress.step(&format!("built-from check, rep {rep}/{reps}"), || {
                built_from(ws)
            })?,
        );
    }
    table.row(
        "built-from check (hash the linked crates' sources, run before every command)".to_owned(),
        samples,
    );

    let mut samples = Vec::new();
    let mut note = None;
    for rep in 1..=reps {
        let (t, n) = progress.step(&format!("check, rep {rep}/{reps}"), || check(ws))?;
        samples.push(t);
        note = Some(n);
    }
    table.row(format!("check ({})", note.unwrap_or_default()), samples);

    if !args.skip_builds {
        let lib = ws.out.join("src/lib.rs");
        for (features, label) in builds(ws) {
            let (features, label) = (features.as_str(), label.as_str());
            let dir = scratch.join(format!("build-{}", features.replace(',', "+")));
            let (mut cold, mut own, mut incremental) = (Vec::new(), Vec::new(), Vec::new());
            for rep in 1..=reps {
                cold.push(progress.step(
                    &format!("build cuda-hostcb, {label}, cold, rep {rep}/{reps}"),
                    || {
                        remove_dir(&dir)?;
                        cargo_build(ws, &dir, features)
                    },
                )?);
                incremental.push(progress.step(
                    &format!("build cuda-hostcb, {label}, incremental, rep {rep}/{reps}"),
                    || {
                        touch(&lib)?;
                        cargo_build(ws, &dir, features)
                    },
                )?);
                own.push(progress.step(
                    &format!("build cuda-hostcb, {label}, crate only, rep {rep}/{reps}"),
                    || {
                        cargo(ws, &dir, &["clean", "--quiet", "-p", "cuda-hostcb"])?;
                        cargo_build(ws, &dir, features)
                    },
                )?);
            }
            remove_dir(&dir)?;
            table.row(
                format!("build cuda-hostcb, {label}, cold (fresh target folder)"),
                cold,
            );
            table.row(
                format!("build cuda-hostcb, {label}, cold crate only (dependencies built)"),
                own,
            );
            table.row(
                format!("build cuda-hostcb, {label}, incremental (lib.rs touched)"),
                incremental,
            );
        }
    }

    println!("cargo xtask bench --reps {reps}: {}", machine());
    print!("{}", table.render());
    Ok(())
}

/// Generates every file of the crate in memory, as regen and check do, on at most `threads`
/// threads.
fn generate_all(ws: &Config, threads: usize) -> anyhow::Result<CrateOutput> {
    Ok(pipeline::generate_crate_with(
        ws,
        &ws.targets,
        &Options::default(),
        pipeline::Others::Read,
        threads,
        |_| {},
    )?)
}

/// What `regen --ctk <ctk>` computes, in memory: that target's files and the all-target files,
/// from the cached summaries of the others; timed.
fn regen_one(ws: &Config, ctk: hostcb_generator::Ctk) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    let output = pipeline::generate_crate(
        ws,
        &[ctk],
        &Options::default(),
        pipeline::Others::Cached,
        |_| {},
    )?;
    let elapsed = t0.elapsed();
    ensure!(
        output.generated.len() == 1 && !output.complete,
        "regen --ctk {ctk} generated {} targets",
        output.generated.len()
    );
    Ok(elapsed)
}

/// `regen --ctk all --out <out>` into a fresh `out` holding the generated crate's manifest, timed;
/// the output is then checked (untimed): every file written and every seal valid.
fn regen_into(ws: &Config, out: &Path, threads: usize) -> anyhow::Result<Duration> {
    remove_dir(out)?;
    std::fs::create_dir_all(out).map_err(|e| anyhow!("cannot create {}: {e}", out.display()))?;
    std::fs::copy(ws.out.join(manifest::PATH), out.join(manifest::PATH))
        .map_err(|e| anyhow!("cannot copy the manifest into {}: {e}", out.display()))?;
    let t0 = Instant::now();
    let output = generate_all(ws, threads)?;
    let summary = emit::tree::ensure_tree(out, &output.files, output.complete, Mode::Write)?;
    let elapsed = t0.elapsed();
    let cargo_toml = Path::new(manifest::PATH);
    let sealed = output.files.iter().filter(|f| f.path != cargo_toml).count();
    let written = summary.written.iter().filter(|p| *p != cargo_toml).count();
    ensure!(
        written == sealed,
        "regen wrote {written} of {sealed} sealed files into the empty folder {}",
        out.display()
    );
    let report = hostcb_seal::verify_paths(&[out.to_path_buf()])?;
    ensure!(
        report.is_ok() && report.checked.len() == sealed,
        "regen's output in {} does not verify: {report}",
        out.display()
    );
    remove_dir(out)?;
    Ok(elapsed)
}

/// One bare parse: the headers of a target and API, with the allow-list the reader uses.
struct Parse {
    headers: HeaderSet,
    api: Api,
    list: DenyList,
    /// The inputs the headers were unpacked for, which keep their folder until the parse is done.
    _inputs: Inputs,
}

/// Gathers each target's inputs (their wheels cached by the warm-up) and builds the header sets
/// as the pipeline does.
fn floor_inputs(ws: &Config) -> anyhow::Result<Vec<Parse>> {
    let mut parses = Vec::new();
    for &ctk in &ws.targets {
        let inputs = Inputs::gather(&ws.inputs, ctk, None)?;
        inputs.libclang.activate()?;
        let headers = pipeline::header_set(&inputs);
        for (api, list) in [
            (Api::Driver, &ws.driver_list),
            (Api::Runtime, &ws.runtime_list),
        ] {
            parses.push(Parse {
                headers: headers.clone(),
                api,
                list: list.clone(),
                _inputs: inputs.clone(),
            });
        }
    }
    Ok(parses)
}

/// Every bare parse once, timed; each must produce some output.
fn floor<'a>(parses: impl Iterator<Item = &'a Parse>) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    for p in parses {
        let text = reader::bare_parse(&p.headers, p.api, &p.list)?;
        ensure!(
            !text.is_empty(),
            "bindgen produced nothing for the {} API of CTK {}",
            p.api.as_str(),
            p.headers.ctk
        );
    }
    Ok(t0.elapsed())
}

/// `verify` over generated/, timed; returns what it found, for the table.
fn verify(ws: &Config) -> anyhow::Result<(Duration, String)> {
    let t0 = Instant::now();
    let report = hostcb_seal::verify_paths(std::slice::from_ref(&ws.out))?;
    let elapsed = t0.elapsed();
    let mut note = format!("{} sealed files", report.checked.len());
    if !report.is_ok() {
        let _ = write!(
            note,
            "; {} FAILED: run cargo xtask verify",
            report.failures.len()
        );
    }
    Ok((elapsed, note))
}

/// The check every command starts with, timed: hash the sources of the workspace crates this
/// binary links and compare them with those they were compiled from.
fn built_from(ws: &Config) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    crate::sources::stale(&ws.root, &crate::sources::LINKED)?;
    Ok(t0.elapsed())
}

/// `check`, timed: regenerate all in memory and compare with generated/.
fn check(ws: &Config) -> anyhow::Result<(Duration, String)> {
    let t0 = Instant::now();
    let output = generate_all(ws, pipeline::default_threads())?;
    let diffs =
        emit::tree::ensure_tree(&ws.out, &output.files, output.complete, Mode::Check)?.differences;
    let elapsed = t0.elapsed();
    let note = if diffs.is_empty() {
        "regenerate all + compare, up to date".to_owned()
    } else {
        format!(
            "regenerate all + compare; {} file(s) STALE: run cargo xtask check",
            diffs.len()
        )
    };
    Ok((elapsed, note))
}

/// `cargo build -p cuda-hostcb --features <features>` in `target_dir`, timed.
fn cargo_build(ws: &Config, target_dir: &Path, features: &str) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    cargo(
        ws,
        target_dir,
        &[
            "build",
            "--quiet",
            "-p",
            "cuda-hostcb",
            "--features",
            features,
        ],
    )?;
    Ok(t0.elapsed())
}

/// Runs cargo with `args` at the workspace root with `CARGO_TARGET_DIR=target_dir`.
fn cargo(ws: &Config, target_dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = crate::cargo()
        .current_dir(&ws.root)
        .env("CARGO_TARGET_DIR", target_dir)
        .args(args)
        .output()
        .map_err(|e| anyhow!("cannot run cargo ({e}); is it on PATH (or named by $CARGO)?"))?;
    if !out.status.success() {
        bail!(
            "cargo {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Sets the modification time of `path` to now, leaving its bytes alone.
fn touch(path: &Path) -> anyhow::Result<()> {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(SystemTime::now()))
        .map_err(|e| anyhow!("cannot touch {}: {e}", path.display()))
}

fn remove_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow!("cannot remove {}: {e}", dir.display())),
    }
}

/// The CPU, its cores and the Rust compiler, in one line.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let rustc = Command::new("rustc")
        .arg("-V")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "rustc unknown".to_owned());
    format!("{cpu}, {cores} cores, {rustc}")
}

/// Numbered progress lines on stderr: the step, then its time when it ends.
struct Progress {
    done: usize,
    total: usize,
}

impl Progress {
    fn new(total: usize) -> Self {
        Progress { done: 0, total }
    }

    /// Runs `f` as the next step, printing its label first and how long it took after.
    fn step<T>(&mut self, label: &str, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
        self.done += 1;
        eprint!("[{}/{}] {label} ... ", self.done, self.total);
        let _ = std::io::stderr().flush();
        let t0 = Instant::now();
        let out = f();
        match &out {
            Ok(_) => eprintln!("{}", seconds(t0.elapsed())),
            Err(_) => eprintln!("failed"),
        }
        out
    }
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// The results: one line per measurement, plus ratio lines.
#[derive(Default)]
struct Table {
    lines: Vec<(String, Option<Stats>, Option<f64>)>,
}

/// Min, median and max of some repetitions.
#[derive(Clone, Copy)]
struct Stats {
    reps: usize,
    min: Duration,
    median: Duration,
    max: Duration,
}

impl Stats {
    fn of(mut samples: Vec<Duration>) -> Option<Self> {
        samples.sort();
        let n = samples.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => samples[n / 2],
            _ => (samples[n / 2 - 1] + samples[n / 2]) / 2,
        };
        Some(Stats {
            reps: n,
            min: samples[0],
            median,
            max: samples[n - 1],
        })
    }
}

impl Table {
    /// Adds a measurement; returns its median in seconds (0 when there were no samples).
    fn row(&mut self, label: String, samples: Vec<Duration>) -> f64 {
        let stats = Stats::of(samples);
        self.lines.push((label, stats, None));
        stats.map_or(0.0, |s| s.median.as_secs_f64())
    }

    fn ratio(&mut self, label: &str, value: f64) {
        self.lines.push((label.to_owned(), None, Some(value)));
    }

    fn render(&self) -> String {
        let width = self
            .lines
            .iter()
            .map(|l| l.0.len())
            .max()
            .unwrap_or(0)
            .max(11);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<width$}  {:>4}  {:>9}  {:>9}  {:>9}",
            "measurement", "reps", "min", "median", "max"
        );
        for (label, stats, ratio) in &self.lines {
            let _ = match (stats, ratio) {
                (Some(s), _) => writeln!(
                    out,
                    "{label:<width$}  {:>4}  {:>9}  {:>9}  {:>9}",
                    s.reps,
                    seconds(s.min),
                    seconds(s.median),
                    seconds(s.max)
                ),
                (None, Some(r)) => {
                    writeln!(out, "{label:<width$}  {:>4}  {:>9}  {r:>8.2}x", "", "")
                }
                (None, None) => writeln!(out, "{label}"),
            };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_table() {
        let ms = Duration::from_millis;
        let s = Stats::of(vec![ms(30), ms(10), ms(20), ms(40)]).unwrap();
        assert_eq!((s.min, s.median, s.max), (ms(10), ms(25), ms(40)));
        assert!(Stats::of(Vec::new()).is_none());
        let mut t = Table::default();
        let a = t.row("regen".into(), vec![ms(3000), ms(1000), ms(2000)]);
        let b = t.row("floor".into(), vec![ms(500)]);
        t.ratio("regen / floor", a / b);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "measurement    reps        min     median        max"
        );
        assert_eq!(
            lines[1],
            "regen             3     1.00 s     2.00 s     3.00 s"
        );
        assert_eq!(
            lines[2],
            "floor             1   500.0 ms   500.0 ms   500.0 ms"
        );
        assert_eq!(lines[3], "regen / floor                       4.00x");
    }
}
