//! `abcd journal verify|replay|dump|repair|stats`: the operator's view of a
//! repository's journal.
//!
//! Owns rendering only; the checks live in `abcd-journal` and the
//! projections in `projection`.

use std::cell::Cell;
use std::io::Write;
use std::path::PathBuf;

use abcd_journal::{FrameKind, Journal, VerifyOptions, VerifyStatus};
use serde_json::json;

use crate::corpus::Corpus;
use crate::event::{CaptureOutcome, Event};
use crate::render::sanitize;
use crate::{clock, projection, repo, store};
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum JournalCmd {
    /// Check every frame: clean (0), torn tail (3) or corrupt (4); a clean
    /// journal with events the projections could not apply exits 5.
    Verify {
        /// Check CRCs only, not the SHA-256 chain.
        #[arg(long)]
        crc_only: bool,
    },
    /// Bring projections up to date, or rebuild them from scratch.
    Replay {
        /// Rebuild every projection from the whole journal.
        #[arg(long)]
        rebuild: bool,
    },
    /// One line per event.
    Dump,
    /// Move a damaged range aside and re-append every intact event; with
    /// projection faults recorded, rebuild the projections to retry them.
    Repair {
        /// Do it (without it, only say what would be done).
        #[arg(long)]
        yes: bool,
    },
    /// Frame, byte and event counts.
    Stats,
    /// Upgrade a store an older abcd wrote (journal format 1) to this
    /// release's format, proving every file unchanged. Any verb that opens
    /// the store does it too; this says what it did.
    Upgrade,
}

fn lane_journal(repo_arg: &Option<PathBuf>) -> Result<(store::Lane, PathBuf), String> {
    let home = store::abcd_home().map_err(|e| e.to_string())?;
    let info = repo::resolve_user_lane(repo_arg.as_deref(), &home).map_err(|e| e.to_string())?;
    let lane = store::Lane::open_existing(&home, &info.root_sha)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "nothing is stored for this repository ({}) yet, so there is no journal to inspect",
                info.root_sha
            )
        })?;
    // An older release's store is upgraded first (every verb does it); a
    // damaged one stays as it is, so verify and repair can work on it.
    match crate::upgrade::ensure(&lane) {
        Ok(Some(r)) if r.events > 0 => eprintln!(
            "abcd: upgraded this store to journal format {} ({} events, {} bodies; every file compared unchanged)",
            abcd_journal::FORMAT_VERSION,
            r.events,
            r.bodies
        ),
        Ok(_) => {}
        Err(e @ crate::upgrade::UpgradeError::Damaged { .. }) => eprintln!("abcd: {e}"),
        Err(e) => return Err(e.to_string()),
    }
    let dir = lane.journal_dir();
    Ok((lane, dir))
}

fn progress_printer(label: &'static str) -> impl Fn(u64, u64) {
    let last = Cell::new(u64::MAX);
    let tty = crate::render::progress_enabled();
    move |done: u64, total: u64| {
        if !tty || total == 0 {
            return;
        }
        let pct = done * 100 / total;
        if pct != last.get() {
            last.set(pct);
            eprint!("\r{label}: {pct:3}% of {} MiB", total >> 20);
            if done >= total {
                eprintln!();
            }
        }
    }
}

