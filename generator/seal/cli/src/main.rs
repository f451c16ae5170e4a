//! `hostcb-seal verify [--staged] [PATH...]`: checks the seals of generated files, with the
//! messages and exit codes of `cargo xtask verify`, in any repository and without headers or
//! libclang. `--staged` checks git's index (what the next commit will contain): the mode for a
//! pre-commit hook.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Arg, ArgAction, Command, value_parser};
use hostcb_seal::{ALLOW_DELETIONS_ENV, Source, VerifyOptions, VerifyRoot};

/// The command line. clap's builder rather than its derive macros, so that installing this
/// command builds no proc-macro stack (syn).
fn cli() -> Command {
    // Leaked once: clap keeps `&'static str` defaults, and this one is the library's.
    let default_regen: &'static str = VerifyOptions::default().regen_command.leak();
    Command::new("hostcb-seal")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Verify sealed generated files")
        .after_help(
            "Exit status: 0 when every seal checks, 1 when a file fails or verification cannot \
             run (an `error:` line says why), 2 on a usage error.",
        )
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(
            Command::new("verify")
                .about(
                    "Check the seal of every file that carries one (default: the current \
                     directory), and that no file sealed in git's HEAD lost its seal or went \
                     missing",
                )
                .arg(
                    Arg::new("paths")
                        .value_name("PATHS")
                        .num_args(0..)
                        .value_parser(value_parser!(PathBuf))
                        .help(
                            "Files or folders to check; folders are walked, skipping `target` \
                             and hidden folders",
                        ),
                )
                .arg(
                    Arg::new("staged")
                        .long("staged")
                        .action(ArgAction::SetTrue)
                        .help(
                            "Check git's index (what the next commit will contain) instead of \
                             the work tree: the mode for a pre-commit hook. A sealed file of HEAD \
                             that the index lacks fails",
                        ),
                )
                .arg(
                    Arg::new("allow-deletions")
                        .long("allow-deletions")
                        .action(ArgAction::SetTrue)
                        .help(
                            "Accept that a file sealed in HEAD is gone (a deletion that is \
                             meant, such as a dropped target): it is noted, not failed. \
                             HOSTCB_SEAL_ALLOW_DELETIONS=1 does the same (for a hook run by \
                             `git commit`)",
                        ),
                )
                .arg(
                    Arg::new("regen-command")
                        .long("regen-command")
                        .value_name("CMD")
                        .default_value(default_regen)
                        .help(
                            "The command named in each failure as the fix; each `{ctk}` \
                             becomes the file's target",
                        ),
                ),
        )
}

fn main() -> ExitCode {
    let matches = cli().get_matches();
    let Some(("verify", verify)) = matches.subcommand() else {
        unreachable!("clap requires the one subcommand");
    };
    let paths: Vec<PathBuf> = verify
        .get_many::<PathBuf>("paths")
        .map(|paths| paths.cloned().collect())
        .unwrap_or_else(|| vec![PathBuf::from(".")]);
    let roots: Vec<VerifyRoot> = paths.into_iter().map(VerifyRoot::new).collect();
    let options = VerifyOptions {
        regen_command: verify
            .get_one::<String>("regen-command")
            .cloned()
            .unwrap_or_default(),
        source: if verify.get_flag("staged") {
            Source::Index
        } else {
            Source::WorkTree
        },
        allow_deletions: verify.get_flag("allow-deletions")
            || std::env::var_os(ALLOW_DELETIONS_ENV).is_some_and(|value| value == "1"),
        ..VerifyOptions::default()
    };
    match hostcb_seal::run_verify(&roots, &options, &mut std::io::stderr()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_well_formed() {
        super::cli().debug_assert();
    }
}
