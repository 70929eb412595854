//! abcd-redact: the fail-closed, JSON-aware redaction engine every stored
//! byte passes through.
//!
//! Owns: detecting secrets, the caller's identity and private network
//! identifiers in text (raw and through every JSON-escape and
//! percent-encoding layer), replacing each with a placeholder that names its
//! kind, and verifying the result by scanning it again. Must never: cut a
//! line, print or report a secret's bytes, write a file, or let a scanner it
//! could not configure as asked redact anything (it is *degraded* and
//! refuses).
//!
//! Placeholders are `[REDACTED:<kind>]` (`[REDACTED:github-token]`,
//! `[REDACTED:password]`, `[REDACTED:ip-address]` …), except the caller's own
//! home directory, which becomes `~` so paths stay readable. None contains a
//! quote or backslash, none is flagged by any rule, and redacting redacted
//! text changes nothing.
//!
//! Map: `rules` (the built-in catalogue, as data), `view` (decoded layers and
//! the map back to raw bytes), `engine` (prefilter, matchers, placement), `keywords` (the keyword
//! automaton's laned walk), `reach` (each rule's stop bytes, read from its
//! pattern),
//! `identity` (who the caller is), `config` (per-repo file), `cli` (the
//! `abcd redact` verb).

mod cli;
pub mod config;
mod conversation;
mod engine;
mod groups;
pub mod identity;
mod keywords;
mod reach;
pub mod rules;
#[cfg(test)]
mod testkit;
pub mod timing;
pub mod view;

use std::io::{BufRead, Write};
use std::path::Path;

use regex::bytes::RegexBuilder;
use std::sync::Arc;

pub use cli::{
    run_redact_command, run_redact_explain, EXIT_CLEAN, EXIT_FOUND, EXIT_REFUSED, EXIT_USAGE,
};
pub use identity::Identity;
pub use rules::Severity;

use conversation::Conversation;
use engine::{Engine, Gate, Hit, IdentitySet, Known, Matcher, Meta, Needle, Rule, Scratch};
use keywords::{Keywords, KwMatch, LaneBufs};
use rules::{Check, Class};

/// Lines longer than this are refused rather than held in memory (a
/// newline-free 16 MiB file is fine; a quarter-gigabyte line is not a
/// transcript).
pub const MAX_LINE_BYTES: usize = 256 * 1024 * 1024;

/// A streaming report keeps at most this many findings (the count is exact
/// beyond it); findings are small but a hostile input could produce one per
/// few bytes.
pub const MAX_REPORT_FINDINGS: usize = 100_000;

/// Login names shared by many people or machines: redacting them as words
/// would shred ordinary prose ("root commit", "admin panel") and identify no
/// one. Their home paths are still swept.
const GENERIC_USERS: &[&str] = &[
    "root",
    "admin",
    "user",
    "ubuntu",
    "runner",
    "node",
    "app",
    "dev",
    "test",
    "guest",
    "vscode",
    "codespace",
    "ec2-user",
    "nobody",
    "www-data",
    "build",
    "ci",
    "docker",
    "default",
    "home",
];

/// One detection. Never carries the detected bytes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub rule: Arc<str>,
    pub kind: Arc<str>,
    pub severity: Severity,
    /// 1-based line number within the text (or part).
    pub line: usize,
    /// 1-based byte column of the first redacted raw byte.
    pub column: usize,
    /// Length in raw bytes of the redacted span.
    pub length: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redaction {
    pub text: String,
    pub findings: Vec<Finding>,
}

/// Outcome of [`Scanner::redact_stream`].
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    pub lines: usize,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Total number of findings (may exceed `findings.len()`).
    pub finding_count: usize,
    /// The first [`MAX_REPORT_FINDINGS`] findings.
    pub findings: Vec<Finding>,
}

#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    #[error("refusing to redact with a degraded scanner: {reason}; fix or remove the repository's .abcd/redact.json")]
    Degraded { reason: String },
    #[error("redaction left blocking residue of kind(s) [{}]; refusing the whole text", kinds.join(", "))]
    Residual { kinds: Vec<String> },
    #[error("redacting line {line} would break its JSON; refusing the whole text")]
    JsonBroken { line: usize },
    #[error("line {line} is longer than the {cap}-byte cap; refusing rather than cutting it")]
    LineTooLong { line: usize, cap: usize },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl RedactError {
    /// True when retrying the same bytes with the same configuration can
    /// never succeed, so the caller should quarantine rather than retry.
    /// A degraded scanner is not: fixing the repository's file makes the
    /// same bytes capturable, so the entry stays staged.
    pub fn is_deterministic(&self) -> bool {
        matches!(
            self,
            RedactError::Residual { .. }
                | RedactError::JsonBroken { .. }
                | RedactError::LineTooLong { .. }
        )
    }
}

/// The compiled redaction engine for one repository.
pub struct Scanner {
    engine: Engine,
    degraded: Option<String>,
    /// Meta of the secret-shaped words in a secret-reading command's
    /// output (see `conversation`).
    output_meta: usize,
    /// Meta of `generic-secret` (an element's value on its own line).
    generic_meta: usize,
    /// Metas of the Terraform variable rules (a block's `default` read
    /// line by line reports as the rule that reads the block whole).
    block_metas: (usize, usize),
    /// `xml-element-secret`'s: an element's value on the line after its
    /// opening tag, read line by line, reports as the rule that reads the
    /// element whole.
    element_meta: usize,
    /// Meta of `plist-secret` (a property list's string on the line after
    /// its key).
    plist_meta: usize,
    /// `env-entry-secret`'s: an `env` entry's value read line by line
    /// reports as the rule that reads the entry whole.
    env_entry_meta: usize,
    /// `repl-secret`'s and `wallet-recovery-phrase`'s, for the value read
    /// on the line after its prompt or label.
    repl_meta: usize,
    phrase_meta: usize,
    /// A PuTTY key's private lines, read line by line.
    ppk_meta: usize,
}

fn placeholder(kind: &str) -> Vec<u8> {
    format!("[REDACTED:{kind}]").into_bytes()
}

/// Applies the repository's severity raises to a built-in (rule id, kind,
/// default), recording an error when asked to lower one.
type RaiseFn<'a> = dyn Fn(&str, &str, Severity, &mut Vec<String>) -> Severity + 'a;

struct Builder {
    metas: Vec<Meta>,
    rules: Vec<Rule>,
    kw: Vec<String>,
    /// Each keyword's index in `kw` (a linear search per keyword was 5 %
    /// of the scanner's start-up).
    kw_index: std::collections::HashMap<String, usize>,
    kw_rules: Vec<Vec<usize>>,
    kw_identity: Vec<Vec<usize>>,
    always: Vec<usize>,
    errors: Vec<String>,
}

impl Builder {
    fn meta(&mut self, id: &str, kind: &str, severity: Severity, class: Class) -> usize {
        self.metas.push(Meta {
            id: Arc::from(id),
            kind: Arc::from(kind),
            severity,
            class,
            placeholder: placeholder(kind),
        });
        self.metas.len() - 1
    }

    fn rule(&mut self, meta: usize, matcher: Matcher, keywords: &[String]) {
        let ri = self.rules.len();
        self.rules.push(Rule { meta, matcher });
        if keywords.is_empty() {
            self.always.push(ri);
        }
        for k in keywords {
            let p = self.keyword(&k.to_ascii_lowercase());
            self.kw_rules[p].push(ri);
        }
    }

    fn identity_keyword(&mut self, k: &str, needle: usize) {
        let p = self.keyword(k);
        self.kw_identity[p].push(needle);
    }

    /// The index of keyword `k`, added if new.
    fn keyword(&mut self, k: &str) -> usize {
        if let Some(&p) = self.kw_index.get(k) {
            return p;
        }
        let p = self.kw.len();
        self.kw.push(k.to_string());
        self.kw_index.insert(k.to_string(), p);
        self.kw_rules.push(Vec::new());
        self.kw_identity.push(Vec::new());
        p
    }
}

impl Scanner {
    /// Built-in rules + identity + optional `<repo_root>/.abcd/redact.json`
    /// (see [`config`]). Never fails: a configuration that cannot be honoured
    /// makes the scanner degraded, and a degraded scanner refuses every call
    /// that would produce text.
    pub fn new(identity: Identity, repo_root: Option<&Path>) -> Scanner {
        let mut b = Builder {
            metas: Vec::new(),
            rules: Vec::new(),
            kw: Vec::new(),
            kw_index: std::collections::HashMap::new(),
            kw_rules: Vec::new(),
            kw_identity: Vec::new(),
            always: Vec::new(),
            errors: Vec::new(),
        };
        let cfg = match repo_root.map(config::load) {
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                b.errors.push(e);
                None
            }
            None => None,
        };
        let raise = |id: &str, kind: &str, sev: Severity, errors: &mut Vec<String>| -> Severity {
            let Some(c) = &cfg else { return sev };
            let mut out = sev;
            for key in [id, kind] {
                if let Some(s) = c.severity.get(key) {
                    match config::parse_severity(s) {
                        Ok(n) if n >= sev => out = out.max(n),
                        Ok(_) => errors.push(format!(
                            "severity of {key:?} cannot be lowered below the built-in"
                        )),
                        Err(e) => errors.push(format!("severity of {key:?}: {e}")),
                    }
                }
            }
            out
        };
        for def in rules::builtin() {
            let sev = raise(def.id, def.kind, def.severity, &mut b.errors);
            let meta = b.meta(def.id, def.kind, sev, def.class);
            let kws: Vec<String> = def.keywords.iter().map(|s| s.to_string()).collect();
            let matcher = Matcher::Regex {
                re: engine::LazyRegex::builtin(def.pattern),
                group: def.group,
                check: def.check,
                min_entropy: def.min_entropy,
                allow: def.allow.iter().map(|a| a.as_bytes().to_vec()).collect(),
                stops: reach::LazyStops::new(Some(def.pattern)),
                anchored: rules::ANCHORED_RULES
                    .iter()
                    .find(|(id, _)| *id == def.id)
                    .map(|&(_, a)| Box::new(engine::AnchoredRegex::builtin(a, def.pattern))),
                groups: (def.group != 0).then(|| Box::new(groups::LazyGroups::new(def.pattern))),
            };
            b.rule(meta, matcher, &kws);
        }
        let sev = raise("private-key", "private-key", Severity::Block, &mut b.errors);
        let m = b.meta("private-key", "private-key", sev, Class::Secret);
        b.rule(m, Matcher::Pem, &["-----begin ".into()]);
        let sev = raise("other-home", "home-user", Severity::Block, &mut b.errors);
        let m = b.meta("other-home", "home-user", sev, Class::Network);
        b.rule(
            m,
            Matcher::OtherHome,
            &[
                "/users/".into(),
                "/home/".into(),
                "\\users\\".into(),
                "/users\\".into(),
            ],
        );
        let m = b.meta(
            "data-uri-base64",
            "encoded-secret",
            Severity::Block,
            Class::Secret,
        );
        b.rule(m, Matcher::DataUri, &[";base64,".into()]);
        let sev = raise(
            "secret-command-output",
            "secret-output",
            Severity::Block,
            &mut b.errors,
        );
        let output_meta = b.meta("secret-command-output", "secret-output", sev, Class::Secret);

