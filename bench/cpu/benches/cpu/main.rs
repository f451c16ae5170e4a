//! CPU cost per call of the host-callback paths, over a stub driver and stub runtimes
//! (`bench/cpu/stub/`, built by `bench/cpu/build.rs` into `target/`), side by side with C
//! calling CUDA directly and with cudarc 0.19: time per call (interleaved rounds in one process)
//! and exact instruction counts (callgrind), with `--check` against the budgets in
//! `bench/cpu/budgets.txt`.
//!
//! ```text
//! cargo bench -p hostcb-cpu-bench --bench cpu                   # both tables (needs valgrind for the counts)
//! cargo bench -p hostcb-cpu-bench --bench cpu -- --time-only    # times only
//! cargo bench -p hostcb-cpu-bench --bench cpu -- --check        # counts, checked against bench/cpu/budgets.txt
//! ```
//!
//! # How it measures
//!
//! Every path is one `extern "C" fn hostcb_one_<path>() -> i32` that makes exactly one call of
//! that path (`paths.rs`, `stub/cref.c`); the measuring loop calls it through a function pointer
//! and checks the code it returns. Each measuring process is a child of this one with the stub
//! folder first on `LD_LIBRARY_PATH` (and the loaders' own variables removed), so ours, C and
//! cudarc all find the stubs the way they find a real driver. After every run of a path the
//! child checks the stub's counters (host functions called, launches, captured nodes, queries,
//! user objects made and destroyed) and the host functions' own counts against the calls it made;
//! a wrong count discards the run with an error.
//!
//! - Time: `--rounds` rounds (default 15); each round runs every path `--n` times (default
//!   100 000) in table order, starting one path later each round; a path's figure is the median
//!   of its rounds' ns per call (min and max beside it). Pin the process to one idle core
//!   (`taskset -c N cargo bench ...`) for steadier figures.
//! - Instructions: the child runs under `valgrind --tool=callgrind --collect-atstart=no
//!   --toggle-collect=hostcb_one_*`, so only instructions executed inside the `hostcb_one_*`
//!   functions (the call itself, the stub, the host function, everything they call) are counted;
//!   after `--count-n` calls of a path (default 2 000) the client request
//!   `CALLGRIND_DUMP_STATS_AT(<path>)` writes them out and zeroes the counters. Instructions per
//!   call = the dump's total / the number of calls. The loop outside the path is not counted,
//!   so no baseline is subtracted; the `empty` path shows what the call and return of a
//!   `hostcb_one_*` function cost (they are in every figure).
//! - `HOSTCB_CPU_BENCH_ONLY=<path>,<path>` times only those paths (the others show `NaN`), to
//!   look at one pair without the others' effect on the allocator and caches.
//! - First call: each `*_first` path runs in a fresh process of its own (`--first-rounds`
//!   processes per path, default 10, interleaved; the median is shown), and once under
//!   callgrind for its count: library search, `dlopen`, resolution and the call.

mod callgrind;
mod paths;
mod stub;

