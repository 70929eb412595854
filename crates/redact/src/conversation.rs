//! A transcript seen as a conversation, not only as lines: a `tool_use` that
//! ran a secret-reading command (`pass show`, `op read`, `vault kv get`,
//! `aws secretsmanager get-secret-value`, `cat ~/.pgpass`, a `Read` of a
//! `.env`, `terraform output -raw db_password`, `sops -d`, …) marks its id,
//! and the `tool_result` answering that id later in the same transcript
//! has its secret-shaped words taken as secrets. Their output is a bare
//! random string that no rule could recognise by shape or by a key name
//! next to it.
//!
//! The same state carries the line-to-line rules of plain (not JSON) text:
//! an element named like a secret whose value sits on its own line
//! (`<apiToken>` / `S` / `</apiToken>`), a property list's `<string>` under
//! a `<key>` naming a secret, a label line and the value under it, a YAML
//! `data:` block, a Terraform variable named like a secret whose
//! `default` is on a later line, and a PuTTY key's private lines — which a
//! per-line scan cannot join.
//!
//! Owns: which commands read secrets, and which words of their output are
//! secret-shaped. Must never: parse a line that holds neither a marked
//! command nor an answer to one (two substring searches decide that), or
//! hold more than [`MAX_MARKED`] ids.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use regex::bytes::Regex;
use serde_json::Value;

use crate::engine::{entropy, MIN_REPEAT_LEN};

/// Ids of secret-reading `tool_use`s awaiting their result; the oldest is
/// forgotten beyond this.
pub const MAX_MARKED: usize = 1024;

/// Longest output word taken as a secret (longer ones are documents).
const MAX_WORD: usize = 4096;

static F_TOOL_USE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"tool_use\""));
static F_TOOL_USE_ID: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"tool_use_id\""));

/// Files whose content is credentials (read with `cat` and friends, or
/// with the `Read` tool): also Rails' `config/master.key`, Vault's
/// `~/.vault-token`, Docker's `/run/secrets/NAME` and `~/.docker/config.json`,
/// gcloud's `application_default_credentials.json`, Terraform's
/// `credentials.tfrc.json`, hub's `~/.config/hub`, Composer's `auth.json`,
/// PuTTY's private keys (`*.ppk`).
const SECRET_FILE: &str = r"(?:\.pgpass|\.netrc|\.env(?:\.[A-Za-z0-9_-]+)?|\.git-credentials|(?:[A-Za-z0-9_-]+_)?credentials(?:\.json|\.csv|\.toml)?|credentials\.tfrc\.json|\.npmrc|\.pypirc|secrets?\.(?:ya?ml|json|toml|env)|id_(?:rsa|ed25519|ecdsa|dsa)|master\.key|\.vault-token|\.my\.cnf|\.s3cfg|\.htpasswd|\.boto|\.config/hub|\.docker/config\.json|auth\.json|run/secrets/[A-Za-z0-9_.-]+|[A-Za-z0-9_.-]+\.ppk)";

/// Commands whose whole output is one secret: stores and managers that
/// print one (`pass`, `op read`, `keyring get`, `secret-tool lookup`), and
/// generators whose output is about to become one (`openssl rand`, `wg
/// genkey`, `rails secret`, `secrets.token_hex()`, `/dev/urandom`).
static SINGLE_VALUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?x)(?:(?:^|[;&|(`]|\$\(|\bsudo)\s*(?:go)?pass(?:\s+show)?(?:\s+-[a-z-]+)*\s+[^\s|;&-][^\s|;&]*\s*(?:$|[|;&)`]))
        | (?:^|[\s;&|(`$])(?:[^\s;&|'\x22]*/)?(?:
            op\s+read\b
          | gcloud\s+secrets\s+versions\s+access\b
          | gcloud\s+auth\s+(?:application-default\s+)?print-access-token\b
          | security\s+find-(?:generic|internet)-password\b[^\n]*\s-w\b
          | heroku\s+(?:config:get|auth:token)\b
          | gh\s+auth\s+token\b
          | bw\s+get\s+(?:password|totp)\b
          | (?:op\s+signin|bw\s+(?:unlock|login))\b[^\n]*\s--raw\b
          | lpass\s+show\b[^\n]*\s--password\b
          | aws\s+configure\s+get\b
          | aws\s+ecr(?:\s+--[a-z-]+(?:=|\s+)[^\s|;&]+)*\s+get-login-password\b[^|;&\n]*$
          | openssl\s+rand\b
          | pwgen\b
          | wg\s+genkey\b
          | (?:rails|rake)\s+secret\b
          | mix\s+phx\.gen\.secret\b
          | php\s+artisan\s+key:generate\b[^\n]*\s--show\b
          | gpg2?\s+--gen-random\b
          | (?:head|tr|dd|cat|xxd|od|hexdump)\b[^\n;&]*/dev/u?random\b
          | (?:python[0-9.]*|node|ruby|perl|php|bun|deno\s+eval)\s[^\n]*?(?:secrets\.token_(?:hex|urlsafe|bytes)|os\.urandom|randomBytes|SecureRandom\.|random_bytes|getRandomValues)
          | systemd-ask-password\b
          | keyring\s+get\b
          | secret-tool\s+lookup\b
          | jq\s+(?:-[A-Za-z]+\s+)*-[A-Za-z]*r[A-Za-z]*\s+['\x22]?\.[A-Za-z0-9_.]*(?i:token|secret|password|passwd|api_?key|private_?key|access_?key)\b
          | kubectl(?:\s+(?:-n|--namespace|--context|--kubeconfig)(?:=|\s+)[^\s|;&]+)*\s+get\s+secrets?\b[^\n]*(?:jsonpath|go-template)[^\n]*\|\s*base64\s+(?:-d|--decode|-D)\b
          | argocd\s+admin\s+initial-password\b
          | bitcoin-cli\b[^\n]*\sdumpprivkey\b
          | (?:cat|less|more|head|bat)\b[^\n|;&]*\.config/solana/[^\s|;&]*\.json\b
          | (?:echo|printf)(?:\s+-[neE]+)*(?:\s+['\x22]?%s(?:\\n)?['\x22]?)?\s+['\x22]?[^\s'\x22|;&]*(?:[0-9][^\s'\x22|;&]*[A-Za-z]|[A-Za-z][^\s'\x22|;&]*[0-9])[^\s'\x22|;&]*['\x22]?\s*\|\s*base64(?:\s+(?:-w\s*0|--wrap=0))?\s*(?:$|[;&)`])
        )",
    )
    .ok()
});