        let identity_set = Self::identity(&mut b, &identity, &raise);
        if let Some(c) = &cfg {
            for r in &c.rules {
                let id = format!("config:{}", r.id);
                let sev = r
                    .severity
                    .as_deref()
                    .map(config::parse_severity)
                    .transpose()
                    .ok()
                    .flatten()
                    .unwrap_or(Severity::Block);
                let sev = raise(&id, &r.kind, sev, &mut b.errors);
                let meta = b.meta(&id, &r.kind, sev, Class::Secret);
                match RegexBuilder::new(&r.pattern)
                    .size_limit(config::MAX_PATTERN_COMPILED_BYTES)
                    .build()
                {
                    Ok(re) => {
                        let m = Matcher::Regex {
                            re: engine::LazyRegex::ready(re),
                            group: 0,
                            check: Check::None,
                            min_entropy: 0.0,
                            allow: Vec::new(),
                            // Not analysed: verify runs them on the whole line.
                            stops: reach::LazyStops::new(None),
                            anchored: None,
                            groups: None,
                        };
                        b.rule(meta, m, &r.keywords);
                    }
                    Err(e) => b.errors.push(format!("rule {:?}: bad pattern: {e}", r.id)),
                }
            }
        }
        let keywords = match Keywords::new(&b.kw) {
            Ok(k) => k,
            Err(e) => {
                b.errors.push(format!("keyword automaton: {e}"));
                Keywords::new(&[]).expect("an empty automaton always builds")
            }
        };
        let repeat_meta_base = b.metas.len();
        let meta_of = |id: &str| b.metas.iter().position(|m| &*m.id == id);
        let generic_meta = meta_of("generic-secret").unwrap_or(output_meta);
        let env_entry_meta = meta_of("env-entry-secret").unwrap_or(generic_meta);
        let element_meta = meta_of("xml-element-secret").unwrap_or(generic_meta);
        let plist_meta = meta_of("plist-secret").unwrap_or(generic_meta);
        let repl_meta = meta_of("repl-secret").unwrap_or(generic_meta);
        let phrase_meta = meta_of("wallet-recovery-phrase").unwrap_or(generic_meta);
        let ppk_meta = meta_of("putty-private-key").unwrap_or(generic_meta);
        let block_metas = (
            meta_of("terraform-variable-secret").unwrap_or(generic_meta),
            meta_of("terraform-variable-password").unwrap_or(generic_meta),
        );
        let mac_rule = b
            .rules
            .iter()
            .position(|r| &*b.metas[r.meta].id == "mac-address")
            .unwrap_or(usize::MAX);
        let ipv6_rule = b
            .rules
            .iter()
            .position(|r| &*b.metas[r.meta].id == "private-ipv6")
            .unwrap_or(usize::MAX);
        let non_ascii = b
            .rules
            .iter()
            .map(|r| rules::NON_ASCII_RULES.contains(&&*b.metas[r.meta].id))
            .collect();
        // Built-in rules whose keyword occurrences are checked before they
        // run (config rules never are: their ids start with `config:`).
        let gates = b
            .rules
            .iter()
            .map(|r| match &*b.metas[r.meta].id {
                "generic-secret" => Gate::Assign(rules::GENERIC_MIN_VALUE),
                "generic-password" => Gate::Assign(rules::PASSWORD_MIN_VALUE),
                "aws-secret-access-key" => Gate::Assign(rules::AWS_SECRET_KEY_LEN),
                "heroku-api-key" => Gate::Assign(rules::UUID_LEN),
                "credential-url" => Gate::UserinfoAt,
                "other-home" => Gate::NotOwnHome,
                "provider-named" => Gate::ValueAfter(rules::PROVIDER_MIN_VALUE),
                "netrc-password" => Gate::SpaceAfter,
                "table-row-secret" => Gate::TableCell,
                "registry-login-password" => Gate::AfterWord(rules::REGISTRY_LOGIN_TOOLS),
                "base64-encoded-secrets" => Gate::Base64Value {
                    min: 24,
                    echo: true,
                    eol: false,
                },
                "yaml-data-base64" => Gate::Base64Value {
                    min: 12,
                    echo: false,
                    eol: true,
                },
                "session-cookie" => Gate::CookiePair,
                "login-slash-password" => Gate::SlashPair,
                "login-with-pair" => Gate::LoginPair,
                "user-pass-words" => Gate::UserBefore,
                "byte-string-secret" => Gate::BytesAssigned,
                "typed-secret-binding" => Gate::SecretNameBefore,
                "env-line-secret" | "env-line-password" => Gate::Upper,
                "named-secret-prose" | "named-password-prose" => Gate::UpperLink,
                "bare-secret-word-prose" => Gate::ValueAfterNow(rules::BARE_SECRET_MIN_VALUE),
                "prose-password" => Gate::WordThenSep,
                "lan-hostname" => Gate::HostEnd,
                _ => Gate::None,
            })
            .collect();
        let windowed = b
            .rules
            .iter()
            .map(|r| {
                // Their stop bytes are read on first use (the engine
                // searches whole segments if there are none).
                rules::WINDOWED_RULES.contains(&&*b.metas[r.meta].id)
                    && matches!(r.matcher, Matcher::Regex { .. })
            })
            .collect();
        let line_end_values = b
            .rules
            .iter()
            .map(|r| rules::LINE_END_VALUE_RULES.contains(&&*b.metas[r.meta].id))
            .collect();
        let quoted_values = b
            .rules
            .iter()
            .map(|r| rules::QUOTED_VALUE_RULES.contains(&&*b.metas[r.meta].id))
            .collect();
        let anchored = b
            .rules
            .iter()
            .map(|r| {
                matches!(
                    r.matcher,
                    Matcher::Regex {
                        anchored: Some(_),
                        ..
                    }
                )
            })
            .collect();
        let kw_ungated =
            b.kw.iter()
                .map(|k| rules::ASSIGN_UNGATED_KEYWORDS.contains(&k.as_str()))
                .collect();
        let (allow_values, allow_paths) = match &cfg {
            Some(c) => (
                c.allow_values
                    .iter()
                    .filter(|v| !v.is_empty())
                    .map(|v| v.as_bytes().to_vec())
                    .collect(),
                c.allow_paths
                    .iter()
                    .filter(|v| !v.is_empty())
                    .map(|v| v.as_bytes().to_vec())
                    .collect(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        let degraded = if b.errors.is_empty() {
            None
        } else {
            Some(b.errors.join("; "))
        };
        Scanner {
            engine: Engine {
                metas: b.metas,
                rules: b.rules,
                keywords,
                kw_rules: b.kw_rules,
                kw_identity: b.kw_identity,
                always: b.always,
                identity: identity_set,
                allow_values,
                allow_paths,
                repeat_meta_base,
                examples: rules::builtin()
                    .iter()
                    .flat_map(|d| d.allow.iter())
                    .chain(rules::PUBLISHED_VALUES)
                    .map(|a| a.as_bytes().to_vec())
                    .collect(),
                home: identity.home.as_ref().map(|h| h.as_bytes().to_vec()),
                mac_rule,
                ipv6_rule,
                non_ascii,
                gates,
                kw_ungated,
                windowed,
                line_end_values,
                quoted_values,
                anchored,
            },
            degraded,
            output_meta,
            generic_meta,
            block_metas,
            env_entry_meta,
            element_meta,
            plist_meta,
            repl_meta,
            phrase_meta,
            ppk_meta,
        }
    }

    fn identity(b: &mut Builder, id: &Identity, raise: &RaiseFn) -> IdentitySet {
        let mut pats: Vec<String> = Vec::new();
        let mut needles = Vec::new();
        let mut metas = std::collections::HashMap::new();
        let mut add = |b: &mut Builder, pat: &str, needle: Needle, id: &str, kind: &str| {
            if pats.iter().any(|p| p.eq_ignore_ascii_case(pat)) {
                return;
            }
            let meta = *metas.entry(id.to_string()).or_insert_with(|| {
                let sev = raise(id, kind, Severity::Block, &mut b.errors);
                let m = b.meta(id, kind, sev, Class::Network);
                if kind == "home-path" {
                    b.metas[m].placeholder = b"~".to_vec();
                }
                m
            });
            pats.push(pat.to_string());
            needles.push((needle, meta));
        };
        let usable_user = |u: &str| {
            u.len() >= 3
                && !GENERIC_USERS.iter().any(|g| g.eq_ignore_ascii_case(u))
                && !u.contains(['"', '\\'])
        };
        if let Some(h) = &id.home {
            if h.len() >= 2 && h.starts_with('/') && !h.contains(['"', '\\']) {
                let single = h.matches('/').count() == 1;
                add(b, h, Needle::Home { single }, "home-path", "home-path");
                // Claude Code names project directories after the cwd with
                // `/` spelled `-` (`~/.claude/projects/-home-zed-repo`).
                if !single {
                    add(
                        b,
                        &h.replace('/', "-"),
                        Needle::Home { single: false },
                        "home-path",
                        "home-path",
                    );
                }
                if let Some(base) = h.rsplit('/').next().filter(|u| usable_user(u)) {
                    add(b, base, Needle::Word, "user-name", "user-name");
                }
            }
        }
        if let Some(u) = id.user.as_deref().filter(|u| usable_user(u)) {
            add(b, u, Needle::Word, "user-name", "user-name");
        }
        for n in &id.git_names {
            let n = n.trim();
            if n.len() >= 3 && !n.contains(['"', '\\']) {
                add(b, n, Needle::Word, "git-name", "git-name");
            }
        }
        for e in &id.git_emails {
            let e = e.trim();
            if e.len() >= 3 && e.contains('@') && !e.contains(['"', '\\']) {
                add(b, e, Needle::Email, "git-email", "git-email");
            }
        }
        if let Some(o) = id.github_owner.as_deref().filter(|o| usable_user(o)) {
            add(b, o, Needle::Word, "github-owner", "github-owner");
        }
        // Identity strings ride in the keyword automaton: its match *is* the
        // identity hit, so no second pass over the line is needed.
        for (i, p) in pats.iter().enumerate() {
            b.identity_keyword(&p.to_ascii_lowercase(), i);
        }
        let homes = pats
            .iter()
            .zip(&needles)
            .filter(|(_, (n, _))| matches!(n, Needle::Home { .. }))
            .map(|(p, &(_, meta))| (p.as_bytes().to_vec(), meta))
            .collect();
        IdentitySet { needles, homes }
    }

    /// Why this scanner refuses to redact, if it does.
    /// Compiles every rule's regex now instead of on the rule's first run
    /// (see `engine::LazyRegex`): for a benchmark that times scanning alone,
    /// or a long-lived process that would rather pay it up front.
    /// Drains the phase and rule timers into a report (see [`timing`];
    /// empty unless built with the feature `phase-timing`).
    pub fn timing_report(&self) -> timing::Report {
        timing::take(|ri| {
            let meta = self.engine.rules[ri].meta;
            self.engine.metas[meta].id.to_string()
        })
    }

    pub fn compile_all(&self) {
        for r in &self.engine.rules {
            if let engine::Matcher::Regex { re, anchored, .. } = &r.matcher {
                match anchored {
                    Some(a) => {
                        a.get();
                    }
                    None => {
                        re.get();
                    }
                }
            }
        }
    }

    pub fn degraded(&self) -> Option<&str> {
        self.degraded.as_deref()
    }

    fn check_degraded(&self) -> Result<(), RedactError> {
        match &self.degraded {
            Some(r) => Err(RedactError::Degraded { reason: r.clone() }),
            None => Ok(()),
        }
    }

    /// Two-stage redaction: sanitise, then verify by scanning the result
    /// again. `Err` refuses the whole text.
    pub fn redact(&self, text: &str) -> Result<Redaction, RedactError> {
        let mut v = self.redact_parts(&[text])?;
        Ok(v.remove(0))
    }

    /// Several texts redacted as one unit (a record body plus its lineage
    /// scalars): a value found in any part is redacted in every part.
    pub fn redact_parts(&self, parts: &[&str]) -> Result<Vec<Redaction>, RedactError> {
        self.check_degraded()?;
        let (hits, _) = self.detect(parts)?;
        let mut out = Vec::with_capacity(parts.len());
        let mut residual = Vec::new();
        // Nothing here reuses keyword matches across scans.
        let mut scratch = Scratch::not_recording();
        let known = Known::default();
        let mut bufs = VerifyBufs::default();
        let mut changed = Vec::new();
        for (pi, part) in parts.iter().enumerate() {
            let mut text = Vec::with_capacity(part.len());
            let mut findings = Vec::new();
            let mut line_buf = Vec::new();
            for (li, line) in split_lines(part.as_bytes()).enumerate() {
                let (body, nl) = strip_nl(line);
                let mut h = hits[pi][li].clone();
                if h.is_empty() {
                    text.extend_from_slice(line);
                    continue;
                }
                line_buf.clear();
                let merged = engine::apply(&self.engine.metas, body, &mut h, &mut line_buf);
                output_spans(&self.engine.metas, &merged, &mut changed);
                self.check_line(
                    body,
                    &line_buf,
                    &merged,
                    &changed,
                    li + 1,
                    &mut scratch,
                    None,
                    &known,
                    &mut residual,
                    &mut bufs,
                )?;
                findings.extend(merged.iter().map(|m| self.finding(m, li + 1)));
                text.extend_from_slice(&line_buf);
                text.extend_from_slice(nl);
            }
            out.push(Redaction {
                text: into_string(text),
                findings,
            });
        }
        if !residual.is_empty() {
            residual.sort();
            residual.dedup();
            return Err(RedactError::Residual { kinds: residual });
        }
        Ok(out)
    }

    /// Findings only (what [`Scanner::redact`] would replace). Works on a
    /// degraded scanner too, since it writes nothing.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        let Ok((hits, _)) = self.detect(&[text]) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut sink = Vec::new();
        for (li, line) in split_lines(text.as_bytes()).enumerate() {
            let mut h = hits[0][li].clone();
            if h.is_empty() {
                continue;
            }
            let (body, _) = strip_nl(line);
            sink.clear();
            let merged = engine::apply(&self.engine.metas, body, &mut h, &mut sink);
            out.extend(merged.iter().map(|m| self.finding(m, li + 1)));
        }
        out
    }

    /// Streaming form for big inputs: memory bounded by a small multiple of
    /// the largest line. A value found on one line is redacted on every later
    /// line. On `Err`, `w` holds the lines before the refused one (each of
    /// them already verified); callers that need all-or-nothing discard it.
    pub fn redact_stream(
        &self,
        mut r: impl BufRead,
        mut w: impl Write,
    ) -> Result<Report, RedactError> {
        let mut lines = self.line_redactor()?;
        let mut report = Report::default();
        let mut line = Vec::new();
        loop {
            // The whole lines in the reader's buffer are redacted where they
            // lie, as one block (see `LineRedactor::begin_block`); a line cut
            // by the buffer's end is gathered first.
            let whole = loop {
                match r.fill_buf() {
                    Ok(a) => break memchr::memrchr(b'\n', a).map(|p| p + 1),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_err("reading input", e)),
                }
            };
            if let Some(n) = whole {
                let avail = r.fill_buf().map_err(|e| io_err("reading input", e))?;
                let region = &avail[..n];
                lines.begin_block(region);
                for l in split_lines(region) {
                    if l.len() > MAX_LINE_BYTES {
                        return Err(RedactError::LineTooLong {
                            line: report.lines + 1,
                            cap: MAX_LINE_BYTES,
                        });
                    }
                    emit_line(&mut lines, l, &mut w, &mut report)?;
                }
                lines.end_block();
                r.consume(n);
                continue;
            }
            line.clear();
            let n = read_line_capped(&mut r, &mut line, report.lines + 1)?;
            if n == 0 {
                break;
            }
            emit_line(&mut lines, &line, &mut w, &mut report)?;
        }
        w.flush()
            .map_err(|e| io_err("flushing redacted output", e))?;
        Ok(report)
    }

