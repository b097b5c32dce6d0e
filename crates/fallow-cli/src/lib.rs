//! `fallow`: put a storage device's idle time to work.
//!
//! The command is a library so that two front ends run the same code: the
//! `fallow` binary (`src/bin/fallow.rs`, what `cargo install` builds) and
//! the Python package's `fallow` command, which calls [`main_with_args`]
//! inside the extension module (`crates/fallow-py`, `python/fallow/_cli.py`).
//!
//! One file per subcommand ([`analyze`], [`compare`], [`convert`], [`demo`],
//! [`pareto`], [`policies`], [`recommend`], [`run`], [`simulate`], [`tune`]); shared
//! pieces are the flags and their value parsers ([`args`]), trace input
//! ([`input`]) and the prepared input of the trace-driven commands
//! ([`prepare`]), the terminal summary ([`output`]) and tables ([`table`]),
//! the headline findings ([`findings`]), atomic file writes ([`atomic`]),
//! exit codes ([`error`]) and the HTML report with its own SVG plotting
//! ([`report`]), which takes plain data. No module imports one above it
//! (`crates/fallow-core/tests/layers.rs`).
//! The live commands ([`scrub`], [`run`]) only parse flags and print: their
//! settings (one type, one precedence) and sessions are fallow-live's
//! (`fallow_live::settings`, `ScrubSession`, `NativeSession`); what both
//! scrubs print alike is [`scrub_out`].
//!
//! Errors are `anyhow` here and only here. The exit code says whose fault a
//! failure was ([`error`]): 2 for bad input or usage (a malformed trace, an
//! unknown format, a device that is not in the trace, a bad flag value), 1
//! for anything else (a report that cannot be written, an I/O failure).

mod analyze;
mod analyze_fleet;
mod args;
mod atomic;
mod compare;
mod completions;
mod convert;
mod demo;
mod emulate_disk;
mod energy;
mod energy_table;
mod error;
mod human;
mod input;
mod invocation;
mod man;
mod metrics_export;
mod native_scrub;
mod output;
mod pareto;
mod peer;
mod policies;
mod prepare;
mod progress;
mod recommend;
mod record;
mod reproduce;
mod retune;
mod run;
mod scrub;
mod scrub_out;
mod scrub_plan;
mod simulate;
mod spindown;
mod table;
mod tune;