/// Commands whose output holds secrets among other words.
static MULTI_VALUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?x)(?:^|[\s;&|(`$])(?:[^\s;&|'\x22]*/)?(?:
            op\s+(?:item\s+get|inject)\b
          | vault\s+(?:kv\s+get|read)\b
          | aws\s+secretsmanager\s+get-secret-value\b
          | aws\s+ssm\s+get-parameters?\b[^\n]*--with-decryption
          | az\s+keyvault\s+secret\s+show\b
          | az\s+account\s+get-access-token\b
          | doppler\s+secrets\b
          | kubectl(?:\s+(?:-n|--namespace|--context|--kubeconfig)(?:=|\s+)[^\s|;&]+)*\s+get\s+secrets?\b[^\n]*\s-o
          | elasticsearch-reset-password\b
          | kubectl\s+config\s+view\b[^\n]*--raw
          | sops\b[^\n|;&]*\s(?:-d|--decrypt|decrypt)\b
          | ansible-vault\s+(?:view|decrypt)\b
          | gpg2?\b[^\n|;&]*\s(?:-d|--decrypt)\b
          | age\b[^\n|;&]*\s(?:-d|--decrypt)\b
          | heroku\s+config(?:\s|$)
          | railway\s+variables\b
          | infisical\s+(?:export|secrets)\b
          | chamber\s+(?:read|export)\b
          | pulumi\s+(?:stack\s+output|config)\b[^\n|;&]*\s--show-secrets\b
          | (?:cat|less|more|head|tail|bat|type|grep|sed\s+-n)\b[^\n|;&]*{SECRET_FILE}\b
        )"
    ))
    .ok()
});

static SECRET_PATH: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(&format!(r"(?:^|[/\\]){SECRET_FILE}$")).ok());

/// What a marked `tool_use` read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reads {
    /// The whole output is the secret (its first line).
    One,
    /// Secret-shaped words among others.
    Many,
}

/// One line as the line-by-line readers take it, trimmed once: each
/// reader trimming its own copy cost ~60 instructions a line of indented
/// code, eight readers over.
#[derive(Clone, Copy)]
pub struct Line<'a> {
    /// The whole line, without its newline.
    pub raw: &'a [u8],
    /// `raw` without its leading and trailing ASCII whitespace.
    pub t: &'a [u8],
    /// Bytes of leading whitespace in `raw`.
    pub indent: usize,
}

impl<'a> Line<'a> {
    pub fn new(raw: &'a [u8]) -> Line<'a> {
        let start = raw.trim_ascii_start();
        Line {
            raw,
            t: start.trim_ascii_end(),
            indent: raw.len() - start.len(),
        }
    }
}

/// The conversation state of one transcript: the secret-reading `tool_use`
/// ids still awaiting their result.
#[derive(Default)]
pub struct Conversation {
    marked: Vec<(String, Reads)>,
    /// The previous line was an opening tag named like a secret.
    element_open: bool,
    /// The previous line was an `env` entry's `- name:` naming a secret.
    env_open: bool,
    /// The previous line was a property list's `<key>` naming a secret.
    plist_open: bool,
    /// The previous line was a REPL prompt whose expression names a secret.
    repl_open: bool,
    /// The previous line was a label naming a recovery phrase.
    phrase_open: bool,
    /// Lines of a PuTTY key's private part still to come.
    ppk_left: u8,
    /// The previous line was a label naming a secret (`eventbrite private
    /// access key`, `API token:`) and nothing else.
    label_open: bool,
    /// Inside a YAML `data:` block: the indentation of its `data:` line.
    data_indent: Option<usize>,
    /// Inside a block named like a secret (`variable "db_token" {`): its
    /// name, whether that name is a password's, and the lines read since.
    block: Option<(Vec<u8>, bool, usize)>,
}

/// Lines a block named like a secret is searched for its `default` (a
/// variable block is a handful of lines; a block never closed must not
/// keep the state forever).
const MAX_BLOCK_LINES: usize = 32;

/// The `default` of a block named like a secret, read line by line (see
/// [`Conversation::block_default`]).
pub struct BlockDefault<'a> {
    /// The block's opening line up to the end of its quoted name.
    pub name: Vec<u8>,
    pub value: &'a [u8],
    pub password: bool,
}

/// `variable "okta_api_token" {` alone on its line: a Terraform variable
/// named like a secret whose body follows. Group 1 is set when the name is
/// a password's.
static SECRET_BLOCK: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"(?-u)^variable "[A-Za-z0-9_-]*(?i:({})|{})[A-Za-z0-9_-]*"[ \t]*\{{$"#,
        crate::rules::PASSWORD_KEY_NAMES,
        crate::rules::GENERIC_KEY_NAMES,
    ))
    .ok()
});