    /// The line-at-a-time form of [`Scanner::redact_stream`], for callers
    /// that read the lines themselves (a capture that cuts a big transcript
    /// into parts): the state (values found, the conversation) carries from
    /// each line to every later one.
    pub fn line_redactor(&self) -> Result<LineRedactor<'_>, RedactError> {
        self.check_degraded()?;
        Ok(LineRedactor {
            scanner: self,
            lines: 0,
            out: Vec::new(),
            scratch: Scratch::default(),
            verify_scratch: Scratch::not_recording(),
            known: Known::default(),
            pem_open: 0,
            found: Vec::new(),
            hits: Vec::new(),
            residual: Vec::new(),
            conversation: Conversation::default(),
            said: Vec::new(),
            findings: Vec::new(),
            block: None,
            block_kws: Vec::new(),
            block_next: 0,
            lanes: LaneBufs::default(),
            home_hits: Vec::new(),
            home_views: view::Views::default(),
            home_views_built: false,
            homed: Vec::new(),
            home_all: Vec::new(),
            home_text: Vec::new(),
            home_merged: Vec::new(),
            merged: Vec::new(),
            changed: Vec::new(),
            verify_bufs: VerifyBufs::default(),
            home_first_on: true,
            homed_lines: 0,
        })
    }

    /// The conversation step of stage one: words a secret-reading command
    /// printed become known values (swept on this line and every other).
    fn observe(
        &self,
        conversation: &mut Conversation,
        line: &[u8],
        said: &mut Vec<Vec<u8>>,
        found: &mut Vec<(Vec<u8>, usize)>,
    ) {
        let _t = timing::span(timing::Phase::Observe);
        let line = conversation::Line::new(line);
        conversation.observe(line, said);
        if !said.is_empty() {
            found.extend(said.drain(..).map(|v| (v, self.output_meta)));
        }
        if let Some(v) = conversation.element_value(line) {
            if engine::generic_ok(v, None, true, 0.0) {
                found.push((v.to_vec(), self.element_meta));
            }
        }
        if let Some(v) = conversation.plist_value(line) {
            if v.len() >= 12 && engine::prose_secret_ok(v, None, 3.0) {
                found.push((v.to_vec(), self.plist_meta));
            }
        }
        if let Some(v) = conversation.env_value(line) {
            if !v.iter().all(u8::is_ascii_lowercase) && engine::generic_ok(v, None, true, 0.0) {
                found.push((v.to_vec(), self.env_entry_meta));
            }
        }
        if let Some(v) = conversation.repl_value(line) {
            if engine::generic_ok(v, None, true, 0.0) {
                found.push((v.to_vec(), self.repl_meta));
            }
        }
        if let Some(v) = conversation.phrase_value(line) {
            if rules::mnemonic_ok(v) {
                found.push((v.to_vec(), self.phrase_meta));
            }
        }
        if let Some(v) = conversation.ppk_value(line) {
            found.push((v.to_vec(), self.ppk_meta));
        }
        if let Some(v) = conversation.label_value(line) {
            if engine::generic_ok(v, None, false, engine::MIN_TOKEN_ENTROPY) {
                found.push((v.to_vec(), self.generic_meta));
            }
        }
        if let Some(d) = conversation.block_default(line) {
            if engine::block_default_ok(&d.name, d.value, None, d.password) {
                let meta = if d.password {
                    self.block_metas.1
                } else {
                    self.block_metas.0
                };
                found.push((d.value.to_vec(), meta));
            }
        }
        if let Some(v) = conversation.yaml_data_value(line) {
            let mut buf = Vec::new();
            if engine::base64_text(v, &mut buf) {
                found.push((v.to_vec(), self.generic_meta));
            }
        }
    }

    fn finding(&self, h: &Hit, line: usize) -> Finding {
        let m = &self.engine.metas[h.meta];
        Finding {
            rule: Arc::clone(&m.id),
            kind: Arc::clone(&m.kind),
            severity: m.severity,
            line,
            column: h.start + 1,
            length: h.end - h.start,
        }
    }

    /// Stage one over every line of every part, then a sweep for values found
    /// anywhere (so an earlier occurrence of a later-found secret is caught).
    #[allow(clippy::type_complexity)]
    fn detect(&self, parts: &[&str]) -> Result<(Vec<Vec<Vec<Hit>>>, Known), RedactError> {
        // Nothing here reuses keyword matches across scans.
        let mut scratch = Scratch::not_recording();
        let mut known = Known::default();
        let mut found = Vec::new();
        let mut all = Vec::with_capacity(parts.len());
        let mut conversation = Conversation::default();
        let mut said = Vec::new();
        for part in parts {
            let mut pem_open = 0usize;
            let mut per_line = Vec::new();
            for (li, line) in split_lines(part.as_bytes()).enumerate() {
                if line.len() > MAX_LINE_BYTES {
                    return Err(RedactError::LineTooLong {
                        line: li + 1,
                        cap: MAX_LINE_BYTES,
                    });
                }
                let (body, _) = strip_nl(line);
                let mut hits = Vec::new();
                self.engine.scan_line(
                    body,
                    &mut scratch,
                    &known,
                    &mut pem_open,
                    &mut found,
                    &mut hits,
                );
                self.observe(&mut conversation, body, &mut said, &mut found);
                per_line.push(hits);
            }
            all.push(per_line);
        }
        for (v, m) in found.drain(..) {
            known.add(&v, m);
        }
        known.refresh();
        if !known.is_empty() {
            let mut views = view::Views::default();
            for (pi, part) in parts.iter().enumerate() {
                for (li, line) in split_lines(part.as_bytes()).enumerate() {
                    let (body, _) = strip_nl(line);
                    views.build(body);
                    for layer in 0..=views.count() {
                        let v: &[u8] = if layer == 0 { body } else { views.layer(layer) };
                        let hits = &mut all[pi][li];
                        known.find_all(v, |s, e, meta| {
                            let (s, e) = if layer == 0 {
                                (s, e)
                            } else {
                                views.to_raw(layer, s, e)
                            };
                            hits.push(Hit {
                                start: s,
                                end: e,
                                meta,
                            });
                        });
                    }
                }
            }
        }
        Ok((all, known))
    }

    /// Stage two for one changed line: JSON that was valid stays valid, and a
    /// fresh scan of the output finds nothing blocking. Unchanged lines need
    /// no re-scan: the scan is a pure function of the line, and it found
    /// nothing there.
    #[allow(clippy::too_many_arguments)]
    fn check_line<'a>(
        &'a self,
        before: &[u8],
        after: &[u8],
        merged: &[Hit],
        changed: &[(usize, usize)],
        line: usize,
        scratch: &mut Scratch,
        prior: Option<&Scratch>,
        known: &Known,
        residual: &mut Vec<String>,
        bufs: &mut VerifyBufs<'a>,
    ) -> Result<(), RedactError> {
        let _t = timing::span(timing::Phase::Verify);
        self.check_json(before, after, merged, line)?;
        let first = before.iter().find(|b| !b.is_ascii_whitespace());
        let VerifyBufs {
            hits,
            found,
            allowed,
            edits,
            put_edits,
            windows,
            derive_windows,
        } = bufs;
        hits.clear();
        found.clear();
        let mut pem_open = 0;
        if matches!(first, Some(b'{')) && after.len() > 4 * VERIFY_CONTEXT {
            // Stage one walked `before` for allowlisted members; the
            // output's follow from those and the placeholders.
            match prior.and_then(|p| p.raw_allowed()) {
                Some(old) => {
                    edits.clear();
                    edits.extend(
                        merged
                            .iter()
                            .map(|h| (h.start, h.end, self.engine.metas[h.meta].placeholder.len())),
                    );
                    engine::derive_allowed(after, old, edits, allowed, derive_windows);
                }
                None => self.engine.allowed_spans(after, allowed),
            }
            verify_windows(after, changed, allowed, windows);
            for &(a, b) in windows.iter() {
                self.engine.scan_line_as(
                    &after[a..b],
                    true,
                    scratch,
                    known,
                    &mut pem_open,
                    found,
                    hits,
                );
            }
        } else {
            // Stage one decoded `before`; the output's views follow from
            // those and the placeholders (see `Views::derive`).
            if let Some(p) = prior {
                put_edits.clear();
                put_edits.extend(
                    merged
                        .iter()
                        .map(|h| (h.start, h.end, &self.engine.metas[h.meta].placeholder[..])),
                );
                scratch.derive_views(p, put_edits);
            }
            self.engine
                .scan_line(after, scratch, known, &mut pem_open, found, hits);
        }
        for h in hits.iter() {
            let m = &self.engine.metas[h.meta];
            if m.severity == Severity::Block {
                residual.push(m.kind.to_string());
            }
        }
        Ok(())
    }

    /// JSON that was valid stays valid (`merged` are the edits that made
    /// `after` from `before`).
    fn check_json(
        &self,
        before: &[u8],
        after: &[u8],
        merged: &[Hit],
        line: usize,
    ) -> Result<(), RedactError> {
        let first = before.iter().find(|b| !b.is_ascii_whitespace());
        if matches!(first, Some(b'{') | Some(b'['))
            && !edits_inside_strings(&self.engine.metas, before, merged)
            && serde_json::from_slice::<serde::de::IgnoredAny>(after).is_err()
            && serde_json::from_slice::<serde::de::IgnoredAny>(before).is_ok()
        {
            return Err(RedactError::JsonBroken { line });
        }
        Ok(())
    }

    /// The ids and kinds of every rule, for documentation and reports.
    pub fn rule_catalogue(&self) -> Vec<(String, String, Severity)> {
        self.engine
            .metas
            .iter()
            .take(self.engine.repeat_meta_base)
            .map(|m| (m.id.to_string(), m.kind.to_string(), m.severity))
            .collect()
    }
}

/// Verify re-scans at least this many bytes on each side of every change.
/// Every built-in match and the context its checks read (a key before its
/// value, a boundary byte, a `"type":"base64"` look-back) fits well inside
/// it, so a finding that would involve replaced bytes lies inside a window;
/// bytes outside every window are the input's own bytes in the input's own
/// context, which stage one scanned and found clean.
pub const VERIFY_CONTEXT: usize = 1024;

/// Can replacing `spans` of `before` by their placeholders break JSON that
/// was valid? Not when every span lies inside the content of one JSON
/// string, starts and ends between escape sequences and UTF-8 characters,
/// and its placeholder is printable ASCII without `"` or `\`: the string
/// stays a string and nothing else moves. Then the output need not be
/// parsed: if `before` is valid so is the output, and if `before` is not,
/// verify has nothing to protect. Any doubt returns false and the caller
/// parses. The walk stops at the last span, so an edit near the start of a
/// long line (the `cwd` member) costs a few dozen bytes.
///
/// The quote tracking is exact only for valid JSON — outside strings such
/// text has no `\` and every `"` opens a string — which is the only case
/// where the answer matters.
fn edits_inside_strings(metas: &[engine::Meta], before: &[u8], spans: &[Hit]) -> bool {
    let cont = |i: usize| before.get(i).is_some_and(|&b| (0x80..0xC0).contains(&b));
    let mut in_str = false;
    let mut at = 0;
    for h in spans {
        let p = &metas[h.meta].placeholder;
        if !p
            .iter()
            .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
            || h.start < at
            || cont(h.start)
            || cont(h.end)
        {
            return false;
        }
        if !json_walk(before, &mut at, h.start, &mut in_str, true) || !in_str {
            return false;
        }
        if !json_walk(before, &mut at, h.end, &mut in_str, false) {
            return false;
        }
    }
    true
}

/// Advances the string/escape state of a JSON text from `*at` to exactly
/// `to`. False when `to` falls inside an escape sequence, or when
/// `may_close` is false and a string ends on the way.
fn json_walk(b: &[u8], at: &mut usize, to: usize, in_str: &mut bool, may_close: bool) -> bool {
    // One memchr2 pass over the stretch (a call per string cost more than
    // the walk on a transcript line, which holds a string every few bytes).
    let base = *at;
    // Quotes and backslashes before `next` lie inside an escape already
    // taken.
    let mut next = base;
    if base < to {
        for q in memchr::memchr2_iter(b'"', b'\\', &b[base..to]) {
            let pos = base + q;
            if pos < next {
                continue;
            }
            if b[pos] == b'"' {
                if *in_str && !may_close {
                    return false;
                }
                *in_str = !*in_str;
                next = pos + 1;
            } else if *in_str {
                next = pos + escape_len(&b[pos..]);
            }
        }
    }
    *at = next.max(to);
    *at == to
}

/// Length of the JSON escape at the start of `e` (which starts with `\`):
/// a surrogate pair `\uD83D\uDE00` is one 12-byte unit, since splitting it
/// leaves a lone surrogate the parser rejects.
fn escape_len(e: &[u8]) -> usize {
    let hex4 = |s: &[u8]| -> Option<u32> {
        let h = std::str::from_utf8(s.get(..4)?).ok()?;
        u32::from_str_radix(h, 16).ok()
    };
    if e.get(1) != Some(&b'u') {
        return 2;
    }
    match hex4(&e[2..]) {
        Some(0xD800..=0xDBFF) if e.get(6) == Some(&b'\\') && e.get(7) == Some(&b'u') => 12,
        _ => 6,
    }
}

/// Placeholder spans in the output line, from the merged raw spans.
fn output_spans(metas: &[engine::Meta], merged: &[Hit], out: &mut Vec<(usize, usize)>) {
    let mut delta: isize = 0;
    out.clear();
    out.extend(merged.iter().map(|h| {
        let p = metas[h.meta].placeholder.len();
        let s = (h.start as isize + delta) as usize;
        delta += p as isize - (h.end - h.start) as isize;
        (s, s + p)
    }));
}

/// Verify's buffers, reused across lines: its hits and values found, the
/// output's allowlisted spans and the windows it scans, the placeholder
/// edits (with their lengths, and with the placeholders themselves), and
/// [`engine::derive_allowed`]'s windows.
#[derive(Default)]
struct VerifyBufs<'a> {
    hits: Vec<Hit>,
    found: Vec<(Vec<u8>, usize)>,
    allowed: Vec<(usize, usize)>,
    edits: Vec<(usize, usize, usize)>,
    put_edits: Vec<(usize, usize, &'a [u8])>,
    windows: Vec<(usize, usize)>,
    derive_windows: Vec<(usize, usize, isize)>,
}

/// Windows of a JSON line to verify: each change widened by
/// [`VERIFY_CONTEXT`] and then out to whole JSON members — a window starts
/// at a `{"`, `,"` or `["` (a `"` after those bytes cannot be inside a
/// string, where it would be escaped) and ends before one, so allowlisted
/// values are never cut and scanned as fragments.
fn verify_windows(
    line: &[u8],
    changed: &[(usize, usize)],
    allowed: &[(usize, usize)],
    out: &mut Vec<(usize, usize)>,
) {
    windows_snapped(line, changed, allowed, snap_to_members, out)
}

/// Is `line[i]` a `"` that starts a member (after `{`, `,` or `[`)?
fn member_start(line: &[u8], i: usize) -> bool {
    line[i] == b'"' && i > 0 && matches!(line[i - 1], b'{' | b',' | b'[')
}

/// The change `s..e` widened by [`VERIFY_CONTEXT`] and out to whole
/// members. Snapping looks at most VERIFY_CONTEXT further out, so the work
/// per change stays bounded on lines with no structural members; only a
/// `"` can start a member, so memchr finds the candidates (a few vector
/// steps inside a long string value instead of a test per byte).
fn snap_to_members(line: &[u8], s: usize, e: usize) -> (usize, usize) {
    let a0 = s.saturating_sub(VERIFY_CONTEXT);
    let lo = a0.saturating_sub(VERIFY_CONTEXT);
    let a = memchr::memrchr_iter(b'"', &line[lo..(a0 + 1).min(line.len())])
        .map(|i| lo + i)
        .find(|&i| member_start(line, i))
        .map_or(lo, |i| i - 1);
    let b0 = (e + VERIFY_CONTEXT).min(line.len());
    let hi = (b0 + VERIFY_CONTEXT).min(line.len());
    let b = memchr::memchr_iter(b'"', &line[b0..hi])
        .map(|i| b0 + i)
        .find(|&i| member_start(line, i))
        .map_or(hi, |i| i - 1);
    (a, b)
}

