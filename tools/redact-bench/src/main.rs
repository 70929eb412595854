//! `redact-bench`: generate a corpus, measure quality and speed of
//! abcd-redact, score other scanners' reports, and run the `abcd redact`
//! verb body (for the side-by-side script, before the root crate wires it).
//!
//! ```text
//! redact-bench gen DIR [--mb N] [--seed S] [--density D]   corpus.jsonl + truth.jsonl
//! redact-bench quality DIR                                 recall / FP per rule, exit 1 below bar
//! redact-bench gen-varied FILE [--mb N] [--seed S] [--truth T]   the second, varied corpus (see varied.rs); T: its planted values
//! redact-bench speed [--mb N] [--seed S] [--no-newline|--varied|--file F] [--runs N] [--phases]   MB/s of redact_stream, one thread
//! redact-bench keywords [--mb N] [--seed S] [--varied|--file F] [--runs N]   MB/s of the keyword walk alone, line by line
//! redact-bench redact [FILE|-] [--report]                  = abcd redact
//! redact-bench parts FILE… [--runs N]                      MB/s of redact_parts (the capture path), one thread
//! redact-bench score DIR --redacted FILE | --report FILE [--name N]
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use abcd_redact_bench::*;

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("gen") => gen(&args),
        Some("gen-varied") => {
            let Some(file) = args.get(1) else {
                eprintln!("gen-varied: FILE required");
                std::process::exit(3);
            };
            let mb: f64 = arg(&args, "--mb", 16.0);
            let (c, truth) =
                generate_varied_with_truth(arg(&args, "--seed", 7), (mb * 1048576.0) as usize);
            eprintln!(
                "{} bytes, {:.1} % of lines non-ASCII, {} planted values",
                c.len(),
                100.0 * non_ascii_line_share(&c),
                truth.len()
            );
            // `--truth FILE`: the planted values, one JSON line each, as
            // `gen` writes DIR/truth.jsonl (`score` reads them there).
            let truth_file: String = arg(&args, "--truth", String::new());
            let written = std::fs::write(file, &c)
                .map_err(|e| format!("{file}: {e}"))
                .and_then(|()| {
                    if truth_file.is_empty() {
                        return Ok(());
                    }
                    write_truth(Path::new(&truth_file), &truth)
                        .map_err(|e| format!("{truth_file}: {e}"))
                });
            match written {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("gen-varied: {e}");
                    3
                }
            }
        }
        Some("quality") => quality(&args),
        Some("speed") => speed(&args),
        Some("keywords") => keywords(&args),
        Some("score") => score(&args),
        Some("parts") => parts(&args),
        Some("redact") => {
            let file = args
                .get(1)
                .filter(|a| !a.starts_with("--"))
                .map(PathBuf::from);
            let report = args.iter().any(|a| a == "--report");
            let cwd = std::env::current_dir().ok();
            let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
            abcd_redact::run_redact_command(
                file.as_deref(),
                report,
                cwd.as_deref(),
                &mut out,
                &mut err,
            )
        }
        _ => {
            eprintln!("usage: redact-bench gen|quality|speed|score|redact … (see tools/redact-bench/README.md)");
            3
        }
    };
    std::process::exit(code);
}

fn gen(args: &[String]) -> i32 {
    let Some(dir) = args.get(1).map(PathBuf::from) else {
        eprintln!("gen: DIR required");
        return 3;
    };
    let mb: f64 = arg(args, "--mb", 4.0);
    let seed: u64 = arg(args, "--seed", 1);
    let density: f64 = arg(args, "--density", 0.5);
    let (corpus, truth) = generate(seed, (mb * 1048576.0) as usize, density);
    if let Err(e) = write_corpus(&dir, &corpus, &truth) {
        eprintln!("gen: {}: {e}", dir.display());
        return 3;
    }
    println!(
        "wrote {} ({} bytes, {} lines), {} planted ({} decoys)",
        dir.join("corpus.jsonl").display(),
        corpus.len(),
        corpus.lines().count(),
        truth.len(),
        truth.iter().filter(|t| t.decoy).count()
    );
    0
}