/// `default = "V"` alone on its line, or before a comment (`# …`,
/// `// …`).
static BLOCK_DEFAULT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#"^default[ \t]*=[ \t]*"([^"\s]+)"[ \t]*(?:(?:#|//).*)?$"#).ok());

/// `- name: DB_PASSWORD` alone on its line: an `env` list entry named
/// like a secret whose `value:` is on the next line.
static SECRET_ENV_NAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"(?i-u)^-[ \t]+name:[ \t]*["']?[A-Za-z0-9_.-]*{}[A-Za-z0-9_.-]*["']?$"#,
        crate::rules::SETTING_SECRET_NAMES
    ))
    .ok()
});

/// `<key>StripeSecretKey</key>` alone on its line: a property list's key
/// named like a secret whose `<string>` is on the next line.
static SECRET_PLIST_KEY: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"(?i-u)^<key>[A-Za-z0-9_.:-]*{}[A-Za-z0-9_.:-]*</key>$"#,
        crate::rules::SETTING_SECRET_NAMES
    ))
    .ok()
});

/// A line that only labels a secret: a few words ending in a secret's
/// name, with at most a colon after it.
static SECRET_LABEL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i-u)^[A-Za-z][A-Za-z0-9_. -]{0,60}\b(?:secret|token|api[ _-]?key|access[ _-]?key|private[ _-]?key|secret[ _-]?key)[ \t]*:?$",
    )
    .ok()
});

/// Cheap test before [`SECRET_LABEL`]: the line ends in `key`, `token` or
/// `secret`, with an optional colon.
fn ends_like_label(t: &[u8]) -> bool {
    let t = t.strip_suffix(b":").unwrap_or(t).trim_ascii_end();
    // `key`, `token` and `secret` end in `y`, `n`, `t`: most lines are left
    // at their last byte.
    if !matches!(
        t.last().map(u8::to_ascii_lowercase),
        Some(b'y' | b'n' | b't')
    ) {
        return false;
    }
    let ends = |w: &[u8]| t.len() >= w.len() && t[t.len() - w.len()..].eq_ignore_ascii_case(w);
    t.len() <= 72 && (ends(b"key") || ends(b"token") || ends(b"secret"))
}

static SECRET_TAG: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)^<[A-Za-z0-9_.:-]*(?:{}|{})[A-Za-z0-9_.:-]*(?:\s[^<>/]*)?>$",
        crate::rules::GENERIC_KEY_NAMES,
        crate::rules::PASSWORD_KEY_NAMES
    ))
    .ok()
});

/// A REPL prompt line whose expression names a secret (see
/// `rules::repl_prompt_expr`).
static REPL_PROMPT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(&format!(r"(?i-u)^{}$", crate::rules::repl_prompt_expr())).ok());

/// The line under it, a quoted string (see `rules::REPL_VALUE`).
static REPL_VALUE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(&format!(r"(?-u)^{}$", crate::rules::REPL_VALUE)).ok());

/// Could this line start with a REPL prompt? A superset of
/// [`REPL_PROMPT`]'s starts, read from the first bytes without a search
/// (a `memchr` or `memmem` call per line cost more than the regex saved):
/// `>` (`>>>`, Node's `>`), `In [`, `[N] pry(…)>`, and `name(…)>` after
/// optional `:NNN` (`irb(main):001>`, `iex(1)>`, `app(dev)>`).
fn prompt_like(t: &[u8]) -> bool {
    match t.first() {
        Some(b'>') => true,
        Some(b'[') => t.get(1).is_some_and(u8::is_ascii_digit),
        Some(b'I' | b'i') if t.get(..4).is_some_and(|h| h.eq_ignore_ascii_case(b"in [")) => true,
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' || *c == b'-' => {
            let name = t
                .iter()
                .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
                .unwrap_or(t.len());
            if t.get(name) != Some(&b'(') {
                return false;
            }
            let Some(close) = t[name..].iter().position(|&b| b == b')') else {
                return false;
            };
            let after = &t[name + close + 1..];
            let skip = after
                .iter()
                .position(|&b| b != b':' && !b.is_ascii_digit())
                .unwrap_or(after.len());
            matches!(after.get(skip), Some(b'>' | b'*'))
        }
        _ => false,
    }
}

