//! Handles dropped inside a callback right before the program drops its last context handle:
//! every destruction must run before the context's release (`safe/src/protocol/deferral.rs`).
//!
//! Each trial runs this executable again as a child (`HOSTCB_TEARDOWN_CHILD=<kind>`), which
//! repeats a round [`ROUNDS`] times (`HOSTCB_TEARDOWN_ROUNDS` to change it) and prints one
//! `OBSERVED` line; the trial checks the child's exit and that line. A round, with no `unsafe`:
//!
//! 1. retain the primary context, make a stream `s` and the victim: a second stream, a graph
//!    with a host node, an executable of such a graph launched on `s`, or a completion of a
//!    second stream's work;
//! 2. launch on `s` a closure that drops the victim, drop `s`, spin until the closure has run;
//! 3. drop the context, the last handle: the victim's destruction (queued by the callback)
//!    must not run after the release;
//! 4. retain the primary context again, run one closure on each of 64 new streams, synchronise
//!    them, check that each ran, drop it all.
//!
//! Before the fix the release ran first and the queued destruction after it, on a destroyed
//! context: a segfault within a few dozen rounds on an H100. Under compute-sanitizer, run the
//! child alone with API errors reported:
//!
//! ```text
//! HOSTCB_TEARDOWN_CHILD=stream HOSTCB_TEARDOWN_ROUNDS=20 \
//!   compute-sanitizer --tool memcheck --report-api-errors all target/debug/deps/safe-<hash>
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use cuda_hostcb_safe as safe;
use hostcb_gate::expect_eq;
use hostcb_gate::trials::{Failed, Outcome, Watchdog, done, run_child};

/// The variable that makes this executable a teardown child, and names its victim.
pub const CHILD_ENV: &str = "HOSTCB_TEARDOWN_CHILD";
/// The variable that sets the rounds of a child.
const ROUNDS_ENV: &str = "HOSTCB_TEARDOWN_ROUNDS";
/// Rounds per child: about 0.3 s each on an H100 (two primary contexts made and destroyed).
const ROUNDS: usize = 100;
/// Streams of the fresh context of each round, one closure each.
const FRESH_STREAMS: usize = 64;
/// How long a child may run before its watchdog ends it, and the parent waits.
const CHILD_LIMIT: Duration = Duration::from_secs(240);
const PARENT_LIMIT: Duration = Duration::from_secs(300);

/// What the callback drops.
#[derive(Clone, Copy, Debug)]
pub enum Victim {
    Stream,
    Graph,
    GraphExec,
    Completion,
}

impl Victim {
    pub const ALL: [Victim; 4] = [
        Victim::Stream,
        Victim::Graph,
        Victim::GraphExec,
        Victim::Completion,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Victim::Stream => "stream",
            Victim::Graph => "graph",
            Victim::GraphExec => "exec",
            Victim::Completion => "completion",
        }
    }

    /// The victim, made in `ctx` (an executable is launched on `s` first, so it is in flight).
    fn make(self, ctx: &safe::Context, s: &safe::Stream) -> Result<Box<dyn Send>, Failed> {
        Ok(match self {
            Victim::Stream => Box::new(safe::Stream::new(ctx)?),
            Victim::Graph => {
                let graph = safe::Graph::new(ctx)?;
                graph.add_host_node(&[], || {})?;
                Box::new(graph)
            }
            Victim::GraphExec => {
                let graph = safe::Graph::new(ctx)?;
                graph.add_host_node(&[], || {})?;
                let exec = graph.instantiate()?;
                exec.launch(s)?;
                Box::new(exec)
            }
            Victim::Completion => {
                let other = safe::Stream::new(ctx)?;
                Box::new(other.completion()?)
            }
        })
    }
}

// ---- the parent ---------------------------------------------------------------------------

/// The trial of one victim: its child must exit successfully after every round.
pub fn trial(victim: Victim) -> Outcome {
    let run = run_child(&[(CHILD_ENV, Some(victim.name()))], PARENT_LIMIT)?;
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    let Some(status) = run.status else {
        return Err(format!(
            "the child hung past {PARENT_LIMIT:?} and was killed:\n{stdout}{stderr}"
        )
        .into());
    };
    let line = stdout.lines().find_map(|l| l.strip_prefix("OBSERVED "));
    let seen = run.observed().unwrap_or_default();
    let get = |key: &str| seen.get(key).copied().unwrap_or("(missing)").to_owned();
    let rounds = rounds();
    expect_eq(
        &format!(
            "{}: the child's exit ({status}; after {} rounds; its stderr ends:\n{})",
            victim.name(),
            get("rounds"),
            tail.join("\n")
        ),
        true,
        status.success(),
    )?;
    expect_eq("rounds", rounds.to_string(), get("rounds"))?;
    expect_eq(
        "fresh closures called",
        (rounds * FRESH_STREAMS).to_string(),
        get("fresh_calls"),
    )?;
    println!("{}: {}", victim.name(), line.unwrap_or(""));
    done()
}

fn rounds() -> usize {
    std::env::var(ROUNDS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS)
}

// ---- the child ----------------------------------------------------------------------------

/// Runs the rounds for the victim named `kind`, prints the `OBSERVED` line, and exits.
pub fn child(kind: &str) -> ! {
    let watchdog = Watchdog::arm(format!("the teardown child ({kind})"), CHILD_LIMIT);
    let Some(victim) = Victim::ALL.into_iter().find(|v| v.name() == kind) else {
        eprintln!("{CHILD_ENV}={kind}: not a victim (stream, graph, exec or completion)");
        std::process::exit(2);
    };
    let (rounds, start) = (rounds(), Instant::now());
    let fresh_calls = Arc::new(AtomicUsize::new(0));
    let mut done_rounds = 0;
    let mut result = Ok(());
    while done_rounds < rounds && result.is_ok() {
        result = round(victim, &fresh_calls);
        if result.is_ok() {
            done_rounds += 1;
        }
    }
    drop(watchdog);
    println!(
        "OBSERVED rounds={done_rounds};fresh_calls={};ms_per_round={:.1}",
        fresh_calls.load(SeqCst),
        start.elapsed().as_secs_f64() * 1e3 / done_rounds.max(1) as f64
    );
    match result {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("round {}: {e:?}", done_rounds + 1);
            std::process::exit(2)
        }
    }
}

fn round(victim: Victim, fresh_calls: &Arc<AtomicUsize>) -> Result<(), Failed> {
    let ctx = safe::Context::primary(0)?;
    ctx.make_current()?;
    let s = safe::Stream::new(&ctx)?;
    let mut keep = Some(victim.make(&ctx, &s)?);
    let ran = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&ran);
    s.launch(move || {
        drop(keep.take());
        r.store(true, SeqCst);
    })?;
    drop(s);
    while !ran.load(SeqCst) {
        std::hint::spin_loop();
    }
    drop(ctx);

    let ctx = safe::Context::primary(0)?;
    ctx.make_current()?;
    let streams = (0..FRESH_STREAMS)
        .map(|_| safe::Stream::new(&ctx))
        .collect::<Result<Vec<_>, _>>()?;
    for stream in &streams {
        let calls = Arc::clone(fresh_calls);
        stream.launch(move || {
            calls.fetch_add(1, SeqCst);
        })?;
    }
    for stream in &streams {
        stream.synchronize()?;
    }
    Ok(())
}