/// [`verify_windows`] with the member snap given (tests give it a
/// byte-by-byte one).
fn windows_snapped(
    line: &[u8],
    changed: &[(usize, usize)],
    allowed: &[(usize, usize)],
    snap: impl Fn(&[u8], usize, usize) -> (usize, usize),
    out: &mut Vec<(usize, usize)>,
) {
    out.clear();
    for &(s, e) in changed {
        let (a, b) = snap(line, s, e);
        // Never cut an allowlisted value (a signature, an image): leave it
        // out whole, exactly as stage one did.
        // `allowed` is sorted and disjoint: binary search keeps this
        // O(log n) per change on a line with thousands of ids.
        let inside = |x: usize| {
            let i = allowed.partition_point(|&(s0, _)| s0 < x);
            (i > 0 && x < allowed[i - 1].1).then(|| allowed[i - 1])
        };
        let a = inside(a).map_or(a, |(_, e0)| e0);
        let b = inside(b).map_or(b, |(s0, _)| s0);
        if a >= b {
            continue;
        }
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
}

fn io_err(context: &str, source: std::io::Error) -> RedactError {
    RedactError::Io {
        context: context.to_string(),
        source,
    }
}

fn into_string(v: Vec<u8>) -> String {
    match String::from_utf8(v) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Lines including their `\n` (the last may lack it). Empty text = no lines.
fn split_lines(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= b.len() {
            return None;
        }
        let end = memchr::memchr(b'\n', &b[at..]).map_or(b.len(), |p| at + p + 1);
        let s = &b[at..end];
        at = end;
        Some(s)
    })
}

fn strip_nl(line: &[u8]) -> (&[u8], &[u8]) {
    if line.ends_with(b"\r\n") {
        line.split_at(line.len() - 2)
    } else if line.ends_with(b"\n") {
        line.split_at(line.len() - 1)
    } else {
        (line, &[])
    }
}

/// The state of a streaming redaction ([`Scanner::line_redactor`]): one
/// line in, its verified output out. Memory is bounded by a small multiple
/// of the longest line plus the values found so far.
pub struct LineRedactor<'s> {
    scanner: &'s Scanner,
    lines: usize,
    out: Vec<u8>,
    scratch: Scratch,
    verify_scratch: Scratch,
    known: Known,
    pem_open: usize,
    found: Vec<(Vec<u8>, usize)>,
    hits: Vec<Hit>,
    residual: Vec<String>,
    conversation: Conversation,
    said: Vec<Vec<u8>>,
    findings: Vec<Finding>,
    /// The block of lines `begin_block` walked (its address and length),
    /// and the keyword matches of that walk, ordered by end.
    block: Option<(usize, usize)>,
    block_kws: Vec<KwMatch>,
    /// Where the next line's matches in `block_kws` start.
    block_next: usize,
    lanes: LaneBufs,
    /// Home directory first (see [`LineRedactor::home_first`]): the line's
    /// home edits, the decoded views of the line as it came, the line with
    /// the edits applied, and buffers for its findings.
    home_hits: Vec<Hit>,
    home_views: view::Views,
    home_views_built: bool,
    homed: Vec<u8>,
    home_all: Vec<Hit>,
    home_text: Vec<u8>,
    home_merged: Vec<Hit>,
    /// A changed line's merged spans, their places in the output, and
    /// verify's buffers: reused across lines.
    merged: Vec<Hit>,
    changed: Vec<(usize, usize)>,
    verify_bufs: VerifyBufs<'s>,
    /// Off only in tests, for the two-stage reference.
    home_first_on: bool,
    /// Lines redacted home directory first.
    homed_lines: usize,
}

/// A block shorter than this is not walked as one (the lines' own walks
/// cost no more).
const MIN_BLOCK_BYTES: usize = 256;

/// Whether most of the first lines of `region` are JSON objects (scanned
/// through their decoded views, so a walk of their raw bytes would be
/// wasted): a transcript, not a config file that opens a `{` now and then.
fn mostly_json(region: &[u8]) -> bool {
    let (mut json, mut seen) = (0, 0);
    for line in split_lines(region).take(16) {
        seen += 1;
        if line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
            json += 1;
        }
    }
    json * 4 >= seen * 3
}

impl LineRedactor<'_> {
    /// Walks the keyword automaton once over `region`, whole lines each
    /// ending in `\n` that the caller then hands to [`LineRedactor::line`]
    /// one by one, until [`LineRedactor::end_block`]. Each line that is not
    /// JSON takes its raw text's keyword matches from this walk instead of
    /// walking itself: on short lines a walk of its own runs one lane at
    /// memory latency, the block's four (see `keywords`). Exact because no
    /// keyword crosses a line end (`Keywords::line_local`; otherwise this
    /// does nothing). A block whose first lines are mostly JSON (a
    /// transcript, whose lines are scanned through their decoded views) is
    /// not walked.
    pub fn begin_block(&mut self, region: &[u8]) {
        self.end_block();
        let kw = &self.scanner.engine.keywords;
        if !kw.line_local() || region.len() < MIN_BLOCK_BYTES || mostly_json(region) {
            return;
        }
        kw.find_all(region, &mut self.lanes, &mut self.block_kws);
        self.block = Some((region.as_ptr() as usize, region.len()));
    }

    /// Forgets the block of [`LineRedactor::begin_block`] (its bytes may
    /// change from here on).
    pub fn end_block(&mut self) {
        self.block = None;
        self.block_kws.clear();
        self.block_next = 0;
    }

    /// The matches of the block walk on `line` (a slice of the block),
    /// into the scratch for the next scan.
    fn take_block_matches(&mut self, line: &[u8], body_len: usize) {
        let Some((p, n)) = self.block else {
            return;
        };
        let a = line.as_ptr() as usize;
        if a < p || a + line.len() > p + n {
            return;
        }
        let off = a - p;
        // Lines come in order: their matches start where the last line's
        // ended (two binary searches over the whole block cost ~200
        // instructions a line). A line out of order searches.
        let kws = &self.block_kws;
        let mut lo = self.block_next.min(kws.len());
        if lo > 0 && kws[lo - 1].end > off {
            lo = kws.partition_point(|m| m.end <= off);
        }
        while lo < kws.len() && kws[lo].end <= off {
            lo += 1;
        }
        let mut hi = lo;
        while hi < kws.len() && kws[hi].end <= off + body_len {
            hi += 1;
        }
        self.block_next = hi;
        let pre = &mut self.scratch.pre_kw;
        pre.clear();
        pre.extend(self.block_kws[lo..hi].iter().map(|m| KwMatch {
            start: m.start - off,
            end: m.end - off,
            pattern: m.pattern,
        }));
        self.scratch.pre_kw_set = true;
    }

    /// Redacts one line (`line` includes its newline, if it has one) and
    /// returns the output to write. `Err` refuses this line, and the text
    /// it belongs to; the lines before it were each verified. Lines longer
    /// than [`MAX_LINE_BYTES`] are refused.
    pub fn line<'a>(&'a mut self, line: &'a [u8]) -> Result<&'a [u8], RedactError> {
        let _t = timing::span(timing::Phase::Line);
        let s = self.scanner;
        self.lines += 1;
        self.findings.clear();
        if line.len() > MAX_LINE_BYTES {
            return Err(RedactError::LineTooLong {
                line: self.lines,
                cap: MAX_LINE_BYTES,
            });
        }
        let (orig, nl) = strip_nl(line);
        self.hits.clear();
        self.found.clear();
        // The caller's home directory first where that is exact (see
        // `home_first`): stage one scans the line with it replaced.
        let json = orig.first() == Some(&b'{');
        // Only a JSON line borrows the buffer (an empty `Vec` costs nothing).
        let mut homed = if json {
            std::mem::take(&mut self.homed)
        } else {
            Vec::new()
        };
        let mut home = json && self.home_first(orig, &mut homed);
        if home {
            let pem_open = self.pem_open;
            self.stage_one(&homed, None);
            let scanned = self.found.len();
            s.observe(
                &mut self.conversation,
                orig,
                &mut self.said,
                &mut self.found,
            );
            // A value this line gives that stands over a home directory
            // in the line as it came would be swept there, and not in the
            // line with the home directory replaced: the two-stage way.
            let over = self.found.iter().any(|(v, _)| {
                !v.is_empty()
                    && over_edits(
                        orig,
                        &self.home_hits,
                        (&mut self.home_views, &mut self.home_views_built),
                        v.len(),
                        |hay, before, at| {
                            let probed = &hay[..before.min(hay.len())];
                            for i in memchr::memchr_iter(v[0], probed) {
                                if hay[i..].starts_with(v) {
                                    at(i, i + v.len());
                                }
                            }
                        },
                    )
            });
            if over {
                let observed = self.found.split_off(scanned);
                self.found.clear();
                self.hits.clear();
                self.pem_open = pem_open;
                home = false;
                self.stage_one(orig, Some(line));
                self.found.extend(observed);
            }
        } else {
            self.stage_one(orig, Some(line));
            s.observe(
                &mut self.conversation,
                orig,
                &mut self.said,
                &mut self.found,
            );
        }
        let body: &[u8] = if home { &homed } else { orig };
        // A value found on this line may also stand elsewhere on it
        // without the context its rule needs (`password=X … X`), where
        // this line's sweep could not yet look for it; sweep the line
        // for the new values as `redact` sweeps every line after
        // detection (otherwise verify finds that occurrence and refuses
        // the whole text). One pass, whatever the number of values.
        let first_new = self.known.len();
        for (v, m) in self.found.drain(..) {
            self.known.add(&v, m);
        }
        self.known.refresh();
        if self.known.len() > first_new {
            s.engine
                .sweep_line(body, &self.scratch, &self.known, first_new, &mut self.hits);
        }
        self.out.clear();
        if self.hits.is_empty() {
            if !home {
                if json {
                    self.homed = homed;
                }
                return Ok(line);
            }
            // As for an unchanged line: the scan is a pure function of the
            // bytes it read, and it found nothing in them.
            self.out.extend_from_slice(body);
        } else {
            let mut merged = std::mem::take(&mut self.merged);
            let applying = timing::span(timing::Phase::Apply);
            engine::apply_into(
                &s.engine.metas,
                body,
                &mut self.hits,
                &mut self.out,
                &mut merged,
            );
            drop(applying);
            output_spans(&s.engine.metas, &merged, &mut self.changed);
            // Verify may reuse stage one's keyword matches for the bytes the
            // placeholders left alone.
            std::mem::swap(&mut self.verify_scratch.prior, &mut self.scratch.cache);
            let verified = s.check_line(
                body,
                &self.out,
                &merged,
                &self.changed,
                self.lines,
                &mut self.verify_scratch,
                Some(&self.scratch),
                &self.known,
                &mut self.residual,
                &mut self.verify_bufs,
            );
            self.merged = merged;
            let merged = &self.merged;
            std::mem::swap(&mut self.verify_scratch.prior, &mut self.scratch.cache);
            verified?;
            if !self.residual.is_empty() {
                self.residual.sort();
                self.residual.dedup();
                return Err(RedactError::Residual {
                    kinds: std::mem::take(&mut self.residual),
                });
            }
            if !home {
                let lines = self.lines;
                self.findings
                    .extend(merged.iter().map(|m| s.finding(m, lines)));
            }
        }
        if home {
            // The home edits lie inside the `cwd` string after plain JSON
            // members, and their placeholder holds no quote or backslash:
            // the JSON is as valid as it was (verify checked the rest).
            debug_assert!(s
                .check_json(orig, body, &self.home_hits, self.lines)
                .is_ok());
            self.home_findings(orig);
        }
        if json {
            self.homed = homed;
        }
        self.out.extend_from_slice(nl);
        Ok(&self.out)
    }

    /// Stage one's scan of `body`: the line as it came (`line`, with its
    /// newline: the block walk's matches for it are taken), or the line
    /// with its home directory replaced (`None`).
    #[inline]
    fn stage_one(&mut self, body: &[u8], line: Option<&[u8]>) {
        let _t = timing::span(timing::Phase::StageOne);
        if let Some(line) = line {
            self.take_block_matches(line, body.len());
        }
        self.scanner.engine.scan_line(
            body,
            &mut self.scratch,
            &self.known,
            &mut self.pem_open,
            &mut self.found,
            &mut self.hits,
        );
    }

    /// Home directory first. Claude Code writes the working directory in a
    /// `"cwd"` member on every transcript line, and most lines have no
    /// other finding: the two-stage way scans each of them twice (stage
    /// one, then verify over the output). Here the home directory where it
    /// opens that member ([`Engine::home_edits`]) is replaced first, into
    /// `homed`, and stage one reads `homed`: when it finds nothing, `homed`
    /// is the output and that scan was its verify scan (the scan is a pure
    /// function of the bytes it reads); when it finds something, the usual
    /// apply and verify follow on `homed`. True when it replaced.
    ///
    /// The output and the findings (`home_findings` reports them against
    /// `orig`) are the two-stage way's, because the replacement is made
    /// only where no rule reads those bytes otherwise: after plain JSON
    /// ([`plain_json_prefix`]), in a line with no PEM armour and no PEM
    /// block open, and with no known value over a home directory (nor a
    /// value the line itself gives: `line` goes the two-stage way then).
    /// `tests::home_first_redacts_as_the_two_stage_way` holds it to that on
    /// random transcript-shaped texts.
    #[inline(never)]
    fn home_first(&mut self, orig: &[u8], homed: &mut Vec<u8>) -> bool {
        let _t = timing::span(timing::Phase::HomeFirst);
        let s = self.scanner;
        if !self.home_first_on || self.pem_open > 0 || s.engine.identity.homes.is_empty() {
            return false;
        }
        s.engine.home_edits(orig, &mut self.home_hits);
        if self.home_hits.is_empty() {
            return false;
        }
        // A PEM armour line reads the rest of its line as key body, whose
        // alphabet a path's bytes belong to. And the `"cwd"` member's
        // string is where every layer's rules see a string only after
        // plain JSON: a decoded layer turns escaped quotes into plain ones
        // (a rule reading JSON nested in a string before it could run on
        // into its value), and text that is not JSON has no strings.
        static ARMOUR: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"-----"));
        if ARMOUR.find(orig).is_some() {
            return false;
        }
        // The JSON stays valid only with a placeholder a string can hold.
        let metas = &s.engine.metas;
        if self.home_hits.iter().any(|h| {
            metas[h.meta]
                .placeholder
                .iter()
                .any(|&b| b == b'"' || b == b'\\' || b < 0x20)
        }) {
            return false;
        }
        self.home_hits
            .retain(|h| plain_json_prefix(&orig[..h.start - engine::CWD_MEMBER.len()]));
        if self.home_hits.is_empty() {
            return false;
        }
        self.home_views_built = false;
        let known = &self.known;
        if !known.is_empty()
            && over_edits(
                orig,
                &self.home_hits,
                (&mut self.home_views, &mut self.home_views_built),
                known.max_len(),
                |hay, before, at| known.find_starting_before(hay, before, |a, b, _| at(a, b)),
            )
        {
            return false;
        }
        homed.clear();
        engine::apply_into(
            &s.engine.metas,
            orig,
            &mut self.home_hits,
            homed,
            &mut self.home_merged,
        );
        debug_assert_eq!(self.home_merged, self.home_hits);
        self.homed_lines += 1;
        true
    }

    /// The findings of a line redacted home directory first, against the
    /// line as it came: the home edits and stage one's hits (mapped back
    /// through the edits) merged as one [`engine::apply`] over `orig`
    /// merges them — a hit over a home placeholder covers that home
    /// directory, and its output is the output already made.
    #[inline(never)]
    fn home_findings(&mut self, orig: &[u8]) {
        let s = self.scanner;
        let lines = self.lines;
        if self.hits.is_empty() {
            self.findings
                .extend(self.home_hits.iter().map(|m| s.finding(m, lines)));
            return;
        }
        let metas = &s.engine.metas;
        let mut all = std::mem::take(&mut self.home_all);
        all.clear();
        all.extend_from_slice(&self.home_hits);
        for h in &self.hits {
            let (start, end) = home_unmap(metas, &self.home_hits, h.start, h.end);
            all.push(Hit {
                start,
                end,
                meta: h.meta,
            });
        }
        let mut text = std::mem::take(&mut self.home_text);
        text.clear();
        engine::apply_into(metas, orig, &mut all, &mut text, &mut self.home_merged);
        debug_assert_eq!(text, self.out, "home-first output");
        self.findings
            .extend(self.home_merged.iter().map(|m| s.finding(m, lines)));
        self.home_all = all;
        self.home_text = text;
    }

    /// The findings of the last line [`LineRedactor::line`] redacted (its
    /// `line` is the 1-based line number in the stream).
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Lines redacted so far.
    pub fn lines(&self) -> usize {
        self.lines
    }
}

