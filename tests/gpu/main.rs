//! The crate's GPU tests, one executable: every scenario on every target × API, and every
//! target's entry points in both default-stream modes (see the `hostcb-tests` crate). Without a
//! usable GPU each trial is skipped with its reason, or fails with `REQUIRE_GPU=1`.

fn main() -> std::process::ExitCode {
    hostcb_tests::harness::main()
}