use clap::{ColorChoice, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;

pub use error::BadInput;
pub(crate) use error::{exit_code_of, message};
pub use invocation::Relaunch;

const EXAMPLES: &str = "\
Examples:
  fallow demo
      analyse a built-in bursty workload; writes ./fallow-demo/report.html
  fallow analyze disk0.csv.gz --html report.html
      summary of an MSR Cambridge / SNIA trace, plus an HTML report with plots
  fallow analyze ajw.1week.srt --device 1 --json
      one device of an HP SRT trace, as JSON
  fallow analyze cut.trace --format plain --time-unit ms --service disk
      a trace without completion times, served by a simple disk model
  fallow convert disk0.csv.gz -o disk0.fbt
      cache a trace in fallow's binary format, which loads much faster
  fallow simulate ajw.1week.srt --device 0 --policy fixed-wait:t=1s --bg exp:10ms
      what waiting 1 s before background work costs the foreground, and what it gets done
  fallow simulate --workload poisson --utilization 0.3 --service exp:10ms --policy aggressive --json
      the same on a synthetic M/M/1 workload at 30 % utilisation
  fallow compare ajw.1week.srt --device 0 --html compare.html
      every policy side by side, with plots
  fallow tune ajw.1week.srt --device 0 --policy waiting --budget 1ms,2ms,4ms --bg size
      the wait threshold and request size with the most BG throughput per FG budget
  fallow recommend ajw.1week.srt --device 0 --budget 2ms --bg size
      every policy tuned for the budget and ranked by BG throughput, with reasons
  fallow pareto ajw.1week.srt --device 0 --bg size --bg-size 1MiB --html pareto.html
      each policy's throughput/delay trade-off over its whole knob range
  fallow policies
      the policies and their parameters
  fallow energy ajw.1week.srt --device 0 --html energy.html
      spin-down policies with peers serving 85-99 % of requests while the disk sleeps (SARD)
  fallow scrub /dev/sdb --resume --tuned tune.json --max-rate 64MiB/s
      verify a disk read-only in its idle time with the tuned policy, continuing the last checkpoint
  fallow emulate-disk disk.img /mnt/emu --rpm 7200 --stat-file /run/emu.stat
      serve disk.img as /mnt/emu/disk with HDD service times (then: losetup -f --show /mnt/emu/disk)
  fallow record /dev/loop0 --duration 60s -o trace.csv
      record a block trace from kernel tracepoints; then: fallow analyze trace.csv
  fallow peer mount --source /usr/bin --mountpoint /mnt/bin --peers 10.0.0.2:7946
      SARD for real: read /usr/bin from peers' memory while the local disk sleeps
  fallow run --device sda -- rsync -a /data/ /backup/data/
      a backup that runs only while sda is idle, frozen the rest of the time
  fallow completions bash > /etc/bash_completion.d/fallow
      shell completions (bash, zsh, fish, elvish, powershell)
  fallow man --dir /usr/local/share/man/man1
      the manual pages: fallow(1) and one per subcommand (fallow man alone prints fallow(1))

Exit status: 0 on success, 2 for bad input or usage, 1 for other failures.";

/// Put a storage device's idle time to work: characterise idleness in block
/// traces, and plan background work (scrubbing, backups, spin-down) around it.
#[derive(Debug, Parser)]
#[command(name = "fallow", version, after_help = EXAMPLES, max_term_width = 100)]
struct Cli {
    /// Colour and bold in terminal output and help: auto (on a terminal without NO_COLOR), always, never.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    color: ColorChoice,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Characterise a trace's idle intervals and busy periods (summary, JSON, HTML report).
    Analyze(analyze::AnalyzeArgs),
    /// Run several BG policies on one trace or workload and compare them (table, JSON, HTML).
    Compare(compare::CompareArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Convert a trace to another format, chosen by the output's extension (fallow's binary format loads much faster).
    Convert(convert::ConvertArgs),
    /// Run `analyze` on a built-in synthetic bursty workload and write its HTML report.
    Demo(demo::DemoArgs),
    /// Disk spin-down and SARD (peers serve reads while the disk sleeps): energy, spin-ups, delay.
    Energy(energy::EnergyArgs),
    /// Serve an image file as an emulated HDD over FUSE (seek + rotation latency, injected errors).
    EmulateDisk(emulate_disk::EmulateDiskArgs),
    /// SARD for real: serve application files from peers' memory while the disk sleeps.
    Peer(peer::PeerArgs),
    /// Print the fallow(1) manual page, or write every page into a directory (--dir).
    Man(man::ManArgs),
    /// Sweep each policy's knob: its Pareto front of BG throughput against added FG delay.
    Pareto(pareto::ParetoArgs),
    /// Tune every policy for one FG budget and rank them by BG throughput, with reasons.
    Recommend(recommend::RecommendArgs),
    /// List the BG scheduling policies and their parameters.
    Policies(policies::PoliciesArgs),
    /// Verify a block device or file read-only in the idle time a policy picks (checkpointed).
    Scrub(scrub::ScrubArgs),
    /// FITRIM a mounted file system's free space in idle time, one range per BG request (= `fallow scrub fstrim:MOUNT`).
    Trim(scrub::ScrubArgs),
    /// Mean latent error time of sequential and staggered scrub orders under LSE bursts.
    ScrubPlan(scrub_plan::ScrubPlanArgs),
    /// Record a block trace of a device from kernel tracepoints, as CSV `fallow analyze` reads.
    Record(record::RecordArgs),
    /// Run a maintenance command only in a device's idle time, frozen the rest of the time.
    Run(run::RunArgs),
    /// (internal) Thaw `fallow run`'s command if fallow dies.
    #[command(name = "__guardian", hide = true)]
    Guardian(run::GuardianArgs),
    /// Simulate one BG policy on a trace or a synthetic workload: FG slowdown and BG work done.
    Simulate(simulate::SimulateArgs),
    /// Spin disks down by `fallow energy`'s policies, within a spin-up budget; log what wakes them.
    Spindown(spindown::SpindownArgs),
    /// Find the policy setting and request size with the most BG throughput within an FG budget.
    Tune(tune::TuneArgs),
}

/// The clap definition of the whole command line (tests walk it: every
/// flag under [`OUTPUT_FILES`] is an output file).
pub fn cli_command() -> clap::Command {
    Cli::command()
}

pub use atomic::OUTPUT_FILES;

/// Run the `fallow` command line `argv` (program name first) and return its
/// exit status: what the `fallow` binary and the Python package's `fallow`
/// command both do. `relaunch` says how to start fallow again (the
/// guardian, `emulate-disk`'s detached child); `None` means this executable.
pub fn main_with_args(
    argv: impl IntoIterator<Item = impl Into<OsString>>,
    relaunch: Option<Relaunch>,
) -> u8 {
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    invocation::set(relaunch, argv.iter().skip(1).cloned().collect());
    // --color also styles clap's own help and errors, which are written
    // before the parsed value exists: read it first
    let color = color_flag(&argv);
    output::set_color(color);
    let matches = Cli::command().color(color).try_get_matches_from(&argv);
    let cli = match matches.and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => {
            // help and --version are errors to clap, written to stdout, status 0
            let _ = e.print();
            return e.exit_code().clamp(0, 255) as u8;
        }
    };
    let result = match cli.command {
        Command::Analyze(args) => analyze::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Energy(args) => energy::run(args),
        Command::EmulateDisk(args) => emulate_disk::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Man(args) => man::run(args),
        Command::Pareto(args) => pareto::run(args),
        Command::Peer(args) => peer::run(args),
        Command::Policies(args) => policies::run(args),
        Command::Recommend(args) => recommend::run(args),
        Command::Scrub(args) => scrub::run(args),
        Command::Trim(mut args) => {
            args.target = format!("fstrim:{}", args.target.display()).into();
            scrub::run(args)
        }
        Command::ScrubPlan(args) => scrub_plan::run(args),
        Command::Record(args) => record::run(args),
        Command::Run(args) => return run::main(args),
        Command::Guardian(args) => run::guardian(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Spindown(args) => spindown::run(args),
        Command::Tune(args) => tune::run(args),
    };
    let code = match result {
        Ok(()) => 0,
        Err(err) if output::is_broken_pipe(&err) => 0,
        Err(err) => {
            eprintln!("fallow: error: {}", message(&err));
            exit_code_of(&err)
        }
    };
    // inside the Python extension no Rust runtime flushes stdout at exit
    let _ = std::io::Write::flush(&mut std::io::stdout());
    code
}

/// The last `--color WHEN` / `--color=WHEN` before a `--` (clap's rule for
/// a repeated flag: the last wins); `auto` when absent or not a valid
/// value, which clap then reports itself.
fn color_flag(argv: &[OsString]) -> ColorChoice {
    let mut choice = ColorChoice::Auto;
    let mut words = argv.iter().skip(1).map(|a| a.to_str());
    while let Some(w) = words.next() {
        let value = match w {
            Some("--") => break,
            Some("--color") => words.next().flatten(),
            Some(w) => w.strip_prefix("--color="),
            None => None,
        };
        if let Some(c) =
            value.and_then(|v| <ColorChoice as clap::ValueEnum>::from_str(v, false).ok())
        {
            choice = c;
        }
    }
    choice
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_color_flag_is_read_before_parsing_and_the_last_one_wins() {
        let argv = |s: &str| -> Vec<OsString> { s.split(' ').map(OsString::from).collect() };
        assert_eq!(color_flag(&argv("fallow analyze x")), ColorChoice::Auto);
        assert_eq!(
            color_flag(&argv("fallow --color never analyze x")),
            ColorChoice::Never
        );
        assert_eq!(
            color_flag(&argv("fallow analyze --color=always x --color never")),
            ColorChoice::Never
        );
        assert_eq!(
            color_flag(&argv("fallow --color=always run -- cmd --color never")),
            ColorChoice::Always
        );
        assert_eq!(
            color_flag(&argv("fallow --color=sometimes")),
            ColorChoice::Auto
        );
    }
}
