//! `hostcb-seal verify [PATH...]`: checks the seals of generated files, with the messages and
//! exit codes of `cargo xtask verify`, in any repository and without headers or libclang.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hostcb_seal::{VerifyOptions, VerifyRoot};

#[derive(Parser)]
#[command(name = "hostcb-seal", version, about = "Verify sealed generated files")]
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
        /// The command named in each failure as the fix; each `{ctk}` becomes the file's target.
        #[arg(long, value_name = "CMD", default_value_t = VerifyOptions::default().regen_command)]
        regen_command: String,
    },
}

fn main() -> ExitCode {
    let Command::Verify {
        paths,
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