/// Does `t` hold `hrase` or `ords` (any case)? One `memchr2` pass for the
/// `r` both share.
fn says_phrase_or_words(t: &[u8]) -> bool {
    memchr::memchr2_iter(b'r', b'R', t).any(|i| {
        let after = &t[i + 1..];
        match i.checked_sub(1).map(|b| t[b].to_ascii_lowercase()) {
            Some(b'h') => after
                .get(..3)
                .is_some_and(|a| a.eq_ignore_ascii_case(b"ase")),
            Some(b'o') => after
                .get(..2)
                .is_some_and(|a| a.eq_ignore_ascii_case(b"ds")),
            _ => false,
        }
    })
}

/// A label naming a recovery phrase (see [`Conversation::phrase_value`]).
static PHRASE_LABEL: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(&format!("(?i-u){}", crate::rules::RECOVERY_PHRASE_NAME)).ok());

impl Conversation {
    /// The string a REPL printed on the line after a prompt whose
    /// expression names a secret (`>>> os.environ["DB_PASSWORD"]` ⏎
    /// `'V'`, `irb> ENV["API_TOKEN"]` ⏎ `=> "V"`), read line by line: a
    /// decoded view holds both lines and the `repl-secret` rule reads them
    /// there. Not yet classified.
    #[inline]
    pub fn repl_value<'a>(&mut self, line: Line<'a>) -> Option<&'a [u8]> {
        let open = std::mem::replace(&mut self.repl_open, false);
        if prompt_like(line.t) {
            self.repl_open = REPL_PROMPT.as_ref().is_some_and(|re| re.is_match(line.raw));
            if self.repl_open {
                return None;
            }
        }
        if !open {
            return None;
        }
        let c = REPL_VALUE.as_ref()?.captures(line.raw)?;
        c.get(1).or_else(|| c.get(2)).map(|m| m.as_bytes())
    }

    /// The words on the line after a label naming a wallet's recovery
    /// phrase and ending in `:` (`solana-keygen new`'s `Save this seed
    /// phrase and your BIP39 passphrase to recover your new keypair:` ⏎
    /// `w1 … w12`), read line by line: a decoded view holds both lines and
    /// `wallet-recovery-phrase` reads them there. Not yet classified.
    #[inline]
    pub fn phrase_value<'a>(&mut self, line: Line<'a>) -> Option<&'a [u8]> {
        let open = std::mem::replace(&mut self.phrase_open, false);
        let t = line.t;
        if t.last() == Some(&b':') {
            // Most lines ending in `:` are code or YAML keys: one pass for
            // `phrase`/`words` before the regex.
            self.phrase_open =
                says_phrase_or_words(t) && PHRASE_LABEL.as_ref().is_some_and(|re| re.is_match(t));
            return None;
        }
        if !open {
            return None;
        }
        (!t.is_empty()
            && t.iter()
                .all(|&b| b.is_ascii_lowercase() || b == b' ' || b == b'\t'))
        .then_some(t)
    }

    /// A line of a PuTTY private key's private part, read line by line:
    /// the `N` base64 lines after `Private-Lines: N` (a decoded view holds
    /// them all and `putty-private-key` reads them there).
    #[inline]
    pub fn ppk_value<'a>(&mut self, line: Line<'a>) -> Option<&'a [u8]> {
        let t = line.t;
        if self.ppk_left > 0 {
            let b64 = t.len() >= 4
                && t.iter()
                    .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
            if b64 {
                self.ppk_left -= 1;
                return Some(t);
            }
            self.ppk_left = 0;
        }
        if let Some(n) = t.strip_prefix(b"Private-Lines:") {
            self.ppk_left = std::str::from_utf8(n.trim_ascii())
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        }
        None
    }

    /// A base64 value of a YAML `data:` block (a Kubernetes `Secret`)
    /// read line by line; not yet classified.
    #[inline]
    pub fn yaml_data_value<'a>(&mut self, line: Line<'a>) -> Option<&'a [u8]> {
        let t = line.t;
        let indent = line.indent;
        if t.is_empty() {
            return None;
        }
        if t == b"data:" || t == b"stringData:" {
            self.data_indent = Some(indent);
            return None;
        }
        let inside = self.data_indent?;
        if indent <= inside {
            self.data_indent = None;
            return None;
        }
        let colon = t.iter().position(|&b| b == b':')?;
        let v = t[colon + 1..].trim_ascii();
        let v = v.strip_prefix(b"\"").unwrap_or(v);
        let v = v.strip_prefix(b"'").unwrap_or(v);
        let v = v.strip_suffix(b"\"").unwrap_or(v);
        let v = v.strip_suffix(b"'").unwrap_or(v);
        (v.len() >= 12
            && v.iter()
                .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')))
        .then_some(v)
    }

    /// The value of an element named like a secret when it stands alone on
    /// the line after its opening tag; a single word, not yet classified.
    #[inline]
    pub fn element_value<'a>(&mut self, line: Line<'a>) -> Option<&'a [u8]> {
        let t = line.t;
        let open = std::mem::replace(&mut self.element_open, false);
        if t.first() == Some(&b'<') && t.last() == Some(&b'>') {
            self.element_open = SECRET_TAG.as_ref().is_some_and(|re| re.is_match(t));
            return None;
        }
        (open && !t.is_empty() && !t.iter().any(|&b| b.is_ascii_whitespace() || b == b'<'))
            .then_some(t)
    }

    /// The string of a property list's key named like a secret, read line
    /// by line (`<key>APIKey</key>` ⏎ `<string>V</string>`, as Xcode writes
    /// an `Info.plist`): a decoded view holds both lines and the
    /// `plist-secret` rule reads them there. Not yet classified.
    #[inline]
    pub fn plist_value<'a>(&mut self, line: Line<'a>) -> Option<&'a [u8]> {
        let open = std::mem::replace(&mut self.plist_open, false);
        // Both lines end in `>`.
        let t = line.t;
        if !t.ends_with(b">") {
            return None;
        }
        if t.starts_with(b"<key>") && t.ends_with(b"</key>") {
            self.plist_open = SECRET_PLIST_KEY.as_ref().is_some_and(|re| re.is_match(t));
            return None;
        }
        if !open {
            return None;
        }
        let v = t.strip_prefix(b"<string>")?.strip_suffix(b"</string>")?;
        (v.len() >= 4 && !v.iter().any(|&b| b.is_ascii_whitespace() || b == b'<')).then_some(v)
    }

    /// The value of an `env` list entry named like a secret, read line by
    /// line (`- name: DB_PASSWORD` ⏎ `value: "V"`, as Kubernetes manifests
    /// and CI files write it): a decoded view holds both lines and the
    /// `env-entry-secret` rule reads them there. Unquoted, not yet
    /// classified.
    #[inline]
    pub fn env_value<'a>(&mut self, line: Line<'a>) -> Option<&'a [u8]> {
        let t = line.t;
        let open = std::mem::replace(&mut self.env_open, false);
        if let Some(rest) = t.strip_prefix(b"-") {
            // A list item: only `- name: …` can open an entry (a cheap test
            // before the regex; Markdown lists and diffs are full of `- `).
            self.env_open = rest.first().is_some_and(|&b| b == b' ' || b == b'\t')
                && rest
                    .trim_ascii_start()
                    .get(..5)
                    .is_some_and(|k| k.eq_ignore_ascii_case(b"name:"))
                && SECRET_ENV_NAME.as_ref().is_some_and(|re| re.is_match(t))
                && !crate::engine::names_a_reference(crate::engine::entry_name(t));
            return None;
        }
        if !open {
            return None;
        }
        let v = t.strip_prefix(b"value:")?.trim_ascii();
        let v = match v.first() {
            Some(&q @ (b'"' | b'\'')) => {
                let end = memchr::memchr(q, &v[1..])?;
                &v[1..1 + end]
            }
            _ => v.split(|&b| b.is_ascii_whitespace() || b == b'#').next()?,
        };
        (v.len() >= 4).then_some(v)
    }

    /// The `default = "V"` line of a Terraform variable block named like a
    /// secret, read line by line (`variable "okta_api_token" {` ⏎ …
    /// `default = "V"`): a decoded view holds the block as one text and
    /// the `terraform-variable-*` rules read it there. Not yet classified.
    #[inline]
    pub fn block_default<'a>(&mut self, line: Line<'a>) -> Option<BlockDefault<'a>> {
        let t = line.t;
        if t.starts_with(b"variable") {
            self.block = SECRET_BLOCK
                .as_ref()
                .and_then(|re| re.captures(t))
                .map(|c| {
                    let close = t.iter().rposition(|&b| b == b'"').unwrap_or(t.len());
                    (t[..close].to_vec(), c.get(1).is_some(), 0)
                });
            return None;
        }
        let (_, _, seen) = self.block.as_mut()?;
        *seen += 1;
        if t.starts_with(b"}") || *seen > MAX_BLOCK_LINES {
            self.block = None;
            return None;
        }
        if !t.starts_with(b"default") {
            return None;
        }
        let value = BLOCK_DEFAULT.as_ref()?.captures(t)?.get(1)?.as_bytes();
        let (name, password, _) = self.block.take()?;
        Some(BlockDefault {
            name,
            value,
            password,
        })
    }

    /// The value on the line after a label naming a secret (`eventbrite
    /// private access key` / `V`): a single word, not yet classified.
    #[inline]
    pub fn label_value<'a>(&mut self, line: Line<'a>) -> Option<&'a [u8]> {
        let t = line.t;
        let open = std::mem::replace(&mut self.label_open, false);
        if t.is_empty() {
            return None;
        }
        if ends_like_label(t) {
            self.label_open = SECRET_LABEL.as_ref().is_some_and(|re| re.is_match(t));
            return None;
        }
        (open && !t.iter().any(|&b| b.is_ascii_whitespace())).then_some(t)
    }

    /// Reads one transcript line: remembers the ids of secret-reading
    /// `tool_use`s, and for a `tool_result` answering one pushes the
    /// secret-shaped words of its output (decoded) onto `out`.
    pub fn observe(&mut self, line: Line<'_>, out: &mut Vec<Vec<u8>>) {
        // A transcript line is a JSON object: any other line is left before
        // a search.
        if line.t.first() != Some(&b'{') {
            return;
        }
        let line = line.raw;
        // Only a line whose command (or file) reads a secret, or that names
        // a marked id, is parsed: both are decided on the raw line.
        let uses = F_TOOL_USE.find(line).is_some() && reads_a_secret(line);
        let answers = !self.marked.is_empty()
            && F_TOOL_USE_ID.find(line).is_some()
            && self
                .marked
                .iter()
                .any(|(id, _)| memchr::memmem::find(line, id.as_bytes()).is_some());
        if !uses && !answers {
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let mut stack = vec![&v];
        while let Some(n) = stack.pop() {
            match n {
                Value::Array(a) => stack.extend(a.iter()),
                Value::Object(o) => {
                    match o.get("type").and_then(Value::as_str) {
                        Some("tool_use") => self.mark(o),
                        Some("tool_result") => self.answer(o, out),
                        _ => {}
                    }
                    stack.extend(o.values());
                }
                _ => {}
            }
        }
    }

    fn mark(&mut self, o: &serde_json::Map<String, Value>) {
        let (Some(id), Some(input)) = (o.get("id").and_then(Value::as_str), o.get("input")) else {
            return;
        };
        let reads = if let Some(cmd) = input.get("command").and_then(Value::as_str) {
            classify_command(cmd)
        } else if let Some(p) = input.get("file_path").and_then(Value::as_str) {
            SECRET_PATH
                .as_ref()
                .is_some_and(|re| re.is_match(p.as_bytes()))
                .then_some(Reads::Many)
        } else {
            None
        };
        let Some(reads) = reads else { return };
        if self.marked.len() >= MAX_MARKED {
            self.marked.remove(0);
        }
        self.marked.push((id.to_string(), reads));
    }

    fn answer(&mut self, o: &serde_json::Map<String, Value>, out: &mut Vec<Vec<u8>>) {
        let Some(id) = o.get("tool_use_id").and_then(Value::as_str) else {
            return;
        };
        let Some(i) = self.marked.iter().position(|(m, _)| m == id) else {
            return;
        };
        let reads = self.marked.remove(i).1;
        let mut texts = Vec::new();
        match o.get("content") {
            Some(Value::String(s)) => texts.push(s.as_str()),
            Some(Value::Array(a)) => {
                for part in a {
                    if let Some(t) = part.get("text").and_then(Value::as_str) {
                        texts.push(t);
                    }
                }
            }
            _ => {}
        }
        for t in texts {
            secret_words(t, reads, out);
        }
    }
}