fn write_corpus(dir: &Path, corpus: &str, truth: &[Truth]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("corpus.jsonl"), corpus)?;
    write_truth(&dir.join("truth.jsonl"), truth)
}

fn write_truth(path: &Path, truth: &[Truth]) -> std::io::Result<()> {
    let mut t = std::io::BufWriter::new(std::fs::File::create(path)?);
    for x in truth {
        serde_json::to_writer(&mut t, x)?;
        t.write_all(b"\n")?;
    }
    t.flush()
}

fn read_corpus(dir: &Path) -> std::io::Result<(String, Vec<Truth>)> {
    let corpus = std::fs::read_to_string(dir.join("corpus.jsonl"))?;
    let truth = std::fs::read_to_string(dir.join("truth.jsonl"))?
        .lines()
        .map(|l| serde_json::from_str(l).map_err(std::io::Error::other))
        .collect::<Result<Vec<Truth>, _>>()?;
    Ok((corpus, truth))
}

fn quality(args: &[String]) -> i32 {
    let Some(dir) = args.get(1).map(PathBuf::from) else {
        eprintln!("quality: DIR required");
        return 3;
    };
    let (corpus, truth) = match read_corpus(&dir) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("quality: {}: {e}", dir.display());
            return 3;
        }
    };
    let scanner = abcd_redact::Scanner::new(corpus_identity(), None);
    let red = match scanner.redact(&corpus) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quality: refused: {e}");
            return 2;
        }
    };
    let s = score_redacted(
        &corpus,
        &red.text,
        &truth,
        &["secret", "network", "identity"],
    );
    let _ = print_score("abcd", &s, &mut std::io::stdout());
    if s.recall() < 0.99 || !s.decoy_hits.is_empty() {
        1
    } else {
        0
    }
}

/// `--file PATH`: real text to time instead of a generated corpus.
fn file_arg(args: &[String]) -> Option<&String> {
    args.iter()
        .position(|a| a == "--file")
        .and_then(|i| args.get(i + 1))
}

/// The corpus `speed` and `keywords` time: `--mb`, `--seed`, `--varied`
/// or `--no-newline`, or a file of real text (`--file PATH`).
fn timed_input(args: &[String]) -> Vec<u8> {
    let mb: usize = arg(args, "--mb", 64);
    let seed: u64 = arg(args, "--seed", 7);
    let no_newline = args.iter().any(|a| a == "--no-newline");
    let varied = args.iter().any(|a| a == "--varied");
    if let Some(path) = file_arg(args) {
        return match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("--file {path}: {e}");
                std::process::exit(3);
            }
        };
    }
    if varied {
        let c = generate_varied(seed, mb << 20);
        eprintln!(
            "varied corpus: {:.1} % of lines hold non-ASCII text",
            100.0 * non_ascii_line_share(&c)
        );
        c.into_bytes()
    } else if no_newline {
        // One line of escaped transcript text, no newline at all.
        let (c, _) = generate(seed, mb << 20, 0.02);
        c.replace('\n', " ").into_bytes()
    } else {
        generate(seed, mb << 20, 0.02).0.into_bytes()
    }
}

