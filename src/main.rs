//! The `abcd` binary: parse arguments and hand over to `abcd::cli`.

use clap::Parser;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_none_or(|a| a != "hook") {
        // A reading verb piped into `head` should stop quietly, as Unix
        // tools do. Hooks keep Rust's default (EPIPE is an error they
        // explain on stderr) so that they exit 0 on every path.
        // SAFETY: called before any thread starts; SIG_DFL is always valid.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // `abcd --version` answers without building clap's command tree (half
    // of its start-up: docs/benchmarks.md); the text is clap's own.
    if args.len() == 2 && (args[1] == "--version" || args[1] == "-V") {
        println!("abcd {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    if let Some(cli) = abcd::cli::hook_fast_path(&args) {
        std::process::exit(abcd::cli::main_with(cli));
    }
    let cli = match abcd::cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            // Hooks fail open: a usage error on `abcd hook …` must never
            // block the harness (SubagentStop's exit 2 would block the agent).
            let is_hook = args.get(1).is_some_and(|a| a == "hook");
            if is_hook {
                use clap::error::ErrorKind;
                // Help asked for is help given (stdout, exit 0), as for
                // every other verb: no hook runs on this path.
                if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                    let _ = e.print();
                    std::process::exit(0);
                }
                let msg = e.render().to_string();
                let first = msg
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("unusable arguments")
                    .trim_start_matches("error: ");
                eprintln!("abcd hook: {first}; nothing done (see `abcd hook --help`)");
                std::process::exit(0);
            }
            e.exit();
        }
    };
    std::process::exit(abcd::cli::main_with(cli));
}