/// Does some `"command"` or `"file_path"` string member of this raw JSON
/// line read a secret? (A superset of what [`Conversation::observe`]'s
/// parse then marks: the same tests on the same strings.)
fn reads_a_secret(line: &[u8]) -> bool {
    for (key, is_path) in [(&b"\"command\":"[..], false), (b"\"file_path\":", true)] {
        for at in memchr::memmem::find_iter(line, key) {
            let mut i = at + key.len();
            while i < line.len() && line[i] == b' ' {
                i += 1;
            }
            let Some(v) = json_string_at(line, i) else {
                continue;
            };
            let hit = if is_path {
                SECRET_PATH
                    .as_ref()
                    .is_some_and(|re| re.is_match(v.as_bytes()))
            } else {
                classify_command(&v).is_some()
            };
            if hit {
                return true;
            }
        }
    }
    false
}

/// The JSON string starting with the quote at `i`, decoded.
fn json_string_at(b: &[u8], i: usize) -> Option<String> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return serde_json::from_slice(&b[i..=j]).ok(),
            _ => j += 1,
        }
    }
    None
}

/// `printenv NAME`, `echo $NAME`, `echo "${NAME}"` (also run inside a
/// container or over ssh: `docker exec api printenv NAME`, `-C "printenv
/// NAME"`): the variable's name, to be judged by [`names_a_secret_variable`].
static PRINTS_VARIABLE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"(?:^|[\s;&|(`'"])(?:printenv\s+|echo\s+(?:-[neE]+\s+)*['"]?\$\{?)([A-Za-z_][A-Za-z0-9_]*)\}?['"]?\s*(?:$|[;&|)`'"])"#,
    )
    .ok()
});