use std::collections::BTreeMap;
use std::path::{Path as FsPath, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use paths::{FIRST, PATHS, Path};

const USAGE: &str = "\
usage: cpu [--time-only | --count | --check [BUDGETS]] [--rounds R] [--n N] [--count-n N] [--first-rounds F]
  (default)       times every path and counts its instructions under callgrind; prints both
  --time-only     times only (no valgrind needed)
  --count         counts instructions only
  --check [FILE]  counts instructions and checks them against FILE (default: bench/cpu/budgets.txt);
                  exit 1 when a budget or a target ratio is broken
  --rounds R      timed rounds (default 15), --n N calls per path per round (default 100000)
  --count-n N     calls per path under callgrind (default 2000)
  --first-rounds F  fresh processes per first-call path for its time (default 10)";

#[derive(Debug, Clone)]
struct Args {
    time: bool,
    count: bool,
    check: Option<PathBuf>,
    rounds: usize,
    n: u64,
    count_n: u64,
    first_rounds: usize,
    child: Option<Vec<String>>,
}

fn parse(args: Vec<String>) -> Result<Args, String> {
    let mut a = Args {
        time: true,
        count: true,
        check: None,
        rounds: 15,
        n: 100_000,
        count_n: 2_000,
        first_rounds: 10,
        child: None,
    };
    let mut it = args.into_iter().peekable();
    let number = |flag: &str, v: Option<String>| -> Result<u64, String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match v.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{flag} {v}: not a positive number\n{USAGE}")),
        }
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bench" => {}
            "--time-only" => a.count = false,
            "--count" => a.time = false,
            "--check" => {
                a.time = false;
                let file = match it.peek() {
                    Some(next) if !next.starts_with('-') => PathBuf::from(it.next().unwrap()),
                    _ => FsPath::new(env!("CARGO_MANIFEST_DIR")).join("budgets.txt"),
                };
                a.check = Some(file);
            }
            "--rounds" => a.rounds = number("--rounds", it.next())? as usize,
            "--n" => a.n = number("--n", it.next())?,
            "--count-n" => a.count_n = number("--count-n", it.next())?,
            "--first-rounds" => a.first_rounds = number("--first-rounds", it.next())? as usize,
            "--child" => a.child = Some(it.by_ref().collect()),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    if !a.time && !a.count {
        return Err(format!(
            "--time-only and --count/--check leave nothing to do\n{USAGE}"
        ));
    }
    Ok(a)
}

fn main() -> ExitCode {
    // Carried to another machine (tools/gpu-bundle --benches), the executable has no stubs:
    // they are built into this checkout's target/. Nothing to measure there.
    if !stub::dir().join("libcuda.so.1").is_file() {
        if std::env::args().any(|a| a == "--check") {
            eprintln!(
                "error: cpu bench: --check needs the stub driver {}, which is missing; rebuild the bench (cargo bench -p hostcb-cpu-bench --bench cpu --no-run)",
                stub::dir().join("libcuda.so.1").display()
            );
            return ExitCode::FAILURE;
        }
        println!(
            "SKIP: cpu bench: the stub driver {} is not on this machine (the bench measures over the stubs its build made; run it with cargo bench where it was built)",
            stub::dir().join("libcuda.so.1").display()
        );
        return ExitCode::SUCCESS;
    }
    let args = match parse(std::env::args().skip(1).collect()) {
        Ok(a) => a,
        Err(e) if e == USAGE => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = match &args.child {
        Some(child) => run_child(child, &args),
        None => run(&args),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: cpu bench: {e}");
            ExitCode::FAILURE
        }
    }
}

// ---- the measuring children -----------------------------------------------------------------

/// A command for a measuring child of this executable: the stubs first on the loader's path,
/// and none of the variables that would send a loader elsewhere.
fn child_command(program: &FsPath, wrapper: &[String]) -> Command {
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(program);
            c
        }
        None => Command::new(program),
    };
    let mut path = stub::dir().into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        path.push(":");
        path.push(old);
    }
    cmd.env("LD_LIBRARY_PATH", path);
    for var in [
        "CUDA_HOSTCB_LIBCUDA",
        "CUDA_HOSTCB_LIBCUDART",
        "CUDA_HOSTCB_LIBCUDART_12",
        "CUDA_HOSTCB_LIBCUDART_13",
        "CUDA_HOSTCB_PER_THREAD_DEFAULT_STREAM",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn run_child(child: &[String], args: &Args) -> Result<bool, String> {
    match child
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["time"] => {
            paths::setup()?;
            for line in time_paths(args.rounds, args.n)? {
                println!("{line}");
            }
            Ok(true)
        }
        ["count"] => {
            paths::setup()?;
            count_paths(args.count_n)?;
            Ok(true)
        }
        ["first", name] => {
            let path = paths::find(name).ok_or_else(|| format!("no path {name}"))?;
            let started = Instant::now();
            // SAFETY: the path's own contract; the first call of the process.
            let code = unsafe { (path.one)() };
            let ns = started.elapsed().as_nanos();
            callgrind::dump(path.name);
            if code != path.expect {
                return Err(format!("{name}: returned {code}, not {}", path.expect));
            }
            // Only now may the bench itself load the stubs.
            stub::check_loaded()?;
            let launched = stub::driver_counts()[stub::Count::LaunchHostFunc as usize];
            if launched != 1 {
                return Err(format!(
                    "{name}: the stub counted {launched} launches, not 1"
                ));
            }
            println!("FIRST {name} {ns}");
            Ok(true)
        }
        other => Err(format!("unknown child mode {other:?}")),
    }
}