/// Does some text `find` reports (`find(haystack, before, at)` calls
/// `at(start, end)` for each occurrence, and may skip those starting at or
/// after `before`), of at most `reach` bytes, stand in `orig` or in one of
/// its decoded layers over one of the home `edits`? Such an occurrence
/// lies within `reach` of an edit and starts before the last edit's end;
/// when that stretch holds no escape, every layer holds the raw bytes there
/// at the same offsets (the line before the last edit's end is plain:
/// `plain_json_prefix`), so the raw stretch is all to search. Otherwise
/// each layer is searched, its occurrences mapped to raw bytes; `views`
/// (and whether they are built from `orig` yet) are built once per line.
/// Offsets below the last edit's end are the same in every layer, so
/// `before` holds there too: the search reads the whole layer only to
/// compare a candidate, not to look for one.
fn over_edits(
    orig: &[u8],
    edits: &[Hit],
    views: (&mut view::Views, &mut bool),
    reach: usize,
    mut find: impl FnMut(&[u8], usize, &mut dyn FnMut(usize, usize)),
) -> bool {
    let over = |a: usize, b: usize| edits.iter().any(|h| a < h.end && h.start < b);
    let (Some(first), Some(last)) = (edits.first(), edits.last()) else {
        return false;
    };
    let (lo, hi) = (
        first.start.saturating_sub(reach),
        (last.end + reach).min(orig.len()),
    );
    let mut hit = false;
    if memchr::memchr2(b'\\', b'%', &orig[lo..hi]).is_none() {
        find(&orig[lo..hi], last.end - lo, &mut |a, b| {
            hit |= over(lo + a, lo + b)
        });
        return hit;
    }
    let (views, built) = views;
    if !*built {
        views.build(orig);
        *built = true;
    }
    // Up to the last edit's end the line is plain (no escape, no `%`; the
    // edits' own bytes are checked too, a home directory may hold a `%`),
    // so every layer has the raw bytes there, at the same offsets.
    let same = if memchr::memchr2(b'\\', b'%', &orig[..last.end]).is_none() {
        last.end
    } else {
        usize::MAX
    };
    for k in 0..=views.count() {
        let layer = if k == 0 { orig } else { views.layer(k) };
        find(layer, same, &mut |a, b| {
            let (a, b) = if k == 0 {
                (a, b)
            } else {
                views.to_raw(k, a, b)
            };
            hit |= over(a, b);
        });
        if hit {
            return true;
        }
    }
    false
}

/// Is `b` the opening of a JSON object up to where its next member's key
/// starts — `{`, then `"key":value,` members whose values are strings,
/// numbers or literals — with no escape (`\`, `%`) anywhere, so that every
/// decoded layer holds the same bytes? Nested values answer false.
fn plain_json_prefix(b: &[u8]) -> bool {
    if b.first() != Some(&b'{') || memchr::memchr2(b'\\', b'%', b).is_some() {
        return false;
    }
    let string = |i: usize| -> Option<usize> {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        memchr::memchr(b'"', &b[i + 1..]).map(|q| i + q + 2)
    };
    let mut i = 1;
    while i < b.len() {
        let Some(j) = string(i) else {
            return false;
        };
        if b.get(j) != Some(&b':') {
            return false;
        }
        let k = match string(j + 1) {
            Some(k) => k,
            None => {
                let n = b[j + 1..]
                    .iter()
                    .take_while(|&&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'+' | b'-'))
                    .count();
                if n == 0 {
                    return false;
                }
                j + 1 + n
            }
        };
        if b.get(k) != Some(&b',') {
            return false;
        }
        i = k + 1;
    }
    true
}

/// A span of a line with its home `edits` applied (sorted, disjoint,
/// against the line as it came) mapped back to the line as it came: a
/// position inside a placeholder maps to its edit's start (a span's start)
/// or end (a span's end), so a span over a placeholder covers the whole
/// home directory it replaced.
fn home_unmap(metas: &[Meta], edits: &[Hit], start: usize, end: usize) -> (usize, usize) {
    let map = |p: usize, is_end: bool| {
        // Output position minus input position before the edit at hand.
        let mut d: isize = 0;
        for h in edits {
            let at = (h.start as isize + d) as usize;
            let len = metas[h.meta].placeholder.len();
            if p < at || (is_end && p == at) {
                break;
            }
            if p < at + len || (is_end && p == at + len) {
                return if is_end { h.end } else { h.start };
            }
            d += len as isize - (h.end - h.start) as isize;
        }
        (p as isize - d) as usize
    };
    (map(start, false), map(end, true))
}

/// One line of [`Scanner::redact_stream`]: redacted, written, counted.
fn emit_line(
    lines: &mut LineRedactor<'_>,
    l: &[u8],
    w: &mut impl Write,
    report: &mut Report,
) -> Result<(), RedactError> {
    report.lines += 1;
    report.bytes_in += l.len() as u64;
    let out = lines.line(l)?;
    w.write_all(out)
        .map_err(|e| io_err("writing redacted output", e))?;
    report.bytes_out += out.len() as u64;
    // Moved, not cloned: the line's findings are cleared when the next
    // line starts (two string copies per finding were ~4 % of a scan).
    report.finding_count += lines.findings.len();
    let room = MAX_REPORT_FINDINGS.saturating_sub(report.findings.len());
    report.findings.extend(lines.findings.drain(..).take(room));
    Ok(())
}

/// `read_until` with the line cap enforced while reading, so a newline-free
/// stream cannot grow the buffer without bound.
fn read_line_capped(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    line: usize,
) -> Result<usize, RedactError> {
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err("reading input", e)),
        };
        if avail.is_empty() {
            return Ok(buf.len());
        }
        let (take, done) = match memchr::memchr(b'\n', avail) {
            Some(p) => (p + 1, true),
            None => (avail.len(), false),
        };
        if buf.len() + take > MAX_LINE_BYTES {
            return Err(RedactError::LineTooLong {
                line,
                cap: MAX_LINE_BYTES,
            });
        }
        buf.extend_from_slice(&avail[..take]);
        r.consume(take);
        if done {
            return Ok(buf.len());
        }
    }
}

/// Hooks for `redact-bench` to time one part of the engine alone.
pub mod bench {
    use super::*;

    /// Walks the scanner's keyword automaton over each line of `text`, as
    /// stage one walks a line it scans whole, and returns how many keyword
    /// occurrences it found.
    pub fn keyword_walk(s: &Scanner, text: &[u8]) -> usize {
        let (mut bufs, mut out) = (LaneBufs::default(), Vec::new());
        let mut n = 0;
        for line in split_lines(text) {
            out.clear();
            s.engine.keywords.find_all(line, &mut bufs, &mut out);
            n += out.len();
        }
        n
    }
}

/// Invariant check shared by the fuzz target and the seed-corpus test:
/// never panics on its own; panics (with a reason, never the input) when the
/// engine breaks a promise.
pub mod fuzzing {
    use super::*;
    use std::sync::OnceLock;