/// `terraform output -raw NAME` (also `-json`, or neither: a quoted
/// string), `pulumi config get [project:]NAME`, `pulumi stack output NAME
/// --show-secrets`: the output's name, judged as a variable's is. Their
/// other outputs are addresses, regions and ids, kept.
static PRINTS_NAMED_OUTPUT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"(?:^|[\s;&|(`'"])(?:terraform(?:\s+-chdir=[^\s|;&]+)?\s+output(?:\s+-(?:raw|json|no-color|state=[^\s|;&]+))*\s+|pulumi\s+config\s+get(?:\s+-[a-z-]+(?:=[^\s|;&]+)?)*\s+(?:[A-Za-z0-9_.-]+:)?|pulumi\s+stack\s+output(?:\s+-[a-z-]+(?:=[^\s|;&]+)?)*\s+)([A-Za-z_][A-Za-z0-9_-]*)\s*(?:$|[;&|)`'"]|\s-)"#,
    )
    .ok()
});

/// A variable (or an output: `admin-api-key`) named like a secret
/// (`GITHUB_TOKEN`, `DB_PASSWORD`, `stripe_api_key`) and not like a thing about one (`TOKEN_FILE`,
/// `SECRET_PATH`: the engine's own test for a setting's name,
/// `engine::names_a_reference`); `PWD` is the working directory.
fn names_a_secret_variable(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    let parts: Vec<&str> = n.split(['_', '-']).filter(|p| !p.is_empty()).collect();
    let secret = parts.iter().enumerate().any(|(i, p)| {
        matches!(
            *p,
            "TOKEN" | "SECRET" | "PASSWORD" | "PASSWD" | "PASS" | "PASSPHRASE" | "APIKEY" | "PAT"
        ) || p.ends_with("TOKEN")
            || p.ends_with("SECRET")
            || p.ends_with("PASSWORD")
            || (*p == "KEY"
                && i > 0
                && matches!(
                    parts[i - 1],
                    "API" | "ACCESS" | "PRIVATE" | "SECRET" | "SIGNING" | "ENCRYPTION" | "MASTER"
                ))
    });
    secret && !crate::engine::names_a_reference(name.as_bytes())
}

fn prints_secret_variable(c: &[u8]) -> bool {
    [&PRINTS_VARIABLE, &PRINTS_NAMED_OUTPUT].iter().any(|re| {
        re.as_ref().is_some_and(|re| {
            re.captures_iter(c).any(|m| {
                m.get(1)
                    .and_then(|n| std::str::from_utf8(n.as_bytes()).ok())
                    .is_some_and(names_a_secret_variable)
            })
        })
    })
}

/// Does this shell command read a secret, and how is its output shaped?
fn classify_command(cmd: &str) -> Option<Reads> {
    let c = cmd.as_bytes();
    if SINGLE_VALUE.as_ref().is_some_and(|re| re.is_match(c)) || prints_secret_variable(c) {
        Some(Reads::One)
    } else if MULTI_VALUE.as_ref().is_some_and(|re| re.is_match(c)) {
        Some(Reads::Many)
    } else {
        None
    }
}

/// Output that reports a failure rather than a value.
fn is_error_text(l: &str) -> bool {
    let l = l.to_ascii_lowercase();
    [
        "error",
        "not found",
        "no such",
        "denied",
        "usage:",
        "not in the password store",
        "command not found",
        "exit code",
        "unauthorized",
        "forbidden",
        "[redacted:",
    ]
    .iter()
    .any(|m| l.contains(m))
}

/// The secret-shaped words of a secret-reading command's output.
fn secret_words(text: &str, reads: Reads, out: &mut Vec<Vec<u8>>) {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if reads == Reads::One {
        if let Some(first) = lines.next() {
            // `terraform output NAME` and `-json` quote the string.
            let first = first
                .strip_prefix('"')
                .and_then(|f| f.strip_suffix('"'))
                .unwrap_or(first);
            // A passphrase may hold a few spaces; a sentence is a message
            // (`Copied … to clipboard`), not the secret.
            let spaces = first.bytes().filter(|b| *b == b' ').count();
            let message = spaces > 4 || (spaces > 0 && first.len() > 64);
            if first.len() >= MIN_REPEAT_LEN
                && first.len() <= MAX_WORD
                && !message
                && !is_error_text(first)
                && !first.to_ascii_lowercase().contains("clipboard")
            {
                out.push(first.as_bytes().to_vec());
            }
        }
    }
    for l in lines {
        // `Read` output numbers its lines: `    12→KEY=value`.
        for w in l.split(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    '"' | '\'' | '`' | ',' | '{' | '}' | '[' | ']' | '=' | '\\' | '→'
                )
        }) {
            let w = w.trim_end_matches([':', ';', '.']);
            if secret_shaped(w) {
                out.push(w.as_bytes().to_vec());
            } else if w.contains(':') {
                // `host:port:db:user:password` (`.pgpass`), `user:token`.
                for p in w.split(':') {
                    if secret_shaped(p) {
                        out.push(p.as_bytes().to_vec());
                    }
                }
            }
        }
    }
}

