//! The host-callback benchmark: B1, B2 and B3 for every generated target and API (and the safe
//! layer), printed as `RESULT` lines and a table. Without a usable GPU it prints `SKIP` and exits
//! 0, or exits 1 when `REQUIRE_GPU=1`. `--help` lists the options.

use std::process::ExitCode;

use hostcb_bench::figures::run_row;
use hostcb_bench::gpu::{self, Gate};
use hostcb_bench::report::{self, Row};
use hostcb_bench::{CHAIN, Sizes, safe};
use hostcb_tests::binding::Binding;

/// A row of the raw bindings: its labels and the monomorphised body that measures it.
struct RawRow {
    target: &'static str,
    api: &'static str,
    run: fn(i32, &Sizes) -> Row,
}

const fn raw<A: Binding>() -> RawRow {
    RawRow {
        target: A::TARGET,
        api: A::API.module(),
        run: run_row::<A>,
    }
}

/// The rows of every target (`cuda_hostcb::for_each_target!`) and API, oldest target first.
fn raw_rows() -> Vec<RawRow> {
    let mut rows = Vec::new();
    macro_rules! target_rows {
        ($target:ident, $version:literal, $major:literal, [$($capability:ident)*]) => {
            rows.push(raw::<hostcb_tests::bindings::$target::Driver>());
            rows.push(raw::<hostcb_tests::bindings::$target::Runtime>());
        };
    }
    cuda_hostcb::for_each_target!(target_rows);
    rows
}

fn main() -> ExitCode {
    let args = match gpu::parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if args.help {
        println!("{}", gpu::USAGE);
        return ExitCode::SUCCESS;
    }
    for arg in &args.ignored {
        eprintln!("note: ignoring unknown option {arg}");
    }
    let device = match gpu::gate(gpu::probe(args.device), gpu::require_gpu()) {
        Gate::Run(device) => device,
        Gate::Skip(reason) => {
            println!(
                "SKIP: hostcb bench, all figures: {reason} (REQUIRE_GPU=1 makes this an error)"
            );
            return ExitCode::SUCCESS;
        }
        Gate::Fail(reason) => {
            eprintln!("error: hostcb bench: REQUIRE_GPU=1 but no GPU is usable: {reason}");
            return ExitCode::FAILURE;
        }
    };
    let sizes = args.sizes;
    println!(
        "hostcb bench: device {} of {}: {}, driver {}; B1 {} host functions, B2 {} launches, B3 {} launches x {CHAIN} nodes; median of {} reps after 1 warm-up",
        device.ordinal,
        device.count,
        device.name,
        device.driver_version,
        sizes.n,
        sizes.b2_launches(),
        sizes.b3_launches(),
        sizes.reps
    );

    let mut rows = Vec::new();
    for row in raw_rows().iter().filter(|r| args.selects(r.target, r.api)) {
        eprintln!("measuring {} {} ...", row.target, row.api);
        let measured = (row.run)(device.ordinal, &sizes);
        print!("{}", measured.result_lines());
        rows.push(measured);
    }
    for row in safe::rows(device.ordinal, &sizes, &|t, a| args.selects(t, a)) {
        print!("{}", row.result_lines());
        rows.push(row);
    }

    println!(
        "\nhost-callback cost in microseconds: median (min-max) of {} reps",
        sizes.reps
    );
    print!("{}", report::table(&rows));
    let failed = rows.iter().filter(|r| r.failed()).count();
    println!(
        "hostcb bench: {} rows measured, {failed} with errors",
        rows.len()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