/// The keyword walk alone (the scanner's automaton over each line, as
/// stage one walks a line it scans whole), best and median of `--runs`:
/// its own figure, steadier than the whole redaction's on a noisy machine.
/// The occurrence count lets two builds be checked to walk alike.
fn keywords(args: &[String]) -> i32 {
    let runs: usize = arg(args, "--runs", 9).max(1);
    let input = timed_input(args);
    let scanner = abcd_redact::Scanner::new(corpus_identity(), None);
    let mut walls = Vec::new();
    let mut found = 0;
    for _ in 0..runs {
        let t = Instant::now();
        found = abcd_redact::bench::keyword_walk(&scanner, &input);
        walls.push(t.elapsed().as_secs_f64());
    }
    walls.sort_by(f64::total_cmp);
    let mib = input.len() as f64 / 1048576.0;
    println!(
        "{} MiB: keyword walk, median of {runs}: {:.3} s = {:.1} MiB/s; best {:.3} s = {:.1} MiB/s; {found} occurrences",
        input.len() >> 20,
        walls[runs / 2],
        mib / walls[runs / 2],
        walls[0],
        mib / walls[0],
    );
    0
}

fn speed(args: &[String]) -> i32 {
    let no_newline = args.iter().any(|a| a == "--no-newline");
    let varied = args.iter().any(|a| a == "--varied");
    let runs: usize = arg(args, "--runs", 3).max(1);
    let input = timed_input(args);
    let id = if args.iter().any(|a| a == "--no-identity") {
        abcd_redact::Identity::default()
    } else {
        corpus_identity()
    };
    let scanner = abcd_redact::Scanner::new(id, None);
    // Scanning alone is timed: the regexes a run would compile on first
    // use are compiled here (`abcd redact`'s whole-process figures include
    // building the scanner).
    scanner.compile_all();
    let phases = args.iter().any(|a| a == "--phases");
    if phases && !abcd_redact::timing::ENABLED {
        eprintln!(
            "speed --phases: the timers are not built in; build with \
             `cargo build --release -p abcd-redact-bench --features phase-timing`"
        );
        return 3;
    }
    // Zero the timers (the scanner's construction ran some).
    let _ = scanner.timing_report();
    let mut best = f64::MAX;
    let mut best_cpu = f64::MAX;
    let mut walls = Vec::new();
    let mut findings = 0;
    for _ in 0..runs {
        let c = thread_cpu_seconds();
        let t = Instant::now();
        let mut sink = CountingSink(0);
        match scanner.redact_stream(&input[..], &mut sink) {
            Ok(r) => findings = r.finding_count,
            Err(e) => {
                eprintln!("speed: refused: {e}");
                return 2;
            }
        }
        walls.push(t.elapsed().as_secs_f64());
        best = best.min(t.elapsed().as_secs_f64());
        best_cpu = best_cpu.min(thread_cpu_seconds() - c);
    }
    let mib = input.len() as f64 / 1048576.0;
    walls.sort_by(f64::total_cmp);
    let median = walls[walls.len() / 2];
    let shape = if let Some(path) = file_arg(args) {
        path.as_str()
    } else if varied {
        "varied transcript JSONL"
    } else if no_newline {
        "single line"
    } else {
        "transcript JSONL"
    };
    println!(
        "{:.1} MiB {shape}: median of {runs}: wall {median:.3} s = {:.1} MiB/s; best: wall {best:.3} s = {:.1} MiB/s; on-CPU {best_cpu:.3} s = {:.1} MiB/s; {findings} findings; peak RSS {} MiB",
        mib,
        mib / median,
        mib / best,
        mib / best_cpu,
        peak_rss_mib()
    );
    if phases {
        print_phases(&scanner.timing_report(), runs, walls.iter().sum());
    }
    0
}

/// The timers' report, per run: each phase's time and share of the runs'
/// wall time, and the costliest rules (see `abcd_redact::timing`).
fn print_phases(r: &abcd_redact::timing::Report, runs: usize, wall: f64) {
    let per_run = |nanos: u64| nanos as f64 / 1e6 / runs as f64;
    println!("phase            ms/run   share   spans/run");
    for &(name, nanos, n) in &r.phases {
        println!(
            "{name:14} {:8.1} {:6.1} % {:10}",
            per_run(nanos),
            100.0 * nanos as f64 / 1e9 / wall,
            n / runs as u64
        );
    }
    println!("rule (stage)                          ms/run   share   runs/run   hits/run   µs/run");
    for t in r.rules.iter().take(30) {
        let stage = if t.verify { "verify" } else { "one" };
        println!(
            "{:30} {stage:6} {:8.2} {:6.1} % {:10} {:10} {:8.1}",
            t.rule,
            per_run(t.nanos),
            100.0 * t.nanos as f64 / 1e9 / wall,
            t.runs / runs as u64,
            t.hits / runs as u64,
            t.nanos as f64 / 1e3 / t.runs as f64
        );
    }
}