/// One event as `journal dump` prints it.
fn describe(ev: &Event) -> (String, serde_json::Value) {
    match ev {
        Event::Staged(s) => (
            format!(
                "{} session={} agent={} bytes={} sha256={}{}",
                s.stem,
                s.session_id,
                s.agent_id.as_deref().unwrap_or("-"),
                s.bytes,
                &s.raw_sha256[..12.min(s.raw_sha256.len())],
                if s.adopted { " adopted" } else { "" }
            ),
            json!({"stem": s.stem, "session_id": s.session_id, "agent_id": s.agent_id, "bytes": s.bytes, "raw_sha256": s.raw_sha256, "meta_sha256": s.meta_sha256, "adopted": s.adopted}),
        ),
        Event::Restaged(r) => (
            format!(
                "{} bytes={} replaced_bytes={}",
                r.stem, r.bytes, r.replaced_bytes
            ),
            json!({"stem": r.stem, "bytes": r.bytes, "raw_sha256": r.raw_sha256, "replaced_bytes": r.replaced_bytes, "adopted": r.adopted}),
        ),
        Event::Captured(c) => {
            let retires = c.retires.as_ref().map(|r| r.stem.clone());
            match &c.outcome {
                CaptureOutcome::Stored {
                    record_name,
                    body,
                    supersedes,
                } => (
                    format!(
                        "stored {record_name} body={} bytes={} supersedes={} retires={}",
                        &body.sha256[..12.min(body.sha256.len())],
                        body.bytes,
                        supersedes.len(),
                        retires.as_deref().unwrap_or("-")
                    ),
                    json!({"outcome": "stored", "record": record_name, "body_sha256": body.sha256, "body_bytes": body.bytes, "supersedes": supersedes, "retires": retires, "extended": c.extended}),
                ),
                CaptureOutcome::AlreadyStored { record_name } => (
                    format!(
                        "already-stored {record_name} retires={}",
                        retires.as_deref().unwrap_or("-")
                    ),
                    json!({"outcome": "already-stored", "record": record_name, "retires": retires}),
                ),
            }
        }
        Event::Quarantined(q) => (
            format!("{} reason={}", q.stem, q.reason),
            json!({"stem": q.stem, "reason": q.reason}),
        ),
        Event::Discarded(d) => (
            format!("{} place={:?} bytes={}", d.stem, d.place, d.bytes),
            json!({"stem": d.stem, "place": format!("{:?}", d.place).to_lowercase(), "bytes": d.bytes}),
        ),
        Event::LineageMigrated(m) => (
            format!(
                "{} body={}",
                m.record_name,
                &m.body.sha256[..12.min(m.body.sha256.len())]
            ),
            json!({"record": m.record_name, "body_sha256": m.body.sha256}),
        ),
        Event::Forgotten(f) => (
            format!(
                "values={} bodies={} rewritten={} removed={}",
                f.values.len(),
                f.rewrites.len(),
                f.rewritten_records.len(),
                f.removed_records.len()
            ),
            json!({"values": f.values.len(), "bodies": f.rewrites.len(), "rewritten_records": f.rewritten_records, "removed_records": f.removed_records}),
        ),
        Event::SessionNoted(n) => (n.session_id.clone(), json!({"session_id": n.session_id})),
        Event::SubagentGapSighted(g) => (
            g.hook_event_name.clone(),
            json!({"hook_event_name": g.hook_event_name}),
        ),
        Event::DirectoryNamed(d) => (d.directory.clone(), json!({"directory": d.directory})),
        Event::LaneMoved(m) => (
            format!(
                "to={} records={} staged={} sessions={}",
                m.to_root,
                m.records.len(),
                m.staged.len(),
                m.sessions.len()
            ),
            json!({"to_root": m.to_root, "records": m.records, "staged": m.staged, "sessions": m.sessions}),
        ),
        Event::Imported(i) => {
            let (text, inner) = describe(&i.applied.to_event());
            (
                format!(
                    "from={} id={} {} {text}",
                    i.origin,
                    &i.event_id[..12.min(i.event_id.len())],
                    i.applied.name()
                ),
                json!({"origin": i.origin, "event_id": i.event_id, "applied": i.applied.name(), "detail": inner}),
            )
        }
    }
}

/// Exit code of `journal verify` when the journal is clean but some of its
/// events could not be applied to the projections (`index/faults.json`).
pub const EXIT_PROJECTION_FAULTS: i32 = 5;

