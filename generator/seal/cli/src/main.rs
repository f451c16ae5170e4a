//! `hostcb-seal verify [--staged] [PATH...]`: checks the seals of generated files, with the
//! messages and exit codes of `cargo xtask verify`, in any repository and without headers or
//! libclang. `--staged` checks git's index (what the next commit will contain): the mode for a
//! pre-commit hook.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hostcb_seal::{ALLOW_DELETIONS_ENV, Source, VerifyOptions, VerifyRoot};

#[derive(Parser)]
#[command(
    name = "hostcb-seal",
    version,
    about = "Verify sealed generated files",
    after_help = "Exit status: 0 when every seal checks, 1 when a file fails or verification \
                  cannot run (an `error:` line says why), 2 on a usage error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check the seal of every file that carries one (default: the current directory), and that
    /// no file sealed in git's HEAD lost its seal or went missing.
    Verify {
        /// Files or folders to check; folders are walked, skipping `target` and hidden folders.
        paths: Vec<PathBuf>,
        /// Check git's index (what the next commit will contain) instead of the work tree: the
        /// mode for a pre-commit hook. A sealed file of HEAD that the index lacks fails.
        #[arg(long)]
        staged: bool,
        /// Accept that a file sealed in HEAD is gone (a deletion that is meant, such as a
        /// dropped target): it is noted, not failed. HOSTCB_SEAL_ALLOW_DELETIONS=1 does the same
        /// (for a hook run by `git commit`).
        #[arg(long)]
        allow_deletions: bool,
        /// The command named in each failure as the fix; each `{ctk}` becomes the file's target.
        #[arg(long, value_name = "CMD", default_value_t = VerifyOptions::default().regen_command)]
        regen_command: String,
    },
}

fn main() -> ExitCode {
    let Command::Verify {
        paths,
        staged,
        allow_deletions,
        regen_command,
    } = Cli::parse().command;
    let paths = if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths
    };
    let roots: Vec<VerifyRoot> = paths.into_iter().map(VerifyRoot::new).collect();
    let options = VerifyOptions {
        regen_command,
        source: if staged {
            Source::Index
        } else {
            Source::WorkTree
        },
        allow_deletions: allow_deletions
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