struct CountingSink(u64);
impl Write for CountingSink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// CPU time this thread has spent on a core (Linux schedstat, ns), so the
/// figure is one core's throughput even on a machine shared with other jobs.
fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// Peak resident set from /proc (Linux); 0 elsewhere.
fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb / 1024)
}

fn score(args: &[String]) -> i32 {
    let Some(dir) = args.get(1).map(PathBuf::from) else {
        eprintln!("score: DIR required");
        return 3;
    };
    let name: String = arg(args, "--name", "tool".to_string());
    let classes = ["secret"];
    let (corpus, truth) = match read_corpus(&dir) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("score: {e}");
            return 3;
        }
    };
    let s = if let Some(p) = args
        .iter()
        .position(|a| a == "--redacted")
        .and_then(|i| args.get(i + 1))
    {
        match std::fs::read_to_string(p) {
            Ok(red) => score_redacted(&corpus, &red, &truth, &classes),
            Err(e) => {
                eprintln!("score: {p}: {e}");
                return 3;
            }
        }
    } else if let Some(p) = args
        .iter()
        .position(|a| a == "--report")
        .and_then(|i| args.get(i + 1))
    {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        // JSON, or JSON lines (kingfisher's jsonl).
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|_| {
            serde_json::Value::Array(
                text.lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect(),
            )
        });
        score_report(&v, &truth, &classes)
    } else {
        eprintln!("score: --redacted FILE or --report FILE required");
        return 3;
    };
    let _ = print_score(&name, &s, &mut std::io::stdout());
    0
}

/// The capture path: each file redacted whole by `Scanner::redact_parts`
/// (as `history capture` and `history ingest` do), with the identity of
/// the current user. Prints the median and best of `--runs` passes over
/// all files.
fn parts(args: &[String]) -> i32 {
    // Every argument but `--runs` and its value names a file.
    let files: Vec<&String> = args
        .windows(2)
        .filter(|w| !w[1].starts_with("--") && w[0] != "--runs")
        .map(|w| &w[1])
        .collect();
    let runs: usize = arg(args, "--runs", 5);
    let mut texts = Vec::new();
    for f in &files {
        match std::fs::read(f) {
            Ok(b) => texts.push(String::from_utf8_lossy(&b).into_owned()),
            Err(e) => {
                eprintln!("parts: {f}: {e}");
                return 3;
            }
        }
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    if bytes == 0 {
        eprintln!("parts: FILE… required (non-empty)");
        return 3;
    }
    let scanner = abcd_redact::Scanner::new(abcd_redact::Identity::discover(None), None);
    scanner.compile_all();
    let mut secs = Vec::new();
    let mut findings = 0;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        findings = 0;
        for text in &texts {
            let r = scanner.redact_parts(&[text]);
            findings += r.map(|v| v[0].findings.len()).unwrap_or(0);
        }
        secs.push(t.elapsed().as_secs_f64());
    }
    secs.sort_by(f64::total_cmp);
    let mb = bytes as f64 / 1e6;
    println!(
        "redact_parts: {} files, {mb:.1} MB: median {:.3} s = {:.1} MB/s, best {:.3} s = {:.1} MB/s, {findings} findings",
        texts.len(),
        secs[secs.len() / 2],
        mb / secs[secs.len() / 2],
        secs[0],
        mb / secs[0]
    );
    0
}