/// The projection faults as text lines, each with what to do.
fn fault_lines(faults: &[projection::Fault]) -> Vec<String> {
    let mut lines = vec![format!(
        "{} journal event(s) could not be applied to the projections and were skipped (the journal still holds them):",
        faults.len()
    )];
    for f in faults {
        lines.push(format!(
            "  seq {} {}: {}",
            f.seq,
            f.event.as_deref().unwrap_or("(undecodable)"),
            f.reason
        ));
    }
    lines.push("Run `abcd journal replay --rebuild` to retry them; one that fails again is recorded again (an undecodable event needs the abcd that wrote it, or `abcd journal dump` to inspect it).".into());
    lines
}

fn status_name(s: VerifyStatus) -> &'static str {
    match s {
        VerifyStatus::Clean => "clean",
        VerifyStatus::TornTail => "torn-tail",
        VerifyStatus::Corrupt => "corrupt",
    }
}

pub fn run(
    cmd: JournalCmd,
    repo_arg: &Option<PathBuf>,
    json_out: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32, String> {
    let w = |out: &mut dyn Write, s: String| -> Result<(), String> {
        writeln!(out, "{}", sanitize(&s)).map_err(|e| e.to_string())
    };
    match cmd {
        JournalCmd::Verify { crc_only } => {
            let (lane, dir) = lane_journal(repo_arg)?;
            let faults = projection::read_faults(&lane);
            let unjournaled = projection::unjournaled_records(&lane);
            let notice = projection::unjournaled_notice(&lane, &unjournaled);
            let progress = progress_printer("verify");
            let opts = VerifyOptions {
                chain: !crc_only,
                progress: Some(&progress),
            };
            let r = match abcd_journal::verify(&dir, &opts) {
                Ok(r) => r,
                Err(e @ abcd_journal::JournalError::BadHeader { .. }) => {
                    // The first 64 bytes are damaged and no recovery is
                    // proven: as corrupt as it gets.
                    if json_out {
                        w(out, json!({"status": "corrupt", "exit_code": 4, "damage": {"offset": 0, "length": 64, "reason": "header", "detail": e.to_string(), "restorable": false}, "unjournaled_records": unjournaled}).to_string())?;
                    } else {
                        w(out, format!("journal is CORRUPT at offset 0..64 (the file header): {e}. Run `abcd journal repair` to see what can be done."))?;
                        if let Some(n) = &notice {
                            w(out, n.clone())?;
                        }
                    }
                    return Ok(4);
                }
                Err(e) => return Err(e.to_string()),
            };
            let mut code = r.exit_code();
            if code == 0 && !faults.is_empty() {
                code = EXIT_PROJECTION_FAULTS;
            }
            // The bodies the events name: present and matching their digests.
            let bodies = Journal::open_existing(&dir)
                .ok()
                .and_then(|j| crate::body::check(&lane, &j).ok())
                .unwrap_or_default();
            if code == 0 && !bodies.problems.is_empty() {
                code = 4;
            } else if code == 0 && bodies.forget_pending {
                code = EXIT_PROJECTION_FAULTS;
            }
            let damage_json = |d: &abcd_journal::Damage| {
                json!({
                    "offset": d.offset,
                    "reason": d.reason.code(),
                    "detail": d.reason.to_string(),
                    "looks_torn": d.looks_torn,
                    "frames_after": d.frames_after,
                    "seq_after": d.seq_after.map(|(a, b)| json!([a, b])),
                    "bytes_after": d.bytes_after,
                })
            };
            let mut damage = r.damage.as_ref().map(damage_json);
            if let (Some(serde_json::Value::Object(m)), Some(h)) = (damage.as_mut(), &r.header) {
                m.insert("length".into(), json!(64));
                m.insert("restorable".into(), json!(h.proof.is_some()));
                m.insert("proof".into(), json!(h.proof.map(|p| p.describe())));
            }
            if json_out {
                // A body that is missing or damaged makes the store corrupt
                // even when every frame is whole.
                let status = if bodies.problems.is_empty() {
                    status_name(r.status)
                } else {
                    "corrupt"
                };
                let v = json!({
                    "status": status,
                    "exit_code": code,
                    "chain_checked": r.chain_checked,
                    "file_bytes": r.file_bytes,
                    "frames": r.frames,
                    "events": r.events,
                    "repairs": r.repairs,
                    "head": {"seq": r.head.seq, "offset": r.head.offset, "hash": hex::encode(r.head.hash)},
                    "damage": damage,
                    "projection_faults": faults,
                    "frames_status": status_name(r.frames_status),
                    "frame_damage": r.frame_damage.as_ref().map(damage_json),
                    "unjournaled_records": unjournaled,
                    "bodies": bodies,
                });
                w(out, v.to_string())?;
                return Ok(code);
            }
            if let Some(h) = &r.header {
                w(
                    out,
                    format!(
                        "journal is CORRUPT at offset 0..64 (the file header): {}; the original is recoverable ({}); {} frame(s), {} event(s) intact behind it; appends are refused and spooled. Run `abcd journal repair --yes` to restore it.",
                        h.detail,
                        h.proof.map(|p| p.describe()).unwrap_or("not proven"),
                        r.frames,
                        r.events
                    ),
                )?;
                if let (VerifyStatus::Corrupt | VerifyStatus::TornTail, Some(d)) =
                    (&r.frames_status, &r.frame_damage)
                {
                    w(
                        out,
                        format!(
                            "the frames are also damaged at offset {}: {} (status {}); repair handles both",
                            d.offset,
                            d.reason,
                            status_name(r.frames_status)
                        ),
                    )?;
                }
                if let Some(n) = &notice {
                    w(out, n.clone())?;
                }
                return Ok(code);
            }
            match (&r.status, &r.damage) {
                (VerifyStatus::Clean, _) => w(
                    out,
                    format!(
                        "journal clean: {} frame(s), {} event(s), {} bytes; head seq {} chain {}{}",
                        r.frames,
                        r.events,
                        r.file_bytes,
                        r.head.seq,
                        hex::encode(r.head.hash),
                        if r.chain_checked { "" } else { " (CRC only; chain not checked)" }
                    ),
                )?,
                (VerifyStatus::TornTail, Some(d)) => w(
                    out,
                    format!(
                        "journal has a TORN TAIL at offset {} ({}): {} byte(s) after the last good frame (seq {}) were never acknowledged; the next writer copies them to journal.torn/ and truncates",
                        d.offset, d.reason, d.bytes_after, r.head.seq
                    ),
                )?,
                (_, Some(d)) => w(
                    out,
                    format!(
                        "journal is CORRUPT at offset {}: {}; {} valid frame(s) follow{}; appends are refused and spooled. Run `abcd journal repair` to see the plan, then `abcd journal repair --yes`.",
                        d.offset,
                        d.reason,
                        d.frames_after,
                        d.seq_after.map(|(a, b)| format!(" (seq {a}..{b})")).unwrap_or_default()
                    ),
                )?,
                (_, None) => w(out, format!("journal status: {}", status_name(r.status)))?,
            }
            if !faults.is_empty() {
                for line in fault_lines(&faults) {
                    w(out, line)?;
                }
            }
            for p in &bodies.problems {
                w(out, format!("body {} is {} (records: {}); those records cannot be rebuilt from the journal — `abcd journal repair` names them", p.sha256, if p.problem == "missing" { "MISSING" } else { "DAMAGED (does not match its digest)" }, p.records.join(", ")))?;
            }
            if bodies.forget_pending {
                w(out, format!("a `history forget` stopped after journaling and before deleting the {} body file(s) it replaced, which still hold the forgotten text: run the same forget again, or `abcd journal repair --yes`", bodies.unreferenced.len()))?;
            } else if !bodies.unreferenced.is_empty() {
                w(out, format!("note: {} body file(s) in bodies/ are named by no event (a capture whose append failed); `abcd journal repair --yes` deletes them", bodies.unreferenced.len()))?;
            }
            if let Some(n) = &notice {
                w(out, n.clone())?;
            }
            Ok(code)
        }
        JournalCmd::Replay { rebuild } => {
            let home = store::abcd_home().map_err(|e| e.to_string())?;
            let (lane, _) = lane_journal(repo_arg)?;
            let corpus = Corpus::open(&home, &lane.root_sha).map_err(|e| e.to_string())?;
            let started = std::time::Instant::now();
            let r = if rebuild {
                crate::corpus::rebuild_projections(&corpus.lane, &corpus.journal)
                    .map_err(|e| e.to_string())?
            } else {
                corpus.refresh().map_err(|e| e.to_string())?.0
            };
            let secs = started.elapsed().as_secs_f64();
            if json_out {
                w(out, json!({"rebuilt": r.rebuilt, "applied": r.applied, "head_seq": r.head_seq, "seconds": secs, "projection_faults": projection::read_faults(&corpus.lane)}).to_string())?;
            } else if r.rebuilt {
                w(
                    out,
                    format!(
                        "rebuilt every projection from {} event(s) (head seq {}) in {secs:.3}s",
                        r.applied, r.head_seq
                    ),
                )?;
            } else {
                w(
                    out,
                    format!(
                        "projections caught up: {} new event(s) applied (head seq {})",
                        r.applied, r.head_seq
                    ),
                )?;
            }
            let faults = projection::read_faults(&corpus.lane);
            if !json_out && !faults.is_empty() {
                for line in fault_lines(&faults) {
                    w(out, line)?;
                }
            }
            Ok(0)
        }
        JournalCmd::Dump => {
            let (_, dir) = lane_journal(repo_arg)?;
            let journal = Journal::open_existing(&dir).map_err(|e| e.to_string())?;
            for frame in journal
                .read_from(&journal.start())
                .map_err(|e| e.to_string())?
            {
                let frame = frame.map_err(|e| e.to_string())?;
                let ts = clock::rfc3339_nanos(frame.ts_unix_ns);
                if frame.kind != FrameKind::Event {
                    if json_out {
                        w(out, json!({"seq": frame.seq, "offset": frame.offset, "ts": ts, "frame": frame.kind.name(), "payload_bytes": frame.payload.len()}).to_string())?;
                    } else {
                        w(
                            out,
                            format!(
                                "{:>8}  {:>10}  {ts}  {}  payload_bytes={}",
                                frame.seq,
                                frame.offset,
                                frame.kind.name(),
                                frame.payload.len()
                            ),
                        )?;
                    }
                    continue;
                }
                match crate::event::decode(&frame.payload) {
                    Ok(env) => {
                        let (text, fields) = describe(&env.event);
                        if json_out {
                            w(out, json!({"seq": frame.seq, "offset": frame.offset, "ts": ts, "event_id": frame.id.to_hex(), "event": env.event.name(), "fields": fields}).to_string())?;
                        } else {
                            w(
                                out,
                                format!(
                                    "{:>8}  {:>10}  {ts}  {:<20}  {text}",
                                    frame.seq,
                                    frame.offset,
                                    env.event.name()
                                ),
                            )?;
                        }
                    }
                    Err(e) => {
                        if json_out {
                            w(out, json!({"seq": frame.seq, "offset": frame.offset, "ts": ts, "error": e.to_string()}).to_string())?;
                        } else {
                            w(
                                out,
                                format!(
                                    "{:>8}  {:>10}  {ts}  UNDECODABLE  {e}",
                                    frame.seq, frame.offset
                                ),
                            )?;
                        }
                    }
                }
            }
            Ok(0)
        }
        JournalCmd::Repair { yes } => {
            let (lane, dir) = lane_journal(repo_arg)?;
            // Temporaries of dead writers go first (a repair's own run
            // never leaves one: see abcd_fsio::write_atomic).
            if yes {
                crate::corpus::sweep_lane_temps(&lane, crate::corpus::Sweep::Thorough)
                    .map_err(|e| e.to_string())?;
            }
            let mut r = abcd_journal::repair(&dir, yes).map_err(|e| e.to_string())?;
            // Projection faults are the projections' to retry, not the
            // journal's: a rebuild applies every event again.
            let faults = projection::read_faults(&lane);
            if !faults.is_empty() && !r.applied {
                r.plan.push(format!(
                    "retry {} journal event(s) the projections could not apply, by rebuilding every projection",
                    faults.len()
                ));
            }
            let mut retried = false;
            let mut set_aside = Vec::new();
            if r.applied || (yes && !faults.is_empty()) {
                // The journal changed under the projections: rebuild them.
                let journal = Journal::open_existing(&dir).map_err(|e| e.to_string())?;
                set_aside = crate::corpus::rebuild_projections(&lane, &journal)
                    .map_err(|e| e.to_string())?
                    .set_aside;
                retried = !faults.is_empty();
            }
            let faults_left = projection::read_faults(&lane);
            let unjournaled = projection::unjournaled_records(&lane);
            // Bodies: a bad one cannot be repaired (its records are named);
            // one no event needs is deleted with --yes.
            let mut body_check = Journal::open_existing(&dir)
                .ok()
                .and_then(|j| crate::body::check(&lane, &j).ok())
                .unwrap_or_default();
            let mut bodies_removed = 0usize;
            if !body_check.unreferenced.is_empty() || body_check.forget_pending {
                if yes {
                    let _lock = crate::fsutil::FileLock::acquire(
                        &lane.lock_path(),
                        crate::corpus::STORE_LOCK_TIMEOUT,
                    )
                    .map_err(|e| e.to_string())?;
                    for sha in &body_check.unreferenced {
                        if crate::body::remove(&lane, sha).map_err(|e| e.to_string())? {
                            bodies_removed += 1;
                        }
                    }
                    crate::fsutil::remove_file_if_exists(&crate::body::forget_marker(&lane))
                        .map_err(|e| e.to_string())?;
                    r.plan.retain(|l| !l.starts_with("nothing to do"));
                    r.plan.push(format!(
                        "deleted {bodies_removed} body file(s) no event names"
                    ));
                    body_check.unreferenced.clear();
                    body_check.forget_pending = false;
                } else {
                    r.plan.retain(|l| !l.starts_with("nothing to do"));
                    r.plan.push(format!(
                        "delete {} body file(s) no event names",
                        body_check.unreferenced.len()
                    ));
                }
            }
            for p in &body_check.problems {
                r.plan.retain(|l| !l.starts_with("nothing to do"));
                r.plan.push(format!(
                    "cannot restore body {} ({}): records {} stay as they are in records/ and are not rebuilt from the journal",
                    p.sha256,
                    p.problem,
                    p.records.join(", ")
                ));
            }
            let lost: Vec<serde_json::Value> = r
                .lost
                .iter()
                .map(|l| {
                    json!({
                        "seq": l.seq,
                        "event_id": l.event_id.map(|i| i.to_hex()),
                        "offset": l.offset,
                        "verified": l.verified,
                        "kind": l.kind.map(|k| k.name()),
                        "why": l.why,
                    })
                })
                .collect();
            if json_out {
                w(
                    out,
                    json!({
                        "status_before": status_name(r.status_before),
                        "applied": r.applied,
                        "plan": r.plan,
                        "cut_offset": r.cut_offset,
                        "cut_bytes": r.cut_bytes,
                        "recoverable_events": r.recoverable_events,
                        "unrecoverable_frames": r.unrecoverable_frames,
                        "spool_files": r.spool_files,
                        "moved_to": r.moved_to.as_ref().map(|p| p.display().to_string()),
                        "recovered_appended": r.recovered_appended,
                        "spool_drained": r.spool_drained,
                        "projection_faults_retried": retried,
                        "projection_faults": faults_left,
                        "header": r.header.as_ref().map(|h| json!({
                            "offset": 0,
                            "length": 64,
                            "detail": h.detail,
                            "restorable": h.proof.is_some(),
                            "proof": h.proof.map(|p| p.describe()),
                        })),
                        "lost": lost,
                        "set_aside_records": set_aside,
                        "unjournaled_records": unjournaled,
                        "bodies": body_check,
                        "bodies_removed": bodies_removed,
                    })
                    .to_string(),
                )?;
            } else {
                for line in &r.plan {
                    w(
                        out,
                        format!(
                            "{}{line}",
                            if r.applied
                                || retried
                                || (yes && bodies_removed > 0 && line.starts_with("deleted"))
                            {
                                "done: "
                            } else {
                                "would: "
                            }
                        ),
                    )?;
                }
                if retried {
                    w(
                        out,
                        format!(
                            "projections rebuilt: {} of {} fault(s) remain",
                            faults_left.len(),
                            faults.len()
                        ),
                    )?;
                    for line in fault_lines(&faults_left).into_iter().skip(1) {
                        w(out, line)?;
                    }
                }
                if !r.lost.is_empty() {
                    w(out, format!("{}: {} frame(s) of the damaged range cannot be recovered (their bytes {} kept in journal.quarantine/):", if r.applied { "LOST" } else { "WOULD LOSE" }, r.lost.len(), if r.applied { "are" } else { "will be" }))?;
                    for l in &r.lost {
                        w(out, format!("  cannot recover: {l}"))?;
                    }
                }
                if r.applied {
                    w(out, format!("repaired: {} event(s) re-appended, {} spooled event(s) appended; projections rebuilt", r.recovered_appended, r.spool_drained))?;
                    if !set_aside.is_empty() {
                        w(out, format!("this rebuild set aside {} record file(s) the journal no longer reproduces: {}", set_aside.len(), set_aside.join(", ")))?;
                    }
                    if let Some(n) = projection::unjournaled_notice(&lane, &unjournaled) {
                        w(out, n)?;
                    }
                } else if retried {
                    // The rebuild said what it did, above.
                } else if r.plan.iter().all(|l| l.starts_with("nothing to do")) {
                    w(
                        out,
                        "nothing to repair: the journal is clean and the spool is empty".into(),
                    )?;
                } else {
                    if let Some(n) = projection::unjournaled_notice(&lane, &unjournaled) {
                        w(out, n)?;
                    }
                    let _ = writeln!(err, "abcd journal repair: nothing changed; re-run with --yes to apply this plan");
                }
            }
            Ok(0)
        }
        JournalCmd::Upgrade => {
            let home = store::abcd_home().map_err(|e| e.to_string())?;
            let info =
                repo::resolve_user_lane(repo_arg.as_deref(), &home).map_err(|e| e.to_string())?;
            let Some(lane) =
                store::Lane::open_existing(&home, &info.root_sha).map_err(|e| e.to_string())?
            else {
                return Err(format!(
                    "nothing is stored for this repository ({}) yet; there is nothing to upgrade",
                    info.root_sha
                ));
            };
            let r = crate::upgrade::ensure(&lane).map_err(|e| e.to_string())?;
            if json_out {
                w(
                    out,
                    json!({"upgraded": r.as_ref().is_some_and(|r| r.events > 0), "report": r})
                        .to_string(),
                )?;
            } else {
                match r {
                    Some(r) if r.events > 0 => w(out, format!(
                        "upgraded to journal format {}: {} event(s), {} body file(s), {} staging metadata file(s); {} projection file(s) compared byte for byte, all unchanged; {} non-event frame(s) not carried",
                        abcd_journal::FORMAT_VERSION, r.events, r.bodies, r.staged_metadata, r.files_compared, r.frames_dropped
                    ))?,
                    _ => w(out, format!("nothing to do: this store is already in journal format {}", abcd_journal::FORMAT_VERSION))?,
                }
            }
            Ok(0)
        }
        JournalCmd::Stats => {
            let (lane, dir) = lane_journal(repo_arg)?;
            let s = abcd_journal::stats(&dir).map_err(|e| e.to_string())?;
            let cp = projection::read_checkpoint(&lane);
            let faults = projection::read_faults(&lane);
            let unjournaled = projection::unjournaled_records(&lane);
            if json_out {
                w(
                    out,
                    json!({
                        "file_bytes": s.file_bytes,
                        "frames": s.frames,
                        "events": s.events,
                        "repairs": s.repairs,
                        "first_seq": s.first_seq,
                        "last_seq": s.last_seq,
                        "first_ts": s.first_ts_unix_ns.map(clock::rfc3339_nanos),
                        "last_ts": s.last_ts_unix_ns.map(clock::rfc3339_nanos),
                        "trailing_bytes": s.trailing_bytes,
                        "spool_events": s.spool_events,
                        "torn_files": s.torn_files,
                        "quarantine_files": s.quarantine_files,
                        "journal_id": hex::encode(s.journal_id),
                        "projection_seq": cp.as_ref().map(|c| c.seq),
                        "projection_faults": faults,
                        "corrupt_marker": s.corrupt_marker,
                        "header_damage": s.header_damage,
                        "unjournaled_records": unjournaled,
                    })
                    .to_string(),
                )?;
            } else {
                w(out, format!("journal:     {}", dir.display()))?;
                w(
                    out,
                    format!(
                        "frames:      {} ({} events, {} repair frames)",
                        s.frames, s.events, s.repairs
                    ),
                )?;
                w(out, format!("bytes:       {}", s.file_bytes))?;
                if let (Some(a), Some(b)) = (s.first_seq, s.last_seq) {
                    w(out, format!("seq:         {a}..{b}"))?;
                }
                if let (Some(a), Some(b)) = (s.first_ts_unix_ns, s.last_ts_unix_ns) {
                    w(
                        out,
                        format!(
                            "time:        {} .. {}",
                            clock::rfc3339_nanos(a),
                            clock::rfc3339_nanos(b)
                        ),
                    )?;
                }
                w(
                    out,
                    format!(
                        "projections: caught up to seq {}",
                        cp.map(|c| c.seq).unwrap_or(0)
                    ),
                )?;
                if !faults.is_empty() {
                    w(
                        out,
                        format!(
                            "faults:      {} event(s) not applied to the projections",
                            faults.len()
                        ),
                    )?;
                    for line in fault_lines(&faults).into_iter().skip(1) {
                        w(out, line)?;
                    }
                }
                if s.trailing_bytes > 0 {
                    w(out, format!("trailing:    {} byte(s) after the last good frame (run `abcd journal verify`)", s.trailing_bytes))?;
                }
                if s.spool_events > 0 {
                    w(
                        out,
                        format!(
                            "spool:       {} event(s) waiting (run `abcd journal repair`)",
                            s.spool_events
                        ),
                    )?;
                }
                if s.torn_files + s.quarantine_files > 0 {
                    w(
                        out,
                        format!(
                            "set aside:   {} torn-tail file(s), {} quarantined range(s)",
                            s.torn_files, s.quarantine_files
                        ),
                    )?;
                }
                if let Some(h) = &s.header_damage {
                    w(out, format!("header:      DAMAGED ({h}); figures from the recovered original; run `abcd journal repair --yes`"))?;
                }
                if let Some(m) = &s.corrupt_marker {
                    w(out, format!("refusing:    writers refuse and spool ({}); run `abcd journal verify`, then `abcd journal repair`", m.trim().replace('\n', "; ")))?;
                }
                if let Some(n) = projection::unjournaled_notice(&lane, &unjournaled) {
                    w(out, format!("unjournaled: {n}"))?;
                }
            }
            Ok(0)
        }
    }
}