/// Runs `n` calls of `path`, checking each code; the stub's counts are checked by the caller.
fn calls(path: &'static Path, n: u64) -> Result<(), String> {
    let one = std::hint::black_box(path.one);
    for _ in 0..n {
        // SAFETY: the path's own contract, set up by paths::setup.
        let code = unsafe { one() };
        if code != path.expect {
            return Err(format!(
                "{}: a call returned {code}, not {}",
                path.name, path.expect
            ));
        }
    }
    Ok(())
}

/// The timed rounds, interleaved; one `TIME <path> <median> <min> <max>` line per path.
fn time_paths(rounds: usize, n: u64) -> Result<Vec<String>, String> {
    let mut ns: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); PATHS.len()];
    // One untimed warm-up round.
    for path in PATHS {
        let run = paths::begin(path, 1000)?;
        calls(path, 1000)?;
        paths::end(run)?;
    }
    let only = std::env::var("HOSTCB_CPU_BENCH_ONLY").unwrap_or_default();
    for round in 0..rounds {
        for k in 0..PATHS.len() {
            let i = (k + round) % PATHS.len();
            let path = &PATHS[i];
            if !only.is_empty() && !only.split(',').any(|o| o == path.name) {
                ns[i].push(f64::NAN);
                continue;
            }
            let run = paths::begin(path, n)?;
            let started = Instant::now();
            calls(path, n)?;
            let elapsed = started.elapsed();
            paths::end(run)?;
            ns[i].push(elapsed.as_nanos() as f64 / n as f64);
        }
    }
    Ok(PATHS
        .iter()
        .zip(ns)
        .map(|(path, mut v)| {
            v.sort_by(f64::total_cmp);
            format!(
                "TIME {} {:.2} {:.2} {:.2}",
                path.name,
                v[v.len() / 2],
                v[0],
                v[v.len() - 1]
            )
        })
        .collect())
}

/// Under callgrind: `n` calls of every path, each followed by a dump named after it.
fn count_paths(n: u64) -> Result<(), String> {
    if !callgrind::on_valgrind() {
        return Err("the count child is not running under valgrind".to_owned());
    }
    // Warm every path once (resolution, first allocations), uncounted: the dump after it is
    // discarded.
    for path in PATHS {
        let run = paths::begin(path, 1)?;
        calls(path, 1)?;
        callgrind::dump("warm-up");
        paths::end(run)?;
    }
    for path in PATHS {
        let run = paths::begin(path, n)?;
        calls(path, n)?;
        callgrind::dump(path.name);
        paths::end(run)?;
    }
    Ok(())
}

// ---- the parent -----------------------------------------------------------------------------

/// Measured figures per path.
#[derive(Debug, Default, Clone)]
struct Figures {
    ns: Option<(f64, f64, f64)>,
    instructions: Option<f64>,
}

