//! Scenario 3: host nodes. `cuGraphAddHostNode` / `cudaGraphAddHostNode`, the parameters read
//! back, `...GraphHostNodeSetParams` on the graph and `...GraphExecHostNodeSetParams` on an
//! executable graph: after each update the next launch calls the new function with the new
//! data, and the old one is no longer called.

use std::ffi::c_void;
use std::sync::Mutex;

use super::{label, lock, user_data};
use crate::binding::{Binding, HostFn, RawNode};
use crate::check::{Checker, During, Failure, Mismatches, Ran, wrong_expectations};
use crate::resources::{Context, Exec, Graph, Stream};

/// The calls of the three host functions: (function name, user data address).
#[derive(Debug, Default)]
pub struct Calls {
    log: Mutex<Vec<(&'static str, usize)>>,
}

/// The user data of a host node: which log to record in.
#[derive(Debug)]
pub struct Slot<'a> {
    calls: &'a Calls,
}

/// # Safety
/// `data` must point at a live [`Slot`].
unsafe fn note(name: &'static str, data: *mut c_void) {
    // SAFETY: the caller passes a live `Slot`.
    let slot = unsafe { &*data.cast::<Slot<'_>>() };
    lock(&slot.calls.log).push((name, data.addr()));
}

macro_rules! host_fns {
    ($($name:ident),*) => {$(
        /// A host function that records its name and user data.
        ///
        /// # Safety
        /// `data` must point at a live [`Slot`].
        pub unsafe extern "C" fn $name(data: *mut c_void) {
            // SAFETY: forwarded from the caller.
            unsafe { note(stringify!($name), data) }
        }
    )*};
}

host_fns!(host_a, host_b, host_c);

/// One host-node parameter pair, named: (function, user data).
pub type Params = (String, String);
/// The calls of one launch, named: (function, user data).
pub type LaunchCalls = Vec<(String, String)>;

/// What the run saw, named (`host_a`, `slot1`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The parameters read back at each point: (when, params).
    pub params: Vec<(&'static str, Params)>,
    /// The calls of each launch: (which launch, calls).
    pub launches: Vec<(&'static str, LaunchCalls)>,
}

/// When the parameters are read back.
pub const READS: [&str; 3] = [
    "after cuGraphAddHostNode",
    "after the graph's node was set",
    "after the executable's node was set",
];

/// The launches, in order.
pub const LAUNCHES: [&str; 5] = [
    "exec1 (instantiated with host_a/slot1)",
    "exec1 after the graph's node was set to host_b/slot2",
    "exec2 (instantiated after that)",
    "exec1 after its own node was set to host_c/slot3",
    "exec2 after exec1's node was set",
];

fn named(p: (&str, &str)) -> Params {
    (p.0.to_owned(), p.1.to_owned())
}

/// The contract.
pub fn expected() -> Observation {
    let a = ("host_a", "slot1");
    let b = ("host_b", "slot2");
    let c = ("host_c", "slot3");
    Observation {
        params: vec![
            (READS[0], named(a)),
            (READS[1], named(b)),
            // The executable's update leaves the graph's node alone.
            (READS[2], named(b)),
        ],
        launches: vec![
            (LAUNCHES[0], vec![named(a)]),
            // An executable does not see later changes of its graph.
            (LAUNCHES[1], vec![named(a)]),
            (LAUNCHES[2], vec![named(b)]),
            (LAUNCHES[3], vec![named(c)]),
            (LAUNCHES[4], vec![named(b)]),
        ],
    }
}

/// Runs the steps of the module doc, naming functions and user data by what they are.
pub fn observe<B: Binding>() -> Result<Observation, Failure> {
    let _ctx = Context::<B>::enter(0)?;
    let calls = Calls::default();
    let slots = [
        Slot { calls: &calls },
        Slot { calls: &calls },
        Slot { calls: &calls },
    ];
    let fns: [(HostFn, &str); 3] = [(host_a, "host_a"), (host_b, "host_b"), (host_c, "host_c")];
    let mut known: Vec<(usize, &str)> = fns.iter().map(|(f, n)| (*f as usize, *n)).collect();
    known.extend(
        slots
            .iter()
            .zip(["slot1", "slot2", "slot3"])
            .map(|(s, n)| (user_data(s).addr(), n)),
    );
    let name = |address: usize| label(address, &known);
    let read = |node: RawNode| -> Result<Params, Failure> {
        // SAFETY: `node` is a live host node of `graph`.
        let (f, data) = unsafe { B::host_node_params(node) }.during("read the host node back")?;
        Ok((name(f.map_or(0, |f| f as usize)), name(data.addr())))
    };
    let stream = Stream::<B>::new()?;
    let launch = |exec: &Exec<B>| -> Result<LaunchCalls, Failure> {
        exec.launch(&stream)?;
        stream.sync()?;
        let mut log = lock(&calls.log);
        Ok(log
            .drain(..)
            .map(|(f, d)| (f.to_owned(), name(d)))
            .collect())
    };
    let mut seen = Observation {
        params: Vec::new(),
        launches: Vec::new(),
    };

    let graph = Graph::<B>::new()?;
    // SAFETY (all host-node calls below): the slots and the log outlive the stream, whose
    // drop waits for every launch, and the graph and executables are dropped before them.
    let node = unsafe { graph.add_host_node(host_a, user_data(&slots[0])) }?;
    seen.params.push((READS[0], read(node)?));
    let exec1 = graph.instantiate()?;
    seen.launches.push((LAUNCHES[0], launch(&exec1)?));

    // SAFETY: as above.
    unsafe { B::set_host_node_params(node, host_b, user_data(&slots[1])) }
        .during("set the graph's host node parameters")?;
    seen.params.push((READS[1], read(node)?));
    seen.launches.push((LAUNCHES[1], launch(&exec1)?));
    let exec2 = graph.instantiate()?;
    seen.launches.push((LAUNCHES[2], launch(&exec2)?));

    // SAFETY: as above.
    unsafe { exec1.set_host_node_params(node, host_c, user_data(&slots[2])) }?;
    seen.params.push((READS[2], read(node)?));
    seen.launches.push((LAUNCHES[3], launch(&exec1)?));
    seen.launches.push((LAUNCHES[4], launch(&exec2)?));
    Ok(seen)
}

/// Scenario 3's check: every read-back and every launch's calls, exactly.
pub fn check(expected: &Observation, seen: &Observation) -> Result<(), Mismatches> {
    let mut c = Checker::new();
    c.eq("parameter reads", expected.params.len(), seen.params.len());
    for ((when, want), (_, got)) in expected.params.iter().zip(&seen.params) {
        c.eq(format!("host node parameters {when}"), want, got);
    }
    c.eq("launches", expected.launches.len(), seen.launches.len());
    for ((which, want), (_, got)) in expected.launches.iter().zip(&seen.launches) {
        c.eq(format!("host functions called by {which}"), want, got);
    }
    c.finish()
}

/// The trial.
pub fn run<B: Binding>() -> Result<Ran, Failure> {
    let seen = observe::<B>()?;
    let mut want = expected();
    if wrong_expectations() {
        // As if the old function were still called after the executable's update.
        want.launches[3].1 = vec![named(("host_a", "slot1"))];
    }
    check(&want, &seen)?;
    Ok(Ran::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_passes_itself() {
        assert_eq!(check(&expected(), &expected()), Ok(()));
    }

    #[test]
    fn an_old_function_still_called_is_reported() {
        let mut seen = expected();
        seen.launches[3].1 = vec![named(("host_a", "slot1"))];
        assert_eq!(
            check(&expected(), &seen).unwrap_err().to_string(),
            "host functions called by exec1 after its own node was set to host_c/slot3: \
             expected [(\"host_c\", \"slot3\")], seen [(\"host_a\", \"slot1\")]"
        );
    }

    #[test]
    fn a_wrong_read_back_and_a_missing_call_are_reported() {
        let mut seen = expected();
        seen.params[1].1 = named(("host_a", "slot1"));
        seen.launches[2].1.clear();
        let text = check(&expected(), &seen).unwrap_err().to_string();
        assert!(
            text.contains(
                "host node parameters after the graph's node was set: expected (\"host_b\", \
                 \"slot2\"), seen (\"host_a\", \"slot1\")"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "host functions called by exec2 (instantiated after that): expected \
                 [(\"host_b\", \"slot2\")], seen []"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_host_functions_record_their_name_and_data() {
        let calls = Calls::default();
        let slot = Slot { calls: &calls };
        // SAFETY: `slot` is live.
        unsafe { host_b(user_data(&slot)) };
        assert_eq!(
            lock(&calls.log).as_slice(),
            &[("host_b", user_data(&slot).addr())]
        );
    }
}