/// A word that looks generated rather than written: long enough, letters
/// mixed with digits (or both cases over 16 bytes), varied, and not a path,
/// date or placeholder.
fn secret_shaped(w: &str) -> bool {
    let b = w.as_bytes();
    if b.len() < MIN_REPEAT_LEN || b.len() > MAX_WORD {
        return false;
    }
    let letters = b.iter().any(u8::is_ascii_alphabetic);
    let digits = b.iter().any(u8::is_ascii_digit);
    let upper = b.iter().any(u8::is_ascii_uppercase);
    let lower = b.iter().any(u8::is_ascii_lowercase);
    let mixed = (letters && digits) || (b.len() >= 16 && upper && lower);
    let pathish = matches!(b[0], b'/' | b'~' | b'.' | b'$' | b'<' | b'%');
    let dateish =
        b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[7] == b'-';
    let placeholder = {
        let l = w.to_ascii_lowercase();
        [
            "example",
            "placeholder",
            "your-",
            "your_",
            "xxxx",
            "changeme",
            "redacted",
        ]
        .iter()
        .any(|m| l.contains(m))
    };
    mixed && !pathish && !dateish && !placeholder && entropy(b) >= 2.5
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_classified() {
        for (cmd, want) in [
            ("pass show github/token", Some(Reads::One)),
            ("pass github/token", Some(Reads::One)),
            ("gopass show -o infra/db", Some(Reads::One)),
            ("pass show work/vpn | head -1", Some(Reads::One)),
            ("pass show -c web/login && echo ok", Some(Reads::One)),
            ("op read op://Private/Stripe/credential", Some(Reads::One)),
            ("vault kv get secret/app", Some(Reads::Many)),
            (
                "aws secretsmanager get-secret-value --secret-id prod/db",
                Some(Reads::Many),
            ),
            (
                "gcloud secrets versions access latest --secret=api",
                Some(Reads::One),
            ),
            (
                "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d",
                Some(Reads::One),
            ),
            ("kubectl get secret db -o yaml", Some(Reads::Many)),
            (
                "security find-generic-password -s github -w",
                Some(Reads::One),
            ),
            ("cat ~/.pgpass", Some(Reads::Many)),
            ("cd app && cat .env", Some(Reads::Many)),
            ("ls -la", None),
            ("cargo test --release", None),
            ("git commit -m 'tests pass now'", None),
            ("kubectl get secrets", None),
            ("echo you shall not pass", None),
            ("wg genkey", Some(Reads::One)),
            ("bin/rails secret", Some(Reads::One)),
            ("head -c 32 /dev/urandom | base64", Some(Reads::One)),
            ("printenv GITHUB_TOKEN", Some(Reads::One)),
            ("echo \"${DB_PASSWORD}\"", Some(Reads::One)),
            (
                "fly ssh console -C \"printenv API_TOKEN\"",
                Some(Reads::One),
            ),
            ("jq -r .token creds.json", Some(Reads::One)),
            ("cat ~/.docker/config.json", Some(Reads::Many)),
            ("echo $HOME", None),
            ("echo $PWD", None),
            ("printenv PATH", None),
            ("jq -r .name package.json", None),
            ("grep -rn randomBytes src/", None),
            ("git log --grep 'wg genkey'", None),
        ] {
            assert_eq!(classify_command(cmd), want, "{cmd}");
        }
    }

    /// The cheap gates before the prompt and label regexes pass every line
    /// the regexes could match (and few others).
    #[test]
    fn prompt_and_label_gates() {
        for l in [
            ">>> os.environ['X']",
            "  > process.env.X",
            "In [3]: x",
            "in [3]: x",
            "irb(main):001> x",
            "IRB(main):001:0* x",
            "[1] pry(main)> x",
            "iex(2)> x",
            "app(dev)> x",
        ] {
            assert!(prompt_like(l.as_bytes().trim_ascii()), "{l}");
        }
        for l in [
            "fn f() -> Vec<u8> {",
            "x = a > b",
            "for x in [1, 2]:",
            "[dependencies]",
            "foo(bar) > 3",
            "",
        ] {
            assert!(!prompt_like(l.as_bytes().trim_ascii()), "{l}");
        }
        for l in [
            "Seed phrase:",
            "your RECOVERY WORDS:",
            "secret Phrase and passphrase:",
            "backup words",
        ] {
            assert!(says_phrase_or_words(l.as_bytes()), "{l}");
        }
        for l in ["def main():", "r", "or", "hr", "color:", "server:", "hrs"] {
            assert!(!says_phrase_or_words(l.as_bytes()), "{l}");
        }
    }

    #[test]
    fn variables_named_like_secrets() {
        for n in [
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "stripe_api_key",
            "DJANGO_SECRET_KEY",
            "DB_PASS",
            "NPM_AUTHTOKEN",
            "GH_PAT",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(names_a_secret_variable(n), "{n}");
        }
        for n in [
            "HOME",
            "PWD",
            "PATH",
            "TOKEN_FILE",
            "SECRET_PATH",
            "AUTH_URL",
            "SECRET_NAME",
            "API_KEY_ID",
            "KEYBOARD",
            "PASSENGER_COUNT",
            "TOKEN_ENDPOINT",
            "VAULT_SECRETS_DIR",
            "REDIS_PASSWORD_HOST",
        ] {
            assert!(!names_a_secret_variable(n), "{n}");
        }
    }

    #[test]
    fn secret_shaped_words() {
        for w in ["Xk9mP2qR7tW4", "hunter2hunter", "AbCdEfGhIjKlMnOpQr"] {
            assert!(secret_shaped(w), "{w}");
        }
        for w in [
            "password",
            "/home/zed/.env",
            "2026-11-30T10:00:00Z",
            "DATABASE_URL",
            "your-api-key-here",
            "short1",
        ] {
            assert!(!secret_shaped(w), "{w}");
        }
    }
}