    fn scanner() -> &'static Scanner {
        static S: OnceLock<Scanner> = OnceLock::new();
        S.get_or_init(|| {
            let id = Identity {
                home: Some("/home/fuzzer".into()),
                user: Some("fuzzer".into()),
                git_names: vec!["Fuzz Person".into()],
                git_emails: vec!["fuzz@example.org".into()],
                github_owner: Some("fuzzowner".into()),
            };
            Scanner::new(id, None)
        })
    }

    /// Redacts `data` (lossily decoded) and checks: output passes verify,
    /// is a fixed point, keeps valid JSON lines valid, and the stream form
    /// agrees on refusal.
    pub fn check(data: &[u8]) {
        let s = scanner();
        let text = String::from_utf8_lossy(data);
        match s.redact(&text) {
            Ok(r) => {
                for f in s.scan(&r.text) {
                    assert!(
                        f.severity != Severity::Block,
                        "redacted output still has a blocking {} finding",
                        f.kind
                    );
                }
                let again = s
                    .redact(&r.text)
                    .expect("redacting redacted text must succeed");
                assert_eq!(again.text, r.text, "redaction is not idempotent");
                for (a, b) in split_lines(text.as_bytes()).zip(split_lines(r.text.as_bytes())) {
                    if serde_json::from_slice::<serde_json::Value>(a).is_ok() {
                        assert!(
                            serde_json::from_slice::<serde_json::Value>(b).is_ok(),
                            "valid JSON line became invalid"
                        );
                    }
                }
            }
            Err(e) => assert!(
                e.is_deterministic() || matches!(e, RedactError::Io { .. }),
                "unexpected error {e}"
            ),
        }
        let mut sink = Vec::new();
        let _ = s.redact_stream(data, &mut sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`verify_windows`] with its member snap as first written, a test
    /// per byte: the memchr snap must give the same windows.
    fn verify_windows_bytewise(
        line: &[u8],
        changed: &[(usize, usize)],
        allowed: &[(usize, usize)],
    ) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        windows_snapped(
            line,
            changed,
            allowed,
            |line, s, e| {
                let a0 = s.saturating_sub(VERIFY_CONTEXT);
                let a = (a0.saturating_sub(VERIFY_CONTEXT)..=a0)
                    .rev()
                    .find(|&i| member_start(line, i))
                    .map_or(a0.saturating_sub(VERIFY_CONTEXT), |i| i - 1);
                let b0 = (e + VERIFY_CONTEXT).min(line.len());
                let b = (b0..(b0 + VERIFY_CONTEXT).min(line.len()))
                    .find(|&i| member_start(line, i))
                    .map_or((b0 + VERIFY_CONTEXT).min(line.len()), |i| i - 1);
                (a, b)
            },
            &mut out,
        );
        out
    }

    #[test]
    fn verify_windows_snap_to_the_same_members_as_a_byte_walk() {
        let mut rng = testkit::XorShift(0x5eed_1234);
        let parts: &[&[u8]] = &[
            b"\"",
            b"{\"",
            b",\"",
            b"[\"",
            b"\\\"",
            b"x",
            b"ab cd ",
            b"\\n",
            b"}",
            b"]",
            b":",
            b",",
            "é".as_bytes(),
            b"0123456789abcdef",
        ];
        for round in 0..3000 {
            let n = 1 + (rng.next() % 900) as usize;
            let line = rng.concat(parts, n);
            if line.is_empty() {
                continue;
            }
            let len = line.len();
            let mut changed = Vec::new();
            let mut at = (rng.next() % (len as u64).min(4000)) as usize;
            while at < len && changed.len() < 6 {
                let end = (at + 1 + (rng.next() % 40) as usize).min(len);
                changed.push((at, end));
                at = end + (rng.next() % 3000) as usize;
            }
            let mut allowed = Vec::new();
            let mut at = (rng.next() % 2000) as usize;
            while at < len && allowed.len() < 4 && round % 2 == 0 {
                let end = (at + 1 + (rng.next() % 600) as usize).min(len);
                allowed.push((at, end));
                at = end + 1 + (rng.next() % 2000) as usize;
            }
            let mut windows = Vec::new();
            verify_windows(&line, &changed, &allowed, &mut windows);
            assert_eq!(
                windows,
                verify_windows_bytewise(&line, &changed, &allowed),
                "round {round}"
            );
        }
    }

    fn meta(placeholder: &[u8]) -> engine::Meta {
        engine::Meta {
            id: "t".into(),
            kind: "t".into(),
            severity: Severity::Block,
            class: Class::Secret,
            placeholder: placeholder.to_vec(),
        }
    }

    /// `json_walk` as it was written first (one memchr call per string):
    /// the reference the one-pass walk is held to.
    fn json_walk_by_strings(
        b: &[u8],
        at: &mut usize,
        to: usize,
        in_str: &mut bool,
        may_close: bool,
    ) -> bool {
        while *at < to {
            let seg = &b[*at..to];
            if !*in_str {
                match memchr::memchr(b'"', seg) {
                    Some(q) => {
                        *at += q + 1;
                        *in_str = true;
                    }
                    None => *at = to,
                }
                continue;
            }
            match memchr::memchr2(b'"', b'\\', seg) {
                None => *at = to,
                Some(q) => {
                    let pos = *at + q;
                    if b[pos] == b'"' {
                        if !may_close {
                            return false;
                        }
                        *in_str = false;
                        *at = pos + 1;
                    } else {
                        *at = pos + escape_len(&b[pos..]);
                    }
                }
            }
        }
        *at == to
    }

    /// The one-pass walk agrees with the reference on random JSON-ish
    /// texts (quotes, escapes, surrogate pairs cut anywhere), from every
    /// state, to every end, closing allowed or not: the answer, and on
    /// success the position and string state it leaves.
    #[test]
    fn json_walk_agrees_with_the_walk_by_strings() {
        let parts: &[&[u8]] = &[
            b"\"",
            b"\\\"",
            b"\\\\",
            b"\\n",
            b"\\u00e9",
            b"\\uD83D\\uDE00",
            b"\\uD83D",
            b"\\",
            b"a",
            b"key",
            b":",
            b",",
            b"{",
            b"}",
            b" ",
            b"\xC3\xA9",
        ];
        let mut rng = crate::testkit::XorShift(0x2545_F491_4F6C_DD1Du64);
        let mut checked = 0;
        for _ in 0..20_000 {
            let n = 1 + (rng.next() % 14) as usize;
            let text = rng.concat(parts, n);
            let from = (rng.next() as usize) % (text.len() + 1);
            let to = from + (rng.next() as usize) % (text.len() - from + 1);
            for start_in in [false, true] {
                for may_close in [false, true] {
                    let (mut a1, mut s1) = (from, start_in);
                    let (mut a2, mut s2) = (from, start_in);
                    let r1 = json_walk(&text, &mut a1, to, &mut s1, may_close);
                    let r2 = json_walk_by_strings(&text, &mut a2, to, &mut s2, may_close);
                    assert_eq!(r1, r2, "{:?} {from}..{to}", String::from_utf8_lossy(&text));
                    if r1 {
                        assert_eq!((a1, s1), (a2, s2));
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    /// The parse-free JSON check: it may only say "safe" when the edited
    /// line really parses, so every case where it says so is parsed here.
    #[test]
    fn edits_inside_strings_only_when_output_parses() {
        let metas = [meta(b"[REDACTED:t]"), meta(b"~"), meta(b"a\"b")];
        let line = br#"{"cwd":"/home/zed/x","k":"a\"b\\c\u00e9d","n":12,"s":"h\u00e9llo"}"#;
        let find = |n: &[u8]| line.windows(n.len()).position(|w| w == n).unwrap();
        let c = find(b"/home/zed");
        let q = find(br#"a\"b"#);
        let u = find(br"\u00e9d");
        let n = find(b"12");
        let cases: Vec<(Vec<Hit>, bool)> = vec![
            (
                vec![Hit {
                    start: c,
                    end: c + 9,
                    meta: 1,
                }],
                true,
            ),
            (
                vec![
                    Hit {
                        start: c,
                        end: c + 9,
                        meta: 0,
                    },
                    Hit {
                        start: q,
                        end: q + 4,
                        meta: 0,
                    },
                ],
                true,
            ),
            // Placeholder with a quote.
            (
                vec![Hit {
                    start: c,
                    end: c + 9,
                    meta: 2,
                }],
                false,
            ),
            // Cuts the `\"` escape.
            (
                vec![Hit {
                    start: q + 2,
                    end: q + 4,
                    meta: 0,
                }],
                false,
            ),
            // Cuts inside `\u00e9`.
            (
                vec![Hit {
                    start: u + 2,
                    end: u + 7,
                    meta: 0,
                }],
                false,
            ),
            // Whole escape is fine.
            (
                vec![Hit {
                    start: u,
                    end: u + 6,
                    meta: 0,
                }],
                true,
            ),
            // Outside any string (a number), and across a closing quote.
            (
                vec![Hit {
                    start: n,
                    end: n + 2,
                    meta: 0,
                }],
                false,
            ),
            (
                vec![Hit {
                    start: c,
                    end: c + 12,
                    meta: 0,
                }],
                false,
            ),
            // A key's content is still string content.
            (
                vec![Hit {
                    start: 2,
                    end: 5,
                    meta: 0,
                }],
                true,
            ),
        ];
        for (spans, want) in cases {
            assert_eq!(
                edits_inside_strings(&metas, line, &spans),
                want,
                "{spans:?}"
            );
            let mut out = Vec::new();
            let mut h = spans.clone();
            engine::apply(&metas, line, &mut h, &mut out);
            if want {
                assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok());
            }
        }
        // Exhaustive single spans over a line with every escape kind: a
        // "safe" answer always parses.
        let line =
            r#"{"a":"x\\y\"z\u00e9\ud83d\ude00 w","b":[1,"c\/d"],"e":{"f":"gé€"}}"#.as_bytes();
        for s in 0..line.len() {
            for e in s + 1..=line.len() {
                let spans = [Hit {
                    start: s,
                    end: e,
                    meta: 0,
                }];
                if edits_inside_strings(&metas, line, &spans) {
                    let mut out = Vec::new();
                    engine::apply(&metas, line, &mut spans.clone(), &mut out);
                    // Both the check's own parse and a full one.
                    assert!(
                        serde_json::from_slice::<serde::de::IgnoredAny>(&out).is_ok()
                            && serde_json::from_slice::<serde_json::Value>(&out).is_ok(),
                        "span {s}..{e} said safe but broke JSON"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod reuse_tests {
    use super::*;

    /// Each line of a walked block takes exactly the keyword matches a
    /// walk of that line alone finds — lines taken in order, some skipped,
    /// one taken twice, one taken out of order.
    #[test]
    fn block_matches_are_each_lines_own() {
        let s = Scanner::new(zed_identity(), None);
        let kw = &s.engine.keywords;
        let parts: &[&[u8]] = &[
            b"token",
            b"password",
            b"key",
            b" ",
            b"=",
            b"\n",
            b"x",
            b"ghp_",
            b"secret",
            b"\n\n",
        ];
        let mut rng = testkit::XorShift(0x0b10_c4ed);
        for round in 0..300 {
            let n = 20 + (rng.next() % 120) as usize;
            let mut region = rng.concat(parts, n);
            region.push(b'\n');
            if region.len() < MIN_BLOCK_BYTES {
                region.extend(std::iter::repeat_n(b'x', MIN_BLOCK_BYTES));
                region.push(b'\n');
            }
            let mut lr = s.line_redactor().unwrap();
            lr.begin_block(&region);
            assert!(lr.block.is_some(), "round {round}: not walked as a block");
            let lines: Vec<&[u8]> = split_lines(&region).collect();
            let mut order: Vec<usize> = (0..lines.len())
                .filter(|_| !rng.next().is_multiple_of(4))
                .collect();
            if order.len() > 2 {
                let i = (rng.next() as usize) % order.len();
                order.insert(i, order[i]);
                let j = (rng.next() as usize) % (order.len() - 1);
                order.swap(j, j + 1);
            }
            for &i in &order {
                let line = lines[i];
                let (body, _) = strip_nl(line);
                lr.take_block_matches(line, body.len());
                let mut alone = Vec::new();
                kw.find_all(body, &mut LaneBufs::default(), &mut alone);
                assert_eq!(
                    lr.scratch.pre_kw,
                    alone,
                    "round {round}, line {i}: {:?}",
                    String::from_utf8_lossy(body)
                );
            }
        }
    }

    /// Home directory first gives what the two-stage way gives, line by
    /// line (output, findings, refusals), in the stream: on chosen lines —
    /// a value found earlier that a home directory overlaps, secrets over
    /// and next to one, escaped and cased spellings — and on random texts
    /// built from those pieces.
    #[test]
    fn home_first_redacts_as_the_two_stage_way() {
        let s = Scanner::new(zed_identity(), None);
        let tok = format!("ghp_{}", "aB3".repeat(12));
        let pieces: Vec<String> = [
            "/home/zed",
            "/home/zed/src/app",
            "-home-zed-src",
            "/HOME/ZED",
            "\\/home\\/zed",
            "%2Fhome%2Fzed",
            "/home/zedx",
            "/home/zed%41",
            "/home/zed\\u0041",
            "\"",
            "\\\"",
            " ",
            "=",
            ":",
            "/",
            ",",
            "x",
            "\\n",
            "password=",
            "password: ",
            "token=",
            &tok,
            "zed",
            "Zed Quimby",
            "Secr3tV4lue99",
            "{\"cwd\":\"",
            "\"cwd\":\"/home/zed",
            "\"cwd\":\"/home/zed/src\"",
            ",\"cwd\":\"",
            "\"}",
            "(",
            "`",
            "-----BEGIN RSA PRIVATE KEY-----",
        ]
        .iter()
        .map(|p| p.to_string())
        .collect();
        let chosen = [
            "password=zed/Secr3tV4lue99\n{\"cwd\":\"/home/zed/Secr3tV4lue99\"}\n".to_string(),
            "password=Secr3tV4lue99\n\"/home/zed\" Secr3tV4lue99 /home/zed\n".to_string(),
            format!("{{\"cwd\":\"/home/zed\",\"t\":\"token={tok} /home/zed/x\"}}\n"),
            format!("cd /home/zed && export GITHUB_TOKEN={tok}/home/zed\n"),
            "{\"cwd\":\"/home/zed\",\"a\":\"\\/home\\/zed and /HOME/ZED and -home-zed-src\"}\n"
                .to_string(),
            "-----BEGIN RSA PRIVATE KEY-----\n/home/zed\nQUJD\n-----END RSA PRIVATE KEY-----\n"
                .to_string(),
        ];
        let refs: Vec<&[u8]> = pieces.iter().map(|p| p.as_bytes()).collect();
        let mut rng = testkit::XorShift(0x40e_f125);
        let mut texts: Vec<String> = chosen.to_vec();
        for _ in 0..40000 {
            let mut t = Vec::new();
            for _ in 0..3 {
                let n = 1 + (rng.next() % 12) as usize;
                // Mostly transcript-shaped: a JSON object with a `cwd`
                // member, the home directory and random pieces around it.
                match rng.next() % 6 {
                    0 => {}
                    4 | 5 => {
                        // Valid JSON: random pieces as the values of members,
                        // the `cwd` member anywhere among them.
                        // Half the time a home directory a `cwd` has.
                        let pick = if rng.next().is_multiple_of(2) { 2 } else { 9 };
                        let mut home = rng.concat(&refs[..pick], 1);
                        home.extend(rng.concat(&refs, n / 3));
                        let at = (rng.next() % 4) as usize;
                        t.push(b'{');
                        for (i, k) in ["type", "a", "password", "content"].iter().enumerate() {
                            if i == at {
                                t.extend_from_slice(b"\"cwd\":");
                                let v = String::from_utf8_lossy(&home).into_owned();
                                t.extend(serde_json::to_vec(&v).unwrap());
                                t.push(b',');
                            }
                            let v = String::from_utf8_lossy(&rng.concat(&refs, n / 2)).into_owned();
                            t.extend(serde_json::to_vec(k).unwrap());
                            t.push(b':');
                            t.extend(serde_json::to_vec(&v).unwrap());
                            t.push(if i == 3 { b'}' } else { b',' });
                        }
                        t.push(b'\n');
                        continue;
                    }
                    1 => {
                        t.extend_from_slice(b"{\"cwd\":\"");
                        t.extend(rng.concat(&refs[..9], 1));
                    }
                    _ => {
                        t.push(b'{');
                        t.extend(rng.concat(&refs, n / 2));
                        t.extend_from_slice(b",\"cwd\":\"/home/zed");
                    }
                }
                t.extend(rng.concat(&refs, n));
                t.push(b'\n');
            }
            texts.push(String::from_utf8(t).unwrap());
        }
        let mut homed = 0;
        for text in &texts {
            let mut a = s.line_redactor().unwrap();
            let mut b = s.line_redactor().unwrap();
            b.home_first_on = false;
            for line in split_lines(text.as_bytes()) {
                let x = a.line(line).map(|o| o.to_vec());
                let y = b.line(line).map(|o| o.to_vec());
                match (&x, &y) {
                    (Ok(x), Ok(y)) => {
                        assert_eq!(
                            String::from_utf8_lossy(x),
                            String::from_utf8_lossy(y),
                            "{text:?}"
                        );
                        assert_eq!(a.findings(), b.findings(), "{text:?}");
                    }
                    (Err(_), Err(_)) => break,
                    _ => panic!("{text:?}: home first {x:?}, two-stage {y:?}"),
                }
            }
            homed += a.homed_lines;
            assert_eq!(b.homed_lines, 0);
        }
        assert!(homed > 4000, "home first taken on {homed} lines");
    }

    #[test]
    fn home_unmap_maps_through_every_edit() {
        let s = Scanner::new(zed_identity(), None);
        let metas = &s.engine.metas;
        let line = br#"{"a":1,"cwd":"/home/zed","b":2,"cwd":"/home/zed/c","d":3}"#;
        let mut edits = Vec::new();
        s.engine.home_edits(line, &mut edits);
        // The first `cwd` member only (the second stays for the scan).
        assert_eq!(edits.len(), 1);
        let meta = edits[0].meta;
        edits.push(Hit {
            start: 38,
            end: 47,
            meta,
        });
        let mut out = Vec::new();
        engine::apply(metas, line, &mut edits.clone(), &mut out);
        assert_eq!(out, br#"{"a":1,"cwd":"~","b":2,"cwd":"~/c","d":3}"#);
        // Before, over and after each placeholder (`~` at 14 and 30 of the
        // output, `/home/zed` at 14..23 and 38..47 of the line).
        assert_eq!(home_unmap(metas, &edits, 0, 14), (0, 14));
        assert_eq!(home_unmap(metas, &edits, 14, 15), (14, 23));
        assert_eq!(home_unmap(metas, &edits, 13, 16), (13, 24));
        assert_eq!(home_unmap(metas, &edits, 15, 30), (23, 38));
        assert_eq!(home_unmap(metas, &edits, 16, 32), (24, 48));
        assert_eq!(home_unmap(metas, &edits, 31, 33), (47, 49));
        assert_eq!(home_unmap(metas, &edits, 14, 14), (14, 14));
    }

    /// Verify's scan with stage one's keyword matches to reuse finds exactly
    /// what a fresh scan finds, for outputs edited anywhere: the real
    /// placeholders, edits that create keywords and identity words across
    /// their edges, edits inside escapes, and lines cut into several
    /// segments by long allowlisted values.
    #[test]
    fn scan_with_prior_matches_equals_fresh_scan() {
        let id = zed_identity();
        let s = Scanner::new(id, None);
        let e = &s.engine;
        let sig = "A".repeat(300);
        let lines: Vec<String> = vec![
            r#"{"cwd":"/home/zed/src/app","message":{"content":"token=Zq8vR2mK7pL4xN9w ok zed"}}"#.into(),
            format!(r#"{{"cwd":"/home/zed","signature":"{sig}","t":"ghp_{}","u":"Zed Quimby"}}"#, "aB3".repeat(13)),
            r#"{"a":"{\"cmd\":\"export password=hunter22 && curl http://u:pw9x@10.0.0.7/\"}","cwd":"/home/zed"}"#.into(),
            format!("plain text /home/zed and sk-ant-api03-{} and zed.quimby@example.org", "x1Y".repeat(12)),
            format!(r#"{{"x":"{}","cwd":"/home/zed/{}"}}"#, "q".repeat(900), "w".repeat(700)),
        ];
        let edits: &[(usize, usize, &str)] = &[
            (0, 0, ""),
            (8, 17, "~"),
            (0, 5, "[REDACTED:t]"),
            (20, 20, "secret="),
            (30, 31, "ze"),
            (3, 9, "d"),
            (1, 1000, "/home/"),
        ];
        for line in &lines {
            let raw = line.as_bytes();
            let mut stage = engine::Scratch::default();
            let (mut pem, mut found, mut hits) = (0, Vec::new(), Vec::new());
            // Values to sweep for that the edits below create: whole, and
            // across an edit's edge (`zed/src` + `QQ`).
            let mut known = Known::default();
            for (i, v) in ["KNOWN-VALUE-1", "zed/srcQQ", "QQ/app\",\"me"]
                .iter()
                .enumerate()
            {
                known.add(v.as_bytes(), i);
            }
            e.scan_line(raw, &mut stage, &known, &mut pem, &mut found, &mut hits);
            let mut outputs: Vec<Vec<u8>> = Vec::new();
            let mut out = Vec::new();
            let merged = engine::apply(&e.metas, raw, &mut hits.clone(), &mut out);
            // The output's views derived from stage one's give the same scan.
            let placed: Vec<(usize, usize, &[u8])> = merged
                .iter()
                .map(|h| (h.start, h.end, &e.metas[h.meta].placeholder[..]))
                .collect();
            let mut derived = engine::Scratch::default();
            derived.derive_views(&stage, &placed);
            let (mut p0, mut f0, mut h0) = (0, Vec::new(), Vec::new());
            e.scan_line(&out, &mut derived, &known, &mut p0, &mut f0, &mut h0);
            let mut fresh = engine::Scratch::default();
            let (mut p2, mut f2, mut h2) = (0, Vec::new(), Vec::new());
            e.scan_line(&out, &mut fresh, &known, &mut p2, &mut f2, &mut h2);
            assert_eq!(
                (h0, f0, p0),
                (h2, f2, p2),
                "{}",
                String::from_utf8_lossy(&out)
            );
            outputs.push(out);
            for at in memchr::memmem::find_iter(raw, b"src").map(|i| i + 3) {
                for put in [&b"QQ"[..], b"KNOWN-VALUE-1"] {
                    let mut o = raw[..at].to_vec();
                    o.extend_from_slice(put);
                    o.extend_from_slice(&raw[at..]);
                    outputs.push(o);
                }
            }
            for &(a, b, put) in edits {
                let a = a.min(raw.len());
                let b = b.clamp(a, raw.len());
                let mut o = raw[..a].to_vec();
                o.extend_from_slice(put.as_bytes());
                o.extend_from_slice(&raw[b..]);
                outputs.push(o);
            }
            for o in outputs {
                let mut with = engine::Scratch::default();
                std::mem::swap(&mut with.prior, &mut stage.cache);
                let (mut p1, mut f1, mut h1) = (0, Vec::new(), Vec::new());
                e.scan_line(&o, &mut with, &known, &mut p1, &mut f1, &mut h1);
                std::mem::swap(&mut with.prior, &mut stage.cache);
                let mut fresh = engine::Scratch::default();
                let (mut p2, mut f2, mut h2) = (0, Vec::new(), Vec::new());
                e.scan_line(&o, &mut fresh, &known, &mut p2, &mut f2, &mut h2);
                assert_eq!(h1, h2, "{}", String::from_utf8_lossy(&o));
                assert_eq!(f1, f2);
                assert_eq!(p1, p2);
            }
        }
    }
}

#[cfg(test)]
mod zone_tests {
    use super::*;

    /// Verify re-runs a rule only between two of its stop bytes around the
    /// edits (`engine::rule_zone`), reusing stage one's run elsewhere. Its
    /// scan must equal a fresh scan — hits, found values, PEM state — for
    /// outputs edited anywhere: the real redaction of each text (as
    /// `LineRedactor` verifies it, views derived) and random splices of
    /// placeholders and rule fragments at random bytes, raw and in JSON.
    #[test]
    fn zoned_scan_equals_fresh_scan() {
        let id = zed_identity();
        let s = Scanner::new(id, None);
        let e = &s.engine;
        let tok = format!("ghp_{}", "aB3x9Q".repeat(6));
        let frags: Vec<String> = [
            "/home/zed",
            "/home/zed/src/app",
            "zed",
            "Zed Quimby",
            " ",
            " ",
            r"\n",
            r#"\""#,
            "\"",
            "'",
            ":",
            "=",
            ",",
            ".",
            "-",
            "/",
            "@",
            "token",
            "secret",
            "password",
            "api_key",
            "Password: ",
            "hunter2x9",
            "Zq8vR2mK7pL4xN9w",
            "db-1.internal",
            "nas.local",
            ".local",
            ".lan",
            "box",
            "10.0.0.7",
            "192.168.1.20",
            "10.",
            "0.",
            "7",
            "aa:bb:cc:dd:ee:0f",
            "fe80::1:2",
            "AKIAIOSFODNN7REALKEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYREALKEY12",
            "https://",
            "u:",
            "pw9x@",
            "example.com",
            "login",
            "user",
            "is",
            " / ",
            "export ",
            "API_KEY=",
            "sk-proj-",
            "xoxb-",
            "eyJhbGciOiJIUzI1NiJ9",
            "Bearer ",
            "curl -u bob:",
            "machine api.heroku.com login zed password ",
            "~",
            "[REDACTED:password]",
            "{",
            "}",
            r"\u00e9",
            "é",
            "%40",
            "-----BEGIN ",
            "PRIVATE KEY-----",
            "MAC ",
            "host ",
        ]
        .iter()
        .map(|x| x.to_string())
        .chain([tok.clone()])
        .collect();
        let puts: &[&str] = &[
            "~",
            "[REDACTED:password]",
            "[REDACTED:hostname]",
            "[REDACTED:user-name]",
            "[REDACTED:github-token]",
            ".local",
            "10.0",
            "x",
            "",
            "\"",
            " ",
            "token=",
        ];
        let mut rng = crate::testkit::XorShift(0x9E37_79B9_7F4A_7C15u64);
        let mut next = move || rng.next();
        let before = engine::ZONED.load(std::sync::atomic::Ordering::Relaxed);
        let mut checked = 0;
        for round in 0..3000 {
            let n = 3 + (next() % 30) as usize;
            let body: String = (0..n)
                .map(|_| frags[(next() % frags.len() as u64) as usize].as_str())
                .collect();
            let raw = if round % 2 == 0 {
                format!(
                    r#"{{"cwd":"/home/zed/src/app","sessionId":"a1b2c3d4","message":{{"content":"{body}"}},"usage":{{"input_tokens":12}}}}"#
                )
            } else {
                body
            };
            let raw = raw.as_bytes();
            let known = Known::default();
            let mut stage = engine::Scratch::default();
            let (mut pem, mut found, mut hits) = (0, Vec::new(), Vec::new());
            e.scan_line(raw, &mut stage, &known, &mut pem, &mut found, &mut hits);
            let mut outputs: Vec<(Vec<u8>, Option<Vec<Hit>>)> = Vec::new();
            if !hits.is_empty() {
                let mut out = Vec::new();
                let merged = engine::apply(&e.metas, raw, &mut hits.clone(), &mut out);
                outputs.push((out, Some(merged)));
            }
            for _ in 0..4 {
                let mut o = raw.to_vec();
                for _ in 0..1 + next() % 3 {
                    let at = (next() as usize) % (o.len() + 1);
                    let cut = ((next() % 12) as usize).min(o.len() - at);
                    let put = puts[(next() % puts.len() as u64) as usize];
                    o.splice(at..at + cut, put.bytes());
                }
                outputs.push((o, None));
            }
            for (o, merged) in outputs {
                let mut with = engine::Scratch::not_recording();
                if let Some(m) = &merged {
                    let placed: Vec<(usize, usize, &[u8])> = m
                        .iter()
                        .map(|h| (h.start, h.end, &e.metas[h.meta].placeholder[..]))
                        .collect();
                    with.derive_views(&stage, &placed);
                }
                std::mem::swap(&mut with.prior, &mut stage.cache);
                let (mut p1, mut f1, mut h1) = (0, Vec::new(), Vec::new());
                e.scan_line(&o, &mut with, &known, &mut p1, &mut f1, &mut h1);
                std::mem::swap(&mut with.prior, &mut stage.cache);
                let mut fresh = engine::Scratch::not_recording();
                let (mut p2, mut f2, mut h2) = (0, Vec::new(), Vec::new());
                e.scan_line(&o, &mut fresh, &known, &mut p2, &mut f2, &mut h2);
                let show = String::from_utf8_lossy(&o);
                assert_eq!(h1, h2, "{show}");
                assert_eq!(f1, f2, "{show}");
                assert_eq!(p1, p2, "{show}");
                checked += 1;
            }
        }
        let zoned = engine::ZONED.load(std::sync::atomic::Ordering::Relaxed) - before;
        assert!(checked > 10000, "{checked}");
        assert!(zoned > 20000, "zones used only {zoned} times");
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;

    /// Windowed rules (`engine::keyword_windows`) find exactly what a
    /// search of the whole segment finds, on random texts built from their
    /// keywords, names, values and every kind of byte around them, raw and
    /// JSON-escaped, and on texts redacted and verified.
    #[test]
    fn windowed_scan_equals_whole_scan() {
        let id = Identity {
            home: Some("/home/zed".into()),
            user: Some("zed".into()),
            ..Identity::default()
        };
        let windowed = Scanner::new(id.clone(), None);
        let mut whole = Scanner::new(id, None);
        assert_eq!(
            windowed.engine.windowed.iter().filter(|&&w| w).count(),
            rules::WINDOWED_RULES.len()
        );
        whole.engine.windowed = vec![false; whole.engine.windowed.len()];
        let parts: &[&str] = &[
            "zentrafy",
            "owlbot",
            "bscscan",
            "adobe",
            "my",
            "_",
            "-",
            ".",
            " ",
            "  ",
            "\t",
            "TOKEN",
            "token",
            "Secret",
            "SECRET",
            "key",
            "Key",
            "api",
            "ACCESS",
            "auth",
            "pat",
            "credentials",
            "=",
            ":",
            ":=",
            "=>",
            "\"",
            "\\\"",
            "'",
            "`",
            "abcdef0123456789",
            "Zq8vR2mK7pL4xN9wQ1",
            "1a2b3c4d5e6f7890abcdef",
            "xxxx",
            ",",
            "(",
            ")",
            ";",
            "!",
            "@",
            "db-1",
            ".internal",
            ".local",
            ".LAN",
            ".corp",
            ".home.arpa",
            ".fritz.box",
            "nas",
            "x",
            "\n",
            "é",
            "{",
            "}",
            "[",
            "]",
            "/",
            "settings",
            "sha512-",
            "$",
            "#",
            "0",
        ];
        let mut rng = crate::testkit::XorShift(0xA076_1D64_78BD_642Fu64);
        let mut next = || rng.next();
        let mut found = 0;
        let mut per_rule = vec![0usize; rules::WINDOWED_RULES.len()];
        let pick = |next: &mut dyn FnMut() -> u64, from: &[&'static str]| -> &'static str {
            from[(next() % from.len() as u64) as usize]
        };
        for round in 0..30000 {
            let n = 2 + (next() % 16) as usize;
            let mut text: String = (0..n)
                .map(|_| parts[(next() % parts.len() as u64) as usize])
                .collect();
            // Half the texts are shaped like each rule's matches, with
            // random pieces around and inside them.
            if round % 2 == 1 {
                let sp = [" ", "  ", "\t", "", "\n", ","];
                let v = [
                    "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
                    "Zq8vR2mK7pL4xN9wQ1abcdefXYZ0123456789ab",
                    "abc",
                    "1a2b3c4d5e6f7890abcdef01",
                ];
                let shaped = match (round / 2) % 12 {
                    0 => format!(
                        "aws{}configure{}set{}{}aws_secret_access_key{}{}{}",
                        pick(&mut next, &sp),
                        pick(&mut next, &sp),
                        pick(&mut next, &sp),
                        pick(&mut next, &["", "profile.", "default.x."]),
                        pick(&mut next, &sp),
                        pick(&mut next, &["", "\"", "'"]),
                        pick(&mut next, &v)
                    ),
                    1 => format!(
                        "{}{}{}",
                        pick(
                            &mut next,
                            &[
                                "Authorization: Bearer",
                                "bearer",
                                "authorization=token",
                                "BEARER"
                            ]
                        ),
                        pick(&mut next, &sp),
                        pick(&mut next, &v)
                    ),
                    2 => format!(
                        "{}{}{}{}{}",
                        pick(&mut next, &["zentrafy", "owlbot", "bscscan", "cloudplan"]),
                        pick(&mut next, &["_", "-", " ", ""]),
                        pick(
                            &mut next,
                            &["TOKEN", "secret", "api_key", "ACCESS_KEY", "Key"]
                        ),
                        pick(&mut next, &[" = ", ":", " ", "=\"", "-"]),
                        pick(&mut next, &v)
                    ),
                    3 => format!(
                        "{}{}{}{}{}{}{}",
                        pick(&mut next, &["", "\n", "\"", " "]),
                        pick(&mut next, &["", "export ", "  export\t"]),
                        pick(&mut next, &["DB_", "MY_", "", "app_"]),
                        pick(
                            &mut next,
                            &[
                                "PASSWORD", "PASSWD", "SECRET", "TOKEN", "API_KEY", "Token",
                                "password"
                            ]
                        ),
                        pick(&mut next, &["", "_X", "_1"]),
                        pick(&mut next, &["=", " = ", "\t=", ":"]),
                        pick(&mut next, &v)
                    ),
                    4 => format!(
                        "{}{}{}{}{}{}",
                        pick(
                            &mut next,
                            &["login", "Log in", "sign-in", "logon", "use", "LOGIN"]
                        ),
                        pick(&mut next, &[" ", " to the panel ", "\n", "\" ", " x"]),
                        pick(&mut next, &["with ", "as ", "using ", "", "with '"]),
                        pick(&mut next, &["bob:", "admin/", "ops@x.org:", "a\"b:"]),
                        pick(&mut next, &v),
                        pick(&mut next, &["", " to log in", " to sign in", "'", "."])
                    ),
                    6 => format!(
                        "{}({}{}{}{}{}",
                        pick(
                            &mut next,
                            &[
                                "set_password",
                                "x.setPassword",
                                ".password",
                                "with_password",
                                "smtp.login",
                                "new NetworkCredential",
                                "DriverManager.getConnection",
                                "pymysql.connect",
                                "ssh.connect"
                            ]
                        ),
                        pick(
                            &mut next,
                            &[
                                "",
                                "\"bob\", ",
                                "user, ",
                                "url, \"sa\", ",
                                "host, 22, \"root\", ",
                                "Some(",
                                "\n"
                            ]
                        ),
                        pick(&mut next, &["\"", "'", "b'"]),
                        pick(&mut next, &v),
                        pick(&mut next, &["\"", "'"]),
                        pick(&mut next, &[")", ", x)", ")\n", " )", "))"])
                    ),
                    7 => format!(
                        "{}{}{}{}{})",
                        pick(
                            &mut next,
                            &[
                                "cy.get('#password')",
                                "find_element(By.ID, \"password\")",
                                "page.type('#passwd', ",
                                "userEvent.type(getByLabelText(/password/i), ",
                                "page.locator(\"input[name=password]\")"
                            ]
                        ),
                        pick(
                            &mut next,
                            &[".type(", ".send_keys(", ".fill(", "", "\n.type("]
                        ),
                        pick(&mut next, &["\"", "'", "`"]),
                        pick(&mut next, &v),
                        pick(&mut next, &["\"", "'", "`"])
                    ),
                    8 => format!(
                        "{}{}{}{}{}",
                        pick(
                            &mut next,
                            &[
                                "process.env.JWT_SECRET",
                                "getenv('DB_PASS')",
                                "os.environ.get(\"API_TOKEN\")",
                                "env::var(\"API_KEY\")",
                                "password",
                                "x = secret"
                            ]
                        ),
                        pick(
                            &mut next,
                            &[
                                " || ",
                                " ?? ",
                                " ?: ",
                                " or ",
                                ".unwrap_or(",
                                "||",
                                " |\t| ",
                                "\n|| "
                            ]
                        ),
                        pick(&mut next, &["\"", "'"]),
                        pick(&mut next, &v),
                        pick(&mut next, &["\"", "'"])
                    ),
                    9 => format!(
                        "{}AUTH{}{}{}{}",
                        pick(&mut next, &["> ", "", "\n", "C: ", "\"", "x"]),
                        pick(&mut next, &[" ", "  ", " \t", "\t"]),
                        pick(&mut next, &["", "default ", "PLAIN ", "a b "]),
                        pick(&mut next, &v),
                        pick(&mut next, &["", "\n", "\"", " x", "'"])
                    ),
                    10 => format!(
                        "{}{}{}",
                        pick(
                            &mut next,
                            &[
                                "openssl passwd -6 ",
                                "openssl passwd  -salt x ",
                                "mkpasswd -m sha-512 ",
                                "bcrypt.hashpw(b\"",
                                "make_password('",
                                "Hash::make(\"",
                                "passwordEncoder.encode(\"",
                                "openssl passwd\n"
                            ]
                        ),
                        pick(&mut next, &v),
                        pick(&mut next, &["", "\"", "'", ")", "\")"])
                    ),
                    11 => format!(
                        "{}{}{}{}",
                        pick(
                            &mut next,
                            &[
                                "set :password, ",
                                "set :session_secret,",
                                "db_password <- ",
                                "api.key <<-",
                                "token <-  ",
                                "set  :password, "
                            ]
                        ),
                        pick(&mut next, &["\"", "'"]),
                        pick(&mut next, &v),
                        pick(&mut next, &["\"", "'", ""])
                    ),
                    _ => format!(
                        "{}{}{}",
                        pick(&mut next, &["db-1", "nas", "x.y", "printer-2"]),
                        pick(
                            &mut next,
                            &[".local", ".lan", ".internal", ".corp", ".fritz.box"]
                        ),
                        pick(&mut next, &["", ":8080", ".json", "-", "/x"])
                    ),
                };
                let at = (next() as usize) % (text.len() + 1);
                let at = (0..=at)
                    .rev()
                    .find(|&i| text.is_char_boundary(i))
                    .unwrap_or(0);
                text.insert_str(at, &shaped);
            }
            for t in [
                text.clone(),
                serde_json::json!({ "cwd": "/home/zed", "t": text }).to_string(),
            ] {
                let a = crate::testkit::same_scan_and_redaction(&windowed, &whole, &t);
                for f in &a {
                    if let Some(i) = rules::WINDOWED_RULES.iter().position(|r| *r == &*f.rule) {
                        per_rule[i] += 1;
                    }
                }
                found += a
                    .iter()
                    .filter(|f| &*f.rule == "lan-hostname" || &*f.rule == "provider-named")
                    .count();
            }
        }
        assert!(found > 3000, "only {found} windowed-rule findings");
        assert!(per_rule.iter().all(|&n| n >= 20), "{per_rule:?}");
    }
}

#[cfg(test)]
mod anchor_tests {
    use super::*;

    /// Keyword-anchored rules (`engine::AnchoredRegex`) give the scanner
    /// exactly the findings and output of whole searches, raw and
    /// JSON-escaped, through stage one and verify.
    #[test]
    fn anchored_scan_equals_whole_scan() {
        let id = zed_identity();
        let anchored = Scanner::new(id.clone(), None);
        let mut whole = Scanner::new(id, None);
        assert_eq!(
            anchored.engine.anchored.iter().filter(|&&a| a).count(),
            rules::ANCHORED_RULES.len()
        );
        whole.engine.anchored = vec![false; whole.engine.anchored.len()];
        let names = [
            "password",
            "DB_PASSWORD",
            "db_pass",
            "my.passwd",
            "--password",
            "--pass",
            "pwd",
            "passphrase",
            "secret",
            "API_KEY",
            "x--token",
            "--api-key",
            "client secret",
            "api token",
            "access_key",
            "auth-token",
            "app_secret",
            "signing_key",
            "credentials",
            "sshpass -p",
            "mysql -u root -p",
            "mariadb-dump -p",
            "zentrafy_api_token",
            "Owlbot access key",
            "docker login -u bob -p",
            "helm registry login x.io --password",
            "aws configure set aws_secret_access_key",
            "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1 #",
            "machine api.x.io login bob password",
            "machine api.x.io login bob password s3cr3t-V4lue ",
            "  password",
            "machine h.io password",
            "use the token",
            "Our Secret",
            "herokuKey",
            "<add key=\"ClearTextPassword\" value=\"s3cr3t-V4lue\" />",
            "column_key",
            "{\"auths\":{\"r.io\":{\"auth\":\"Ym9iOmh1bnRlcjIy\"}}}",
        ];
        let seps = [
            "=",
            " = ",
            ": ",
            ":",
            " is ",
            " for the db: ",
            " ",
            "=\"",
            ": '",
            " := ",
            " ||= ",
            "\"] = \"",
            "\", \"",
            " string = \"",
        ];
        let vals = [
            "hunter22",
            "Zq8vR2mK7pL4xN9wQ1abc",
            "s3cr3t-V4lue!",
            "$DB_PASSWORD",
            "changeme",
            "[REDACTED:password]",
            "abc",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
            "01234567-89ab-cdef-0123-456789abcdef",
            "live_Zq8vR2mK7pL4xN9wQ1abcd",
        ];
        let glue = [" ", "\n", "x", "é", "(", ", ", "\t", "", "--", "_"];
        let mut rng = crate::testkit::XorShift(0x0A4C_4011_D00D_5EEDu64);
        let mut per_rule = vec![0usize; rules::ANCHORED_RULES.len()];
        for _ in 0..4000 {
            let text = crate::testkit::assignments(&mut rng, &names, &seps, &vals, &glue);
            for t in crate::testkit::bare_and_in_transcript(&text) {
                let a = crate::testkit::same_scan_and_redaction(&anchored, &whole, &t);
                for f in &a {
                    if let Some(i) = rules::ANCHORED_RULES
                        .iter()
                        .position(|(r, _)| *r == &*f.rule)
                    {
                        per_rule[i] += 1;
                    }
                }
            }
        }
        // Each rule's findings (a hit two rules share is named by one).
        assert!(per_rule.iter().all(|&n| n >= 10), "{per_rule:?}");
    }
}

#[cfg(test)]
mod gate_tests {
    use super::*;

    fn identity() -> Identity {
        zed_identity()
    }

    /// Keyword gates only skip matcher runs that would find nothing: a
    /// scanner with every gate open finds exactly the same spans, on texts
    /// mixed from the fragments the gates look at (key names, operators,
    /// quotes, URLs with and without userinfo, the caller's home and other
    /// homes, non-ASCII spaces and case-fold letters), raw and JSON-escaped.
    #[test]
    fn gated_scan_equals_ungated_scan() {
        let gated = Scanner::new(identity(), None);
        let mut open = Scanner::new(identity(), None);
        assert!(gated.engine.gates.iter().any(|g| *g != Gate::None));
        open.engine.gates = vec![Gate::None; open.engine.gates.len()];
        let parts: &[&str] = &[
            "token",
            "secret",
            "api_key",
            "Password",
            "pwd",
            "_pass",
            "--",
            "-",
            "_",
            ".",
            "\"",
            "'",
            " ",
            "\t",
            ":",
            "=",
            ">",
            ",",
            "\\",
            "\u{a0}",
            "\u{17f}",
            "\u{212a}",
            "Zq8vR2mK",
            "7pL4xN9w",
            "hunter2",
            "abcd",
            "1234",
            "x",
            "mysql",
            "-p",
            "\n",
            "https://",
            "ftp://",
            "u:",
            "pw9x",
            "@",
            "db.example.com",
            "/",
            "%40",
            "\\\"",
            "az",
            "oc login",
            "login",
            "variable",
            "variable \"db_token\" {",
            "default = ",
            "}",
            "/home/zed",
            "/home/zedd",
            "/Users/",
            "/home/",
            "alice",
            "\\Users\\",
            "bob",
            "client-",
            "key",
            "{\"a\":\"",
            "\"}",
            "usage",
            "input_tokens\":",
            // `provider-named` (`Gate::ValueAfter`).
            "zentrafy",
            "abcdef0123456789",
            "12",
            "`",
            "?",
            "string",
            "[]byte",
            "var ",
            // `table-row-secret` (`Gate::TableCell`), the named-secret
            // prose rules (`Gate::UpperLink`).
            "|",
            "  ",
            "db_pass",
            " is ",
            "JWT_SECRET",
            "DB_PASSWORD",
            // `bare-secret-word-prose` (`Gate::ValueAfterNow`).
            "token is ",
            "now ",
            "Zq8vR2mK7pL4xN9wAb3",
            // `aws-secret-access-key` (`Gate::Assign` with a 40-byte value),
            // `user-pass-words` (`Gate::UserBefore`).
            "aws_secret_access_key",
            "AwsSecretKey",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
            "user",
            "admin",
            " pass ",
            " PW:",
        ];
        let mut rng = crate::testkit::XorShift(0xD1B5_4A32_D192_ED03u64);
        let mut next = || rng.next();
        let mut found = 0;
        for _ in 0..10000 {
            let n = 2 + (next() % 14) as usize;
            let text: String = (0..n)
                .map(|_| parts[(next() % parts.len() as u64) as usize])
                .collect();
            for t in [text.clone(), serde_json::json!({ "t": text }).to_string()] {
                let a = gated.scan(&t);
                found += a.len();
                let b = open.scan(&t);
                assert_eq!(a, b, "{t:?}");
            }
        }
        assert!(found > 3000, "only {found} findings on random texts");
    }
}

/// Standard base64 with padding: the encoding the engine's decoded views
/// undo. For building encoded secrets in tests and benchmark corpora.
pub fn b64_encode(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The identity the engine's differential tests redact for.
#[cfg(test)]
fn zed_identity() -> Identity {
    Identity {
        home: Some("/home/zed".into()),
        user: Some("zed".into()),
        git_names: vec!["Zed Quimby".into()],
        git_emails: vec!["zed.quimby@example.org".into()],
        github_owner: Some("zquimby".into()),
    }
}

#[cfg(test)]
mod groups_tests {
    use super::*;

    /// Groups found by `groups` (every rule cut from the start) give the
    /// scanner exactly the findings and output of the capture engine,
    /// raw and JSON-escaped, through stage one and verify.
    #[test]
    fn cut_groups_scan_equals_capture_engine_scan() {
        let id = zed_identity();
        let cut = Scanner::new(id.clone(), None);
        let mut engine_only = Scanner::new(id, None);
        let mut n_cut = 0;
        for r in &cut.engine.rules {
            if let engine::Matcher::Regex {
                groups: Some(g), ..
            } = &r.matcher
            {
                assert!(g.build().is_some());
                n_cut += 1;
            }
        }
        assert!(n_cut >= 150, "{n_cut} rules cut");
        for r in &mut engine_only.engine.rules {
            if let engine::Matcher::Regex { groups, .. } = &mut r.matcher {
                *groups = None;
            }
        }
        let names = [
            "password",
            "DB_PASSWORD",
            "api_key",
            "client secret",
            "token",
            "AWS_SECRET_ACCESS_KEY",
            "Authorization: Bearer",
            "docker login -u bob -p",
            "machine api.x.io login bob password",
            "aws configure set aws_secret_access_key",
            "zentrafy_api_token",
            "SLACK_WEBHOOK",
            "curl -u bob:",
            "postgresql://blog:",
            "export GITHUB_TOKEN=",
            "sshpass -p",
        ];
        let seps = [
            "=", " = ", ": ", " ", "=\"", ": '", " is ", "\", \"", " := ",
        ];
        let vals = [
            "hunter22",
            "Zq8vR2mK7pL4xN9wQ1abc",
            "s3cr3t-V4lue!",
            "$DB_PASSWORD",
            "changeme",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzREALKEY1",
            "Dragon2023%40@db.internal:5432/blog",
            "ghp_Zq8vR2mK7pL4xN9wQ1abcDEF0123456789",
            "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx",
        ];
        let glue = [" ", "\n", "x", "é", "(", ", ", "\t", "", "--", "\"", "'"];
        let before = engine::GROUPS_RESOLVED.load(std::sync::atomic::Ordering::Relaxed);
        let mut rng = crate::testkit::XorShift(0x6C0B_5C0B_0FF1_CE11u64);
        let mut found = 0;
        for _ in 0..2500 {
            let text = crate::testkit::assignments(&mut rng, &names, &seps, &vals, &glue);
            for t in crate::testkit::bare_and_in_transcript(&text) {
                found += crate::testkit::same_scan_and_redaction(&cut, &engine_only, &t).len();
            }
        }
        let resolved = engine::GROUPS_RESOLVED.load(std::sync::atomic::Ordering::Relaxed) - before;
        assert!(found > 5000, "{found} findings");
        assert!(resolved > 2000, "{resolved} groups resolved by the cut");
    }
}