fn run(args: &Args) -> Result<bool, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let mut figures: BTreeMap<&'static str, Figures> = BTreeMap::new();
    if args.count {
        let counted = callgrind::count(&me, args.count_n, FIRST)?;
        for (name, per_call) in counted {
            let path = paths::find(&name)
                .ok_or_else(|| format!("callgrind dumped an unknown path {name}"))?;
            figures.entry(path.name).or_default().instructions = Some(per_call);
        }
    }
    if args.time {
        eprintln!(
            "cpu bench: timing {} paths, {} rounds of {} calls each ...",
            PATHS.len(),
            args.rounds,
            args.n
        );
        let out = child_command(&me, &[])
            .args([
                "--rounds",
                &args.rounds.to_string(),
                "--n",
                &args.n.to_string(),
            ])
            .args(["--child", "time"])
            .output()
            .map_err(|e| format!("cannot run the timing child: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "the timing child failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let ["TIME", name, med, min, max] = f.as_slice() {
                let path = paths::find(name).ok_or_else(|| format!("unknown path {name}"))?;
                let p = |s: &str| {
                    s.parse::<f64>()
                        .map_err(|_| format!("bad figure in {line:?}"))
                };
                figures.entry(path.name).or_default().ns = Some((p(med)?, p(min)?, p(max)?));
            }
        }
        let mut first: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for _ in 0..args.first_rounds {
            for path in FIRST {
                let out = child_command(&me, &[])
                    .args(["--child", "first", path.name])
                    .output()
                    .map_err(|e| format!("cannot run the first-call child: {e}"))?;
                let text = String::from_utf8_lossy(&out.stdout);
                let ns = text
                    .lines()
                    .find_map(|l| l.strip_prefix(&format!("FIRST {} ", path.name)))
                    .and_then(|v| v.trim().parse::<f64>().ok());
                match ns {
                    Some(ns) if out.status.success() => {
                        first.entry(path.name).or_default().push(ns)
                    }
                    _ => {
                        return Err(format!(
                            "the first-call child of {} failed ({}): {}",
                            path.name,
                            out.status,
                            String::from_utf8_lossy(&out.stderr).trim()
                        ));
                    }
                }
            }
        }
        for (name, mut v) in first {
            v.sort_by(f64::total_cmp);
            let path = paths::find(name).expect("a first-call path");
            figures.entry(path.name).or_default().ns = Some((v[v.len() / 2], v[0], v[v.len() - 1]));
        }
    }
    print!("{}", table(&figures));
    if args.check.is_none() {
        let targets = budgets::targets();
        print!(
            "{}",
            budgets::report_targets(&targets, &figures_map(&figures))
        );
    }
    match &args.check {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read the budgets {}: {e}", file.display()))?;
            let budgets = budgets::parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            let counts: BTreeMap<String, f64> = figures
                .iter()
                .filter_map(|(k, f)| f.instructions.map(|i| (k.to_string(), i)))
                .collect();
            let (report, ok) = budgets::check(&budgets, &counts);
            print!("{report}");
            Ok(ok)
        }
        None => Ok(true),
    }
}

mod budgets;

/// (ns median, instructions) per path, for the target report.
fn figures_map(
    figures: &BTreeMap<&'static str, Figures>,
) -> BTreeMap<String, (Option<f64>, Option<f64>)> {
    figures
        .iter()
        .map(|(k, f)| (k.to_string(), (f.ns.map(|n| n.0), f.instructions)))
        .collect()
}

fn table(figures: &BTreeMap<&'static str, Figures>) -> String {
    let mut out = String::new();
    out.push_str("\nCPU cost per call over the stub driver (ns: median (min-max) of the rounds; instructions: callgrind, exact)\n\n");
    out.push_str("| path | what | ns per call | instructions per call |\n|---|---|---|---|\n");
    for path in PATHS.iter().chain(FIRST) {
        let f = figures.get(path.name).cloned().unwrap_or_default();
        let ns = match f.ns {
            Some((med, min, max)) if path.kind == paths::Kind::First => {
                format!(
                    "{:.1} µs ({:.1}-{:.1})",
                    med / 1000.0,
                    min / 1000.0,
                    max / 1000.0
                )
            }
            Some((med, min, max)) => format!("{med:.2} ({min:.2}-{max:.2})"),
            None => "-".to_owned(),
        };
        let instr = f.instructions.map_or("-".to_owned(), |i| format!("{i:.1}"));
        out.push_str(&format!(
            "| `{}` | {} | {ns} | {instr} |\n",
            path.name, path.what
        ));
    }
    out
}
