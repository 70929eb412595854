//! The built-in rule catalogue: one entry per detector, with its keywords,
//! pattern, value checks and allowlisted documentation examples.
//!
//! Owns: what counts as a secret, an identity or a network identifier, as
//! data. Must never: do I/O, or be weakened by configuration (the per-repo
//! file may only add rules and raise severities; see `config`).

/// How bad a residual of this kind is. `Block` findings left after the
/// sanitise stage refuse the whole text; `Warn` findings are redacted and
/// reported but never refuse on their own (heuristic shapes such as
/// machine-style host names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warn,
    Block,
}

/// Extra check on a regex match, run in code because RE2-style regexes have
/// no lookaround.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Token with a fixed prefix: the byte before must not be alphanumeric
    /// (`_` is allowed, so `MY_TOKEN_ghp_…` is caught) and the byte after must
    /// not continue the token's alphabet.
    Token,
    /// Keyword-anchored generic secret: classify the value (placeholders,
    /// code references and numbers are not secrets).
    Generic,
    /// As `Generic` for password-like names: human passwords have low
    /// entropy, so only placeholders and code references are rejected.
    Password,
    /// `Basic <base64>`: must decode to `user:password`.
    Basic,
    /// Bearer / token auth value: must look like a credential, not a word.
    Bearer,
    /// A key or token named in prose (`the api key is V`): `Generic`'s
    /// checks, and a value shorter than [`PROSE_SHORT_VALUE`] must mix
    /// upper case, lower case and digits (`the api key is configured`,
    /// `the access token is EXPIRED_99` are words, not keys).
    ProseSecret,
    /// A one-word password named in prose (`the default password is
    /// admin.`): letters only, ending its clause, and not a word that
    /// ends such a clause as often (`wrong`, `required`, `hashed`,
    /// `expiring`; see [`password_word_ok`]).
    PasswordWord,
    /// Password inside a URL: reject obvious placeholders.
    UrlPassword,
    /// Base64 that decodes to secret-bearing text: a PEM private key,
    /// `NAME=value` lines naming a secret, or JSON with secret fields.
    DecodedSecret,
    /// Base64 that decodes to printable text (a Kubernetes `Secret`'s
    /// `data:` values: `admin:password`, a connection string).
    Base64Text,
    /// A value right after a provider's name and a secret word
    /// (`bscscan_token: V`, `owlbot TOKEN V`, `cloudplanSECRET-V`): see
    /// [`provider_named_ok`]. The keyboard-run placeholder marks do not
    /// apply here: next to a provider's name a sequential-looking value is
    /// still that provider's credential.
    ProviderNamed,
    /// A provider's prefixed token (`aio_…`, `bkua_…`, `CFPAT-…`): the
    /// prefix names the format, so only slot-filler marks (`xxxx`,
    /// `example`) and runs of one byte are rejected, not keyboard runs
    /// (see [`provider_token_ok`]).
    ProviderToken,
    /// The value half of `ProviderNamed` alone, for a rule whose pattern
    /// names the provider itself (see [`provider_value_ok`]).
    ProviderValue,
    /// A password given to a command-line flag (`-p PW`, `/p:PW`,
    /// `net user NAME PW`): `Password`'s checks, and not a bare lower-case
    /// word, which in prose about the command is the next word of the
    /// sentence (`the net user command lists accounts`).
    FlagPassword,
    /// `NAME=V NAME=W …` set in a secrets store from the command line
    /// (`fly secrets set`): taken whole when one of the values passes
    /// `FlagPassword`'s checks (`NAME=VALUE` in a sentence about the
    /// command is a placeholder).
    SecretPairs,
    /// A setting whose name and value are two fields (`<add key="N"
    /// value="V"/>`, `- name: N` ⏎ `value: V`): `FlagPassword`'s checks,
    /// with the setting's name (the field after `key` / `name`, not
    /// `value`) as the name that may say the value is a reference
    /// (`SECRET_NAME`, `token_file`); see [`crate::engine::entry_name`].
    EntryPassword,
    /// The `default` of a block named like a secret (Terraform's
    /// `variable "db_token" { … default = "V" }`): `Generic`'s checks, with
    /// the block's name (not `default`) as the name that may say the value
    /// is a reference (`…_file`, `…_name`).
    BlockSecret,
    /// As `BlockSecret` for a block named like a password (`Password`'s
    /// checks).
    BlockPassword,
    /// A wallet's recovery phrase (`seed phrase: w1 w2 … w12`): twelve
    /// words or more (a sentence going on in lower case after the phrase
    /// is taken with it) and at least six of them different (Hardhat's
    /// public `test test … junk` is not one); see [`mnemonic_ok`].
    Mnemonic,
    Ipv4,
    Ipv6,
    Mac,
    Host,
    /// No extra check.
    None,
}

/// See [`Check::Mnemonic`].
pub fn mnemonic_ok(v: &[u8]) -> bool {
    let words: Vec<&[u8]> = v
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    let mut distinct = words.clone();
    distinct.sort_unstable();
    distinct.dedup();
    words.len() >= 12 && distinct.len() >= 6
}

/// Whether a rule's value should be searched for everywhere else in the text
/// once found (secrets yes; addresses and host names are found by shape
/// anyway).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Secret,
    Network,
}

pub struct RuleDef {
    pub id: &'static str,
    pub kind: &'static str,
    /// Lower-case literals; the rule's regex runs on a line only when one of
    /// these occurs in it (ASCII case-insensitively).
    pub keywords: &'static [&'static str],
    pub pattern: &'static str,
    /// Capture group holding the secret (0 = whole match).
    pub group: usize,
    pub check: Check,
    /// Minimum Shannon entropy (bits per byte) of the secret, 0 = none.
    pub min_entropy: f64,
    pub severity: Severity,
    pub class: Class,
    /// Values providers publish as examples: never findings.
    pub allow: &'static [&'static str],
}

const fn tok(
    id: &'static str,
    kind: &'static str,
    keywords: &'static [&'static str],
    pattern: &'static str,
) -> RuleDef {
    RuleDef {
        id,
        kind,
        keywords,
        pattern,
        group: 0,
        check: Check::Token,
        min_entropy: 0.0,
        severity: Severity::Block,
        class: Class::Secret,
        allow: &[],
    }
}

const fn grp(
    id: &'static str,
    kind: &'static str,
    keywords: &'static [&'static str],
    pattern: &'static str,
    check: Check,
) -> RuleDef {
    RuleDef {
        id,
        kind,
        keywords,
        pattern,
        group: 1,
        check,
        min_entropy: 0.0,
        severity: Severity::Block,
        class: Class::Secret,
        allow: &[],
    }
}

/// Separator between a key and its value in env files, shell, JSON, YAML,
/// TOML, Python/JS source and command lines. The decoded view has already
/// turned `\"` into `"`.
macro_rules! assign {
    () => {
        r#"["']?\s*(?::::=|::=|:=|\?=|=>|=|:)\s*["']?"#
    };
}

/// As `assign!` but leaves an opening quote to the value alternatives, so a
/// quoted value may hold `&`, `;` or `,` (Django keys, shell-quoted
/// passwords) while a bare one stops at them (query strings). Also reads a
/// Go declaration's type (`var name string = …`), PHP's `.=`, and a quoted
/// name followed by its value as the next argument
/// (`System.setProperty("NAME", "…")`, `headers.put("X-Api-Key", "…")`).
macro_rules! assign_q {
    () => {
        r#"(?:\s+(?:\[\]byte|[A-Za-z_][A-Za-z0-9_]{0,20}))?(?:["']\s*,|["']?\]?\s*(?::::=|::=|:=|\?\?=|\?=|\.=|\|\|=|=>|=|:))[ \t]*"#
    };
}

/// A YAML tag that keeps the value after it a literal (`password: !!binary
/// <base64>`, `token: !!str V`): the two generic rules step over it to the
/// value. Other tags name where a value comes from (`!Ref`, `!secret`,
/// `!vault`): `engine::generic_ok` refuses them as values.
pub const YAML_VALUE_TAG: &str = r"(?:!!?(?i:binary|str)[ \t]+)?";

pub const GENERIC_KEY_NAMES: &str = r"(?:secret|token|api[_.-]?key|apikey|license[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret|auth[_-]?key|auth[_-]?token|credentials?|signing[_-]?key|encryption[_-]?key|master[_-]?key|session[_-]?key)";
/// Keywords of the two generic rules that anchor an alternative other than
/// `NAME … = value`, so the engine's assignment gate lets them through
/// unconditionally (see `engine::AssignGate`).
/// Shortest value the generic-secret pattern accepts (`{8,}` below).
pub const GENERIC_MIN_VALUE: usize = 8;
/// Shortest value the generic-password pattern accepts (`{4,}` below).
pub const PASSWORD_MIN_VALUE: usize = 4;
/// The value `aws-secret-access-key` takes (`{40}` in its pattern): its
/// assignment gate (`Gate::Assign`) wants that many value bytes after the
/// operator.
pub const AWS_SECRET_KEY_LEN: usize = 40;
/// A UUID's length, the value `heroku-api-key` takes: its assignment gate
/// wants that many value bytes after the operator.
pub const UUID_LEN: usize = 36;
/// Values named in prose shorter than this must mix cases and digits
/// (`Check::ProseSecret`); the pattern takes them from 10 bytes.
pub const PROSE_SHORT_VALUE: usize = 16;

/// `min_entropy` of a prefixed-token rule whose prefix and alphabet name
/// the format alone: no entropy floor (the default floor is
/// `engine::MIN_TOKEN_ENTROPY`).
pub const NO_ENTROPY_FLOOR: f64 = -1.0;

pub const ASSIGN_UNGATED_KEYWORDS: &[&str] = &["mysql", "mariadb", "sshpass", "--pass"];

/// Rules searched only around their keyword occurrences, between stop
/// bytes (`engine::keyword_windows`): every match of each holds one of its
/// keywords. `lan-hostname` ends in `\.(?:local|lan|…)`, its keywords
/// spelled exactly so (ASCII case-insensitively, as the automaton
/// matches); `provider-named`'s keywords are its closing secret word with
/// each byte its pattern lets follow (`gate_tests` checks the gate built on
/// that); `aws-cli-secret` spells out `configure` and `bearer-token`
/// `bearer` or `authorization`, their keywords, under `(?i)`;
/// `env-line-secret` and `env-line-password` hold one of their upper-case
/// words, each a keyword. The first two would otherwise scan whole lines
/// from every word.
/// Between a credential's name in another language and its value: a
/// colon (also the full-width `：`) or `=`; a phrase of up to three words
/// ending in a copula (`Passwort für den Server ist V`, `mot de passe de la
/// base est V`), tried first so a word of the phrase is not taken for the
/// value; or up to two short linking words ("ist", "es", "est", "é", "от
/// базы"; Japanese `は`, Chinese `是`, Korean `는`).
const INTL_LINK: &str = r#"(?:[ \t]*(?::|：|=)[ \t]*|[ \t]+(?:[^\s"'`:]+[ \t]+){1,3}?(?:ist|lautet|est|es|é|è|is|er|är|jest|je|este|adalah|ialah)[ \t]+|[ \t]*(?:は|是|为|為|는|은)?[ \t]+(?:[^\s"'`:]+[ \t]+){0,2})"#;

/// Between a name in a non-Latin script and its value: a colon (ASCII or
/// full-width) or `=`, after at most one word of that script or a short
/// phrase (`токен доступа: V`, `пароль от базы: V`; the word ends in a
/// non-ASCII byte, so the byte before the colon still ends a name for
/// [`non_ascii_trigger`], and the longest, 24 bytes with its blanks, keeps
/// the longest name within [`NON_ASCII_REACH`]); a topic or copula
/// particle right after the name (`密码是 V`, `密码为 V`, `パスワードは V`,
/// `비밀번호는 V`), or a copula after blanks (`mật khẩu là V`, `كلمة المرور
/// هي V`, `הסיסמה היא V`, `รหัสผ่านคือ V`); or a dash,
/// after at most a short phrase saying what for (`пароль — V`, `пароль от
/// базы — V`, `токен для CI – V`). Each of those marks is one of
/// [`NON_ASCII_LINKS`], where [`non_ascii_trigger`] looks for a name
/// before it; blanks and the phrase are bounded so the name stays within
/// [`NON_ASCII_REACH`] of it.
const INTL_SEP: &str = r#"(?:(?:[ \t]{1,2}(?:от|для)[ \t]{1,2}[^\s"'`:=]{0,13}[\x80-\xBF]|[ \t]{1,2}[^\s"'`:=]{0,19}[\x80-\xBF])?[ \t]*(?::|：|=)[ \t]*|(?:は|是|为|為|는|은)[ \t]*|[ \t]*(?:là|هي|היא)[ \t]+|คือ[ \t]*|(?:[ \t]{1,2}(?:от|для)[ \t]{1,2}[^\s"'`:]{1,16})?[ \t]{0,2}(?:—|–)[ \t]*)"#;

/// The marks other than `:`, `：` and `=` that [`INTL_SEP`] puts between
/// a name in a non-Latin script and its value.
pub const NON_ASCII_LINKS: &[&str] = &[
    "は",
    "是",
    "为",
    "為",
    "는",
    "은",
    "là",
    "هي",
    "היא",
    "คือ",
    "—",
    "–",
];

/// A value named in prose in another language: printable ASCII, optionally
/// quoted (`"`, `「`, `“`), not ending in sentence punctuation.
const INTL_VALUE: &str =
    r#"(?:["'`]|「|“)?([A-Za-z0-9!#$%&*+,./:;<=>?@^_~-]{5,}[A-Za-z0-9#$%&*+/=@^_~-])"#;

/// Rules with no keyword that run only on a segment holding one of
/// [`NON_ASCII_WORDS`] (their names are words of non-Latin scripts; see
/// `prose-password-script`).
pub const NON_ASCII_RULES: &[&str] = &["prose-password-script", "prose-secret-script"];

/// Every match of a rule in [`NON_ASCII_RULES`] holds one of these (exact
/// bytes) within [`NON_ASCII_REACH`] bytes before its `:`, `：` or `=`:
/// [`non_ascii_trigger`] looks for them only there, so text of other
/// scripts costs a search for those three separators. The main keyword
/// automaton stays ASCII: each non-ASCII byte class widens all its states
/// (tried: start-up +33 M instructions and +13 % on non-ASCII prose), and
/// a search for the words everywhere cost as much.
/// `non_ascii_words_cover_every_match` checks the cover.
pub const NON_ASCII_WORDS: &[&str] = &[
    "hasło",
    "hasŁo",
    "Hasło",
    "HasŁo",
    "şifre",
    "Şifre",
    "ösenord",
    "Ösenord",
    "ật",
    "Ật",
    "ароль",
    "ПАРОЛЬ",
    "ωδικός",
    "סיסמה",
    "كلمة",
    "رمز عبور",
    "पासवर्ड",
    "パスワード",
    "暗証番号",
    "密码",
    "密碼",
    "口令",
    "비밀번호",
    "암호",
    "รหัสผ่าน",
    "キー",
    "키",
    "密钥",
    "密鑰",
    "トークン",
    "окен",
    "люч",
    "令牌",
    "秘密鍵",
    "lé",
    "lÉ",
];

/// How far before its separator a script rule's match may start (the
/// longest name, `clé de l'API`, `كلمة المرور`, and blanks).
pub const NON_ASCII_REACH: usize = 48;

/// How much farther a name may stand before a dash ([`INTL_SEP`]'s
/// phrase: two blanks, `для`, two blanks and 16 bytes).
pub const NON_ASCII_PHRASE_REACH: usize = 26;

/// Does `v` hold one of [`NON_ASCII_WORDS`] within [`NON_ASCII_REACH`]
/// bytes before a `:`, `：`, `=` or one of [`NON_ASCII_LINKS`] (and the
/// blanks before it)?
pub fn non_ascii_trigger(v: &[u8]) -> bool {
    static AC: std::sync::LazyLock<Option<aho_corasick::AhoCorasick>> =
        std::sync::LazyLock::new(|| aho_corasick::AhoCorasick::new(NON_ASCII_WORDS).ok());
    // The byte a match's name ends with, right before blanks and the
    // separator: the last byte of a character of another script (UTF-8:
    // `0x80..=0xBF`), or of `API` / a Latin word (`hasło`, `şifre`,
    // `lösenord`, `mật khẩu`).
    let ends_a_name =
        |b: u8| (0x80..=0xBF).contains(&b) || matches!(b, b'I' | b'o' | b'e' | b'd' | b'u');
    // Every word holds a non-ASCII byte: a window without one is skipped
    // before the automaton runs. After a dash the name may be followed by
    // a phrase (`пароль для ci — V`), which can end in any byte.
    let near_after = |p: usize, name_right_before: bool| {
        let mut q = p;
        while q > 0 && matches!(v[q - 1], b' ' | b'\t') {
            q -= 1;
        }
        if q == 0 || (name_right_before && !ends_a_name(v[q - 1])) {
            return false;
        }
        let reach = if name_right_before {
            NON_ASCII_REACH
        } else {
            NON_ASCII_REACH + NON_ASCII_PHRASE_REACH
        };
        let w = &v[q.saturating_sub(reach)..q];
        !w.is_ascii() && AC.as_ref().is_none_or(|ac| ac.is_match(w))
    };
    static FULL_WIDTH_COLON: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new("：".as_bytes()));
    static LINKS: std::sync::LazyLock<Option<aho_corasick::AhoCorasick>> =
        std::sync::LazyLock::new(|| {
            // Leftmost-first: the links never overlap, and it is the match
            // kind whose search uses the library's vector prefilter. An
            // NFA: searching with a DFA counted the same instructions on
            // non-ASCII prose, and an NFA is cheaper to build.
            aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .kind(Some(aho_corasick::AhoCorasickKind::NoncontiguousNFA))
                .build(NON_ASCII_LINKS)
                .ok()
        });
    let near = |p: usize| near_after(p, true);
    memchr::memchr2_iter(b':', b'=', v).any(near)
        || FULL_WIDTH_COLON.find_iter(v).any(near)
        || match LINKS.as_ref() {
            Some(links) => links.find_iter(v).any(|m| {
                // The value follows the link (past blanks): ASCII, or a
                // quote `「` / `“` — prose after a particle or a dash
                // (`密码是必填项`) is skipped before the name is looked for.
                let mut k = m.end();
                while k < v.len() && matches!(v[k], b' ' | b'\t') {
                    k += 1;
                }
                let rest = &v[k..];
                let value_next = rest.first().is_some_and(u8::is_ascii_graphic)
                    || rest.starts_with("「".as_bytes())
                    || rest.starts_with("“".as_bytes());
                // `—` and `–` (the links starting with byte 0xE2) may
                // follow a phrase; the particles follow the name itself.
                value_next && near_after(m.start(), v[m.start()] != 0xE2)
            }),
            // Not built: the script rules run on every non-ASCII segment.
            None => true,
        }
}

/// Words that end "the password is …" as often as a password does: states,
/// judgements, places, pronouns, quantities. With the suffix test in
/// [`password_word_ok`] (`-ed`, `-ing`, `-ly`, `-able`, `-ible`, `-less`,
/// `-ful`, `-ive`, `-ous`, `-ent`, `-ant`) they keep
/// `prose-password-word` off prose about passwords.
const PASSWORD_WORD_STOP: &[&str] = &[
    "wrong",
    "right",
    "correct",
    "incorrect",
    "invalid",
    "valid",
    "empty",
    "blank",
    "missing",
    "unset",
    "weak",
    "strong",
    "secure",
    "insecure",
    "safe",
    "unsafe",
    "long",
    "short",
    "fine",
    "good",
    "bad",
    "okay",
    "true",
    "false",
    "null",
    "none",
    "nil",
    "same",
    "unique",
    "default",
    "random",
    "mandatory",
    "necessary",
    "public",
    "private",
    "secret",
    "here",
    "there",
    "below",
    "above",
    "this",
    "that",
    "these",
    "those",
    "them",
    "mine",
    "yours",
    "ours",
    "hers",
    "theirs",
    "gone",
    "done",
    "plain",
    "plaintext",
    "cleartext",
    "longer",
    "shorter",
    "stronger",
    "weaker",
    "better",
    "worse",
    "complete",
    "incomplete",
    "also",
    "still",
    "then",
    "never",
    "always",
    "only",
    "just",
    "often",
    "rarely",
    "what",
    "where",
    "when",
    "which",
    "unknown",
    "known",
    "shown",
    "hidden",
    "given",
    "taken",
    "broken",
    "stolen",
    "written",
    "chosen",
    "forgotten",
    "case",
    "part",
    "sent",
    "kept",
    "lost",
    "reset",
    "set",
    "stale",
    "old",
    "new",
    "needed",
    "too",
    "not",
    "now",
    "the",
    "your",
    "their",
    "both",
    "each",
    "more",
    "less",
    "different",
    "optional",
    "required",
    "critical",
    "important",
    "sensitive",
    "visible",
    "readable",
    "bcrypt",
    "argon",
    "hash",
    "salted",
    "unchanged",
    "irrelevant",
    "useless",
    "unneeded",
    "unused",
    "ignored",
    "enforced",
    "case-sensitive",
    "expire",
    "expired",
    "working",
    "accepted",
    "rejected",
    "locked",
    "disabled",
    "enabled",
    "undefined",
    "why",
    "something",
    "anything",
    "nothing",
    "everything",
    "itself",
    "used",
    "over",
    "under",
    "within",
    "inside",
    "outside",
    "fixed",
    "changed",
    "updated",
    "rotated",
    "revoked",
    "leaked",
    "exposed",
    "compromised",
    "stored",
    "saved",
    "encrypted",
    "hashed",
    "masked",
    "generated",
    "provided",
    "specified",
    "configured",
    "defined",
    "available",
    "unavailable",
    "yet",
    "again",
    "enough",
    "ready",
    "live",
    "active",
    "inactive",
    "temporary",
    "permanent",
    "global",
    "local",
    "shared",
    "personal",
    "simple",
    "complex",
    "easy",
    "hard",
    "obvious",
    "guessable",
    "predictable",
    "trivial",
    "common",
    "unusual",
    "similar",
    "identical",
    "equal",
    "already",
    "really",
    "very",
    "quite",
    "pretty",
    "fairly",
    "being",
    "been",
    "here's",
    "about",
    "like",
    "unlike",
    "near",
    "soon",
    "late",
    "early",
    "weird",
    "odd",
    "strange",
];

/// Is `l` (letters only, 4 to 32, lower-cased) a one-word password rather
/// than the word that ends "the password is …" in prose?
pub fn password_word_ok(l: &[u8]) -> bool {
    let suffixes: &[&[u8]] = &[
        b"ed", b"ing", b"ly", b"able", b"ible", b"less", b"ful", b"ive", b"ous", b"ent", b"ant",
    ];
    !PASSWORD_WORD_STOP.iter().any(|w| l == w.as_bytes())
        && !suffixes.iter().any(|s| l.ends_with(s))
}

/// Rules searched only where their matches can start (see
/// `engine::Anchor`): each alternative of the pattern starts at one of the
/// rule's keywords (`Keyword`), for the two generic assignment rules in
/// the run of name bytes before one (`NameRun`), after a byte no name
/// holds (`WordStart`), or at a word ending one of the tokens before one
/// (`TokensBefore`).
/// `engine::tests::anchored_search_equals_whole_search` holds each to it on
/// random texts.
pub const ANCHORED_RULES: &[(&str, crate::engine::Anchor)] = &[
    ("prose-password", crate::engine::Anchor::Keyword),
    ("prose-secret", crate::engine::Anchor::Keyword),
    ("prose-token-pointed", crate::engine::Anchor::Keyword),
    ("heroku-api-key", crate::engine::Anchor::Keyword),
    ("nuget-config-password", crate::engine::Anchor::Keyword),
    ("named-column", crate::engine::Anchor::Keyword),
    ("docker-config-auth", crate::engine::Anchor::Keyword),
    ("generic-password", crate::engine::Anchor::NameRun),
    ("generic-secret", crate::engine::Anchor::NameRun),
    ("provider-named", crate::engine::Anchor::WordStart),
    (
        "registry-login-password",
        crate::engine::Anchor::TokensBefore {
            tokens: 2,
            line_start: false,
        },
    ),
    (
        "aws-cli-secret",
        crate::engine::Anchor::TokensBefore {
            tokens: 1,
            line_start: false,
        },
    ),
    (
        "netrc-password",
        crate::engine::Anchor::TokensBefore {
            tokens: 4,
            line_start: true,
        },
    ),
];

pub const WINDOWED_RULES: &[&str] = &[
    "lan-hostname",
    "provider-named",
    "aws-cli-secret",
    "bearer-token",
    "env-line-secret",
    "env-line-password",
    "login-with-pair",
    "password-setter-call",
    "login-call-password",
    "form-password-typed",
    "secret-fallback-default",
    "auth-command-password",
    "hashed-password-input",
    "ruby-r-secret-setting",
];

/// Rules whose bare value, in a setting that starts its line, runs to the
/// line's end (`engine::setting_value_end`): the key-assignment rules.
pub const LINE_END_VALUE_RULES: &[&str] = &["generic-secret", "generic-password"];

/// Rules whose value, where it opens a quoted string that goes on past a
/// blank, runs to the string's closing quote (`engine::quoted_value_end`):
/// the key-assignment and prose rules, whose value patterns stop at a blank.
pub const QUOTED_VALUE_RULES: &[&str] = &[
    "generic-secret",
    "generic-password",
    "prose-password",
    "prose-secret",
];

/// The tools whose `<tool> login … -p PASSWORD` `registry-login-password`
/// reads: container registries' clients (`helm registry login` ends in
/// `registry`) and the cloud CLIs that log in the same way (`az`, `oc`,
/// `cf`).
pub const REGISTRY_LOGIN_TOOLS: &[&str] = &[
    "docker", "podman", "buildah", "skopeo", "registry", "oras", "nerdctl", "az", "oc", "cf",
];

/// A setting's name that says its value is a secret, where the name is a
/// field of its own (`<add key="ApiKey" value=…>`, `- name: DB_PASSWORD`):
/// the rules `xml-named-setting` and `env-entry-secret` and the
/// line-by-line reading of an `env` entry (`conversation::env_value`).
pub const SETTING_SECRET_NAMES: &str = r"(?:password|passwd|pwd|secret|token|api[_.-]?key|apikey|access[_.-]?key|private[_.-]?key|credentials?|connection[_.-]?string)";

/// The name of a wallet's recovery phrase (`seed phrase`, `recovery
/// words`): `wallet-recovery-phrase` and its line-by-line reader
/// (`conversation::Conversation::phrase_value`).
pub const RECOVERY_PHRASE_NAME: &str = r"\b(?:seed|recovery|secret|backup)[ \t]+(?:phrase|words)\b";

/// Keywords of a REPL prompt (`repl-secret`).
pub const REPL_KEYWORDS: &[&str] = &[
    ">>>",
    "out[",
    "irb(",
    "pry(",
    "iex(",
    "(dev)>",
    "(development)>",
    "(prod)>",
    "(production)>",
    "(staging)>",
    "(test)>",
    "> process.env",
];

/// A REPL prompt and an expression naming a secret, to the line's end
/// (no `^`, no newline): Python (`>>>`, IPython's `In [3]:`, whose value
/// line says `Out[3]:`), Ruby (`irb`, `pry`, Rails' `app(dev)>`), Elixir's
/// `iex(1)>`, Node's `> process.env`.
pub fn repl_prompt_expr() -> String {
    format!(
        r#"[ \t]*(?:(?:>>>|In \[[0-9]+\]:|(?:\[[0-9]+\] )?(?:irb|pry)\([^)\n]*\)(?::[0-9]+)*[>*]|iex\([0-9]+\)>|[A-Za-z_-]+\([a-z]+\)>)[ \t]*[^\n]{{0,100}}?|>[ \t]*process\.env[^\n]{{0,60}}?)(?:{GENERIC_KEY_NAMES}|passw(?:or)?d|passphrase)[A-Za-z0-9_]*['"]?[)\]]*[ \t]*"#
    )
}

/// The line a REPL printed a string on (the value in group 1 or 2).
pub const REPL_VALUE: &str =
    r#"[ \t]*(?:=>[ \t]*|Out\[[0-9]+\]:[ \t]*)?(?:'([^'\n]{4,})'|"([^"\n]{4,})")[ \t]*"#;

pub const PASSWORD_KEY_NAMES: &str = r"(?:password|passwd|passphrase|pwd|db_pass|_pass)";

pub fn builtin() -> Vec<RuleDef> {
    let mut r = vec![
        // --- GitHub ---
        tok(
            "github-pat",
            "github-token",
            &["ghp_"],
            r"ghp_[A-Za-z0-9]{36,}",
        ),
        tok(
            "github-oauth",
            "github-token",
            &["gho_"],
            r"gho_[A-Za-z0-9]{36,}",
        ),
        tok(
            "github-user-to-server",
            "github-token",
            &["ghu_"],
            r"ghu_[A-Za-z0-9]{36,}",
        ),
        tok(
            "github-app",
            "github-token",
            &["ghs_"],
            r"ghs_[A-Za-z0-9]{36,}",
        ),
        tok(
            "github-refresh",
            "github-token",
            &["ghr_"],
            r"ghr_[A-Za-z0-9]{36,}",
        ),
        tok(
            "github-fine-grained",
            "github-token",
            &["github_pat_"],
            r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}",
        ),
        // --- GitLab ---
        tok(
            "gitlab-token",
            "gitlab-token",
            &[
                "glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "gloas-", "glcbt-", "glft-",
                "glimt-", "glagent-",
            ],
            r"gl(?:pat|dt|rt|ptt|soat|oas|cbt|ft|imt|agent)-[A-Za-z0-9_-]{20,}",
        ),
        // --- Slack ---
        tok(
            "slack-token",
            "slack-token",
            &["xox"],
            // Legacy `xoxo-`/`xoxs-` tokens are numeric groups (`xoxo-` alone
            // is a word).
            // Bot and user tokens (`xoxb-`, `xoxp-`) run to 24 bytes and
            // more after the type: `xoxb-12345-abcd234`, `xoxp-1234567890`,
            // `xoxb-xoxb-my-bot-token` are placeholders. Browser-session
            // tokens (`xoxc-`, `xoxd-`) are read here too, since a generic
            // name no longer decides a Slack-shaped value.
            r"xox[bp]-[A-Za-z0-9-]{24,}|xox[acder]-[A-Za-z0-9-]{10,}|xox[os]-[0-9]+-[A-Za-z0-9-]{8,}",
        ),
        tok(
            "slack-app-token",
            "slack-token",
            &["xapp-"],
            r"xapp-[0-9]-[A-Za-z0-9-]{10,}",
        ),
        grp(
            "slack-webhook",
            "slack-webhook",
            &["hooks.slack.com"],
            r"hooks\.slack\.com/((?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,})",
            Check::None,
        ),
        // --- Stripe ---
        RuleDef {
            allow: &[
                "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
                "pk_test_TYooMQauvdEDq54NiTphI7jx",
            ],
            ..tok(
                "stripe-key",
                "stripe-key",
                &[
                    "sk_live_", "sk_test_", "rk_live_", "rk_test_", "rk_prod_", "sk_prod_",
                    "whsec_",
                ],
                r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9+/]{15,}|whsec_[A-Za-z0-9+/=]{32,}",
            )
        },
        // --- OpenAI / Anthropic / OpenRouter ---
        tok(
            "openai-legacy",
            "openai-key",
            &["t3blbkfj"],
            r"sk-[A-Za-z0-9_-]{20,74}T3BlbkFJ[A-Za-z0-9_-]{20,74}",
        ),
        tok(
            "openai-project",
            "openai-key",
            &["sk-proj-", "sk-svcacct-", "sk-admin-", "sk-None-"],
            r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{40,}",
        ),
        tok(
            "openai-generic",
            "openai-key",
            &["sk-"],
            r"sk-[A-Za-z0-9]{32,}",
        ),
        tok(
            "anthropic-key",
            "anthropic-key",
            &["sk-ant-"],
            r"sk-ant-(?:api|admin|oat|ort|sid)[0-9]{2,3}-[A-Za-z0-9_-]{32,}",
        ),
        tok(
            "openrouter-key",
            "openrouter-key",
            &["sk-or-"],
            r"sk-or-v1-[0-9a-f]{64}",
        ),
        // --- Google ---
        RuleDef {
            // Google's documentation key, then the keys Firebase's own SDKs
            // ship in their tests and samples (firebase-android-sdk,
            // flutterfire, firebase-js-sdk's format tests): public in those
            // repositories, so a session that reads them leaks nothing.
            // Scanners keep the same list by value.
            allow: &[
                "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
                "AIzaSyAnLA7NfeLquW1tJFpx_eQCxoX-oo6YyIs",
                "AIzaSyCkEhVjf3pduRDt6d1yKOMitrUEke8agEM",
                "AIzaSyDMAScliyLx7F0NPDEJi1QmyCgHIAODrlU",
                "AIzaSyD3asb-2pEZVqMkmL6M9N6nHZRR_znhrh0",
                "AIzayDNSXIbFmlXbIE6mCzDLQAqITYefhixbX4A",
                "AIzaSyAdOS2zB6NCsk1pCdZ4-P6GBdi_UUPwX7c",
                "AIzaSyASWm6HmTMdYWpgMnjRBjxcQ9CKctWmLd4",
                "AIzaSyANUvH9H9BsUccjsu2pCmEkOPjjaXeDQgY",
                "AIzaSyA5_iVawFQ8ABuTZNUdcwERLJv_a_p4wtM",
                "AIzaSyA4UrcGxgwQFTfaI3no3t7Lt1sjmdnP5sQ",
                "AIzaSyDSb51JiIcB6OJpwwMicseKRhhrOq1cS7g",
                "AIzaSyBF2RrAIm4a0mO64EShQfqfd2AFnzAvvuU",
                "AIzaSyBcE-OOIbhjyR83gm4r2MFCu4MJmprNXsw",
                "AIzaSyB8qGxt4ec15vitgn44duC5ucxaOi4FmqE",
                "AIzaSyA8vmApnrHNFE0bApF4hoZ11srVL_n0nvY",
            ],
            ..tok(
                "google-api-key",
                "google-api-key",
                &["aiza"],
                r"AIza[0-9A-Za-z_-]{35}",
            )
        },
        tok(
            "google-oauth-token",
            "google-oauth-token",
            &["ya29."],
            r"ya29\.[0-9A-Za-z_-]{20,}",
        ),
        tok(
            "google-refresh-token",
            "google-oauth-token",
            &["1//0"],
            r"1//0[0-9A-Za-z_-]{30,}",
        ),
        tok(
            "google-client-secret",
            "google-client-secret",
            &["gocspx-"],
            r"GOCSPX-[A-Za-z0-9_-]{28}",
        ),
        grp(
            "gcp-service-account-key-id",
            "gcp-service-account",
            &["private_key_id"],
            r#"private_key_id"?\s*:\s*"?([0-9a-f]{40})"#,
            Check::None,
        ),
        // --- AWS ---
        RuleDef {
            allow: &["AKIAIOSFODNN7EXAMPLE", "ASIAIOSFODNN7EXAMPLE"],
            ..tok(
                "aws-access-key-id",
                "aws-access-key-id",
                &["akia", "asia", "abia", "acca", "a3t"],
                r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}",
            )
        },
        RuleDef {
            allow: &["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
            ..grp(
                "aws-secret-access-key",
                "aws-secret-key",
                // Every spelling of the name is a keyword, so each match
                // holds one followed by an assignment (its gate,
                // `Gate::Assign`, looks for that).
                &[
                    "secret_access_key",
                    "secretaccesskey",
                    "secret-access-key",
                    "secret_accesskey",
                    "secret-accesskey",
                    "secretaccess_key",
                    "secretaccess-key",
                    "secret_access-key",
                    "secret-access_key",
                    "aws_secret",
                    "awssecret",
                ],
                concat!(
                    r"(?i)(?:(?:aws_?)?secret[_-]?access[_-]?key(?:_id)?|aws_?secret(?:_?key)?)",
                    assign!(),
                    r"([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"
                ),
                Check::None,
            )
        },
        // --- Azure ---
        grp(
            "azure-storage-key",
            "azure-storage-key",
            &["accountkey"],
            r"(?i)AccountKey\s*=\s*([A-Za-z0-9+/]{40,}={0,2})",
            Check::None,
        ),
        grp(
            "azure-shared-access-key",
            "azure-connection-string",
            &["sharedaccesskey", "sharedaccesssignature"],
            r"(?i)SharedAccess(?:Key|Signature)\s*=\s*([A-Za-z0-9+/%=&:.-]{20,})",
            Check::None,
        ),
        grp(
            "azure-sas-signature",
            "azure-connection-string",
            &["sig="],
            r"[?&]sig=([A-Za-z0-9%+/]{30,256}(?:%3[Dd]|=){0,2})",
            Check::None,
        ),
        // A pre-signed URL's signature (S3 and GCS V4: `X-Amz-Signature=`,
        // `X-Goog-Signature=`) and the session token riding along with it:
        // whoever holds the URL can fetch or upload until it expires.
        grp(
            "presigned-url-signature",
            "presigned-url",
            &["-signature=", "-security-token="],
            r"(?i)[?&]X-(?:Amz|Goog)-(?:Signature=([0-9a-f]{64,1024})|Security-Token=([A-Za-z0-9%+/=_-]{40,4096}))",
            Check::None,
        ),
        // --- Package registries and platforms ---
        tok("npm-token", "npm-token", &["npm_"], r"npm_[A-Za-z0-9]{36}"),
        grp(
            "npm-auth-token",
            "npm-token",
            &["_authtoken"],
            r"_authToken\s*=\s*([A-Za-z0-9_.+/=-]{16,})",
            Check::None,
        ),
        tok(
            "pypi-token",
            "pypi-token",
            &["pypi-"],
            r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        ),
        tok(
            "dockerhub-token",
            "dockerhub-token",
            &["dckr_pat_", "dckr_oat_"],
            r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}",
        ),
        tok(
            "huggingface-token",
            "huggingface-token",
            &["hf_"],
            // Exactly 34: `hf_requiredCharacteristicTypes…` is an identifier.
            r"hf_[A-Za-z0-9]{34}",
        ),
        tok(
            "twilio-api-key",
            "twilio-key",
            &[
                "sk0", "sk1", "sk2", "sk3", "sk4", "sk5", "sk6", "sk7", "sk8", "sk9", "ska", "skb",
                "skc", "skd", "ske", "skf",
            ],
            r"SK[0-9a-f]{32}",
        ),
        grp(
            "twilio-auth-token",
            "twilio-key",
            &["twilio"],
            concat!(
                r"(?i)twilio[A-Za-z0-9_]*(?:token|secret)",
                assign!(),
                r"([0-9a-f]{32})"
            ),
            Check::None,
        ),
        tok(
            "sendgrid-key",
            "sendgrid-key",
            &["sg."],
            r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        ),
        tok("mailgun-key", "mailgun-key", &["key-"], r"key-[0-9a-f]{32}"),
        grp(
            "mailgun-key-v2",
            "mailgun-key",
            &["mailgun"],
            concat!(
                r"(?i)mailgun[A-Za-z0-9_]*key",
                assign!(),
                r"([0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8})"
            ),
            Check::None,
        ),
        tok(
            "heroku-key-v2",
            "heroku-key",
            &["hrku-"],
            r"HRKU-[A-Za-z0-9_-]{60}",
        ),
        grp(
            "heroku-api-key",
            "heroku-key",
            &["heroku"],
            concat!(
                r"(?i)heroku[A-Za-z0-9_]*(?:key|token|secret)",
                assign!(),
                r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
            ),
            Check::None,
        ),
        tok(
            "digitalocean-token",
            "digitalocean-token",
            &["dop_v1_", "doo_v1_", "dor_v1_"],
            r"do[opr]_v1_[a-f0-9]{64}",
        ),
        tok(
            "shopify-token",
            "shopify-token",
            &["shpat_", "shpca_", "shppa_", "shpss_"],
            r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        ),
        grp(
            "discord-bot-token",
            "discord-token",
            &["discord"],
            concat!(
                r"(?i)discord[A-Za-z0-9_]*(?:token|key|secret)?",
                assign!(),
                r"([MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40})"
            ),
            Check::None,
        ),
        grp(
            "discord-webhook",
            "discord-webhook",
            &["discord"],
            r"discord(?:app)?\.com/api/webhooks/([0-9]{17,20}/[A-Za-z0-9_-]{60,72})",
            Check::None,
        ),
        // Bot API URLs glue the token to `bot` (`/bot123…:AA…/getMe`).
        grp(
            "telegram-bot-token",
            "telegram-bot-token",
            &[":aa"],
            r"(?:^|[^0-9A-Za-z]|bot)([0-9]{8,10}:AA[A-Za-z0-9_-]{33})(?:[^A-Za-z0-9_-]|$)",
            Check::None,
        ),
        tok(
            "databricks-token",
            "databricks-token",
            &["dapi"],
            r"dapi[a-f0-9]{32}(?:-[0-9])?",
        ),
        grp(
            "datadog-key",
            "datadog-key",
            &["dd_", "dd-", "datadog"],
            concat!(
                r"(?i)(?:dd|datadog)[_-]?(?:api|app|application|secret)[_-]?key(?:",
                assign!(),
                r"|-)([a-f0-9]{32}|[a-f0-9]{40})(?:[^A-Za-z0-9]|$)"
            ),
            Check::None,
        ),
        tok(
            "sentry-token",
            "sentry-token",
            &["sntrys_", "sntryu_"],
            r"sntrys_[A-Za-z0-9+/=_]{50,}|sntryu_[a-f0-9]{64}",
        ),
        grp(
            "sentry-dsn",
            "sentry-token",
            &["sentry.io"],
            r"https?://([0-9a-f]{32})@[a-z0-9.]*sentry\.io",
            Check::None,
        ),
        tok(
            "vault-token",
            "vault-token",
            &["hvs.", "hvb.", "hvr."],
            r"hv[sbr]\.[A-Za-z0-9_-]{24,}",
        ),
        tok(
            "jwt",
            "jwt",
            &["eyj"],
            r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?",
        ),
        // --- Credentials in URLs and headers ---
        grp(
            "credential-url",
            "credential-url",
            &["://"],
            // The password runs to the last `@` before a host: a decoded
            // layer turns `%40` and `%2F` into `@` and `/` (a port followed
            // by a path is rejected by the check, not by the class).
            r#"(?-u)[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s/:@"'<>`]{0,128}:([^\s"'<>`]{1,256})@[A-Za-z0-9\[\]._-]"#,
            Check::UrlPassword,
        ),
        grp(
            "basic-auth",
            "basic-auth",
            &["basic"],
            r"(?i)\bbasic\s+([A-Za-z0-9+/]{8,}={0,2})",
            Check::Basic,
        ),
        grp(
            "bearer-token",
            "bearer-token",
            &["bearer", "authorization"],
            r"(?i)(?:\bbearer|authorization[\x22']?\s*[:=]\s*[\x22']?(?:token|bearer))\s+([A-Za-z0-9._~+/-]{12,}=*)|authorization[\x22']?[ \t]*[:=][ \t]*[\x22']?([A-Za-z0-9._~+/-]{20,}=*)(?:[^A-Za-z0-9._~+/=-]|$)",
            Check::Bearer,
        ),
        grp(
            "session-cookie",
            "session-cookie",
            // ` -b `: curl's and wget's short flag for a cookie.
            &["cookie", " -b "],
            r"(?i)\b[A-Za-z0-9_.-]*(?:sess|sid|auth|token|csrf|jwt|remember)[A-Za-z0-9_.-]*=([^;\s\x22',]{8,})",
            Check::None,
        ),
        // The keyword is the quoted member name the match opens with, so
        // the rule is searched only there (`ANCHORED_RULES`); a bare `auth`
        // is in every `author`, `oauth` and `Authorization`.
        grp(
            "docker-config-auth",
            "basic-auth",
            &["\"auth\""],
            r#""auth"\s*:\s*"([A-Za-z0-9+/]{8,}={0,2})""#,
            Check::Basic,
        ),
        // --- More providers (issue 10's long tail) ---
        // The 16-byte prefix and the bech32 body name the format alone; a
        // repetitive body is still a well-formed key.
        RuleDef {
            min_entropy: NO_ENTROPY_FLOOR,
            ..tok(
                "age-secret-key",
                "age-secret-key",
                &["age-secret-key-1"],
                r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
            )
        },
        // Azure DevOps personal access tokens in the 84-character format
        // (2024 on): `AZDO` at offset 76 is the format's own signature. The
        // body holds a run of `A`s by construction, so the repetition tests
        // that reject placeholders would reject every real token.
        RuleDef {
            min_entropy: NO_ENTROPY_FLOOR,
            ..tok(
                "azure-devops-pat",
                "azure-devops-pat",
                &["azdo"],
                r"[A-Za-z0-9]{76}AZDO[A-Za-z0-9]{4}",
            )
        },
        tok(
            "alibaba-access-key-id",
            "alibaba-key",
            &["ltai"],
            r"LTAI[A-Za-z0-9]{20}",
        ),
        tok(
            "doppler-token",
            "doppler-token",
            &[
                "dp.pt.",
                "dp.st.",
                "dp.sa.",
                "dp.ct.",
                "dp.scim.",
                "dp.audit.",
            ],
            r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9_.-]{40,}",
        ),
        tok(
            "dynatrace-token",
            "dynatrace-token",
            &["dt0c01."],
            r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}",
        ),
        tok(
            "mapbox-token",
            "mapbox-token",
            &["pk.", "sk.", "tk."],
            r"(?:pk|sk|tk)\.[A-Za-z0-9]{60}\.[A-Za-z0-9_-]{22}",
        ),
        tok(
            "notion-token",
            "notion-token",
            &["ntn_"],
            r"ntn_[0-9]{11}[A-Za-z0-9]{32,35}",
        ),
        tok(
            "sourcegraph-token",
            "sourcegraph-token",
            &["sgp_", "sgph_"],
            r"sgph?_(?:[A-Za-z0-9]{16}|local)_[A-Za-z0-9]{40}|sgp_[a-fA-F0-9]{40}",
        ),
        grp(
            "teams-webhook",
            "teams-webhook",
            &[".webhook.office.com", "outlook.office.com/webhook"],
            r#"(?:[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/|outlook\.office\.com/webhook/)([^\s"'<>`]{20,})"#,
            Check::None,
        ),
        tok(
            "square-token",
            "square-token",
            &["sq0atp-", "sq0csp-", "eaaa"],
            r"sq0atp-[A-Za-z0-9_-]{22,60}|sq0csp-[A-Za-z0-9_-]{43}|EAAA[A-Za-z0-9_-]{60,}",
        ),
        tok(
            "postman-token",
            "postman-token",
            &["pmak-"],
            r"PMAK-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}",
        ),
        tok(
            "supabase-token",
            "supabase-token",
            &["sbp_", "sb_secret_"],
            r"sbp_(?:v0_)?[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{30,}",
        ),
        tok(
            "tailscale-key",
            "tailscale-key",
            &["tskey-"],
            r"tskey-(?:api-|auth-|client-|webhook-|scim-)?[A-Za-z0-9]{6,}-[A-Za-z0-9]{20,}",
        ),
        grp(
            "wireguard-private-key",
            "private-key",
            &["privatekey"],
            r"(?i)PrivateKey\s*=\s*([A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=)",
            Check::None,
        ),
        // A JSON Web Key's private members: `d` (EC, RSA, OKP), RSA's
        // primes and CRT values (`p`, `q`, `dp`, `dq`, `qi`: either prime
        // alone factors the modulus) and an `oct` key's `k`. The public
        // members (`n`, `e`, `x`, `y`) stay.
        grp(
            "jwk-private-member",
            "private-key",
            &[
                "\"d\"", "\"p\"", "\"q\"", "\"dp\"", "\"dq\"", "\"qi\"", "\"k\"",
            ],
            r#""(?:d|p|q|dp|dq|qi|k)"\s*:\s*"([A-Za-z0-9_-]{40,4096})""#,
            Check::Token,
        ),
        tok(
            "azure-ad-client-secret",
            "azure-client-secret",
            &["q~"],
            r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}",
        ),
        tok(
            "facebook-access-token",
            "facebook-token",
            &["eaac", "eaab"],
            r"EAA[BC][A-Za-z0-9]{100,}",
        ),
        grp(
            "nuget-config-password",
            "password",
            &["<add"],
            r#"(?i)<add\s+key\s*=\s*["'](?:ClearText)?Password["']\s+value\s*=\s*["']([^"']{1,})["']"#,
            Check::Password,
        ),
        // A Kubernetes `Secret`'s `data:` block read as one text (a decoded
        // view); plain text line by line is `conversation::yaml_data_value`.
        grp(
            "yaml-data-base64",
            "encoded-secret",
            &["data:"],
            r#"(?m)^[ \t]+[A-Za-z0-9_.-]+:[ \t]*["']?([A-Za-z0-9+/]{12,}={0,2})["']?[ \t]*$"#,
            Check::Base64Text,
        ),
        tok(
            "alibaba-sts-key-id",
            "alibaba-key",
            &["sts."],
            r"STS\.[A-Za-z0-9]{20,30}",
        ),
        tok(
            "asaas-token",
            "asaas-token",
            &["$aact_"],
            r"\$aact_(?:prod|hmlg)_[A-Za-z0-9_-]{30,}",
        ),
        tok(
            "midtrans-key",
            "midtrans-key",
            &["mid-server-", "mid-client-"],
            r"Mid-(?:server|client)-[A-Za-z0-9_-]{16,}",
        ),
        tok(
            "devin-token",
            "devin-token",
            &["apk_", "cog_"],
            r"apk_(?:user_)?[A-Za-z0-9+/]{40,}={0,2}|cog_[a-z0-9]{52}",
        ),
        tok(
            "docker-swarm-key",
            "docker-swarm-key",
            &["swmkey-1-"],
            r"SWMKEY-1-[A-Za-z0-9+/]{40,44}",
        ),
        tok(
            "figma-token",
            "figma-token",
            &["figd_"],
            r"figd_[A-Za-z0-9_-]{40}",
        ),
        tok(
            "langsmith-key",
            "langsmith-key",
            &["lsv2_"],
            r"lsv2_(?:sk|pt)_[a-f0-9]{32}_[a-f0-9]{10}",
        ),
        tok(
            "ramp-client-id",
            "ramp-key",
            &["ramp_id_", "ramp_sec_"],
            r"ramp_(?:id|sec)_[A-Za-z0-9]{40}",
        ),
        tok(
            "endorlabs-key",
            "endorlabs-key",
            &["endr+"],
            r"endr\+[A-Za-z0-9_-]{16}",
        ),
        tok(
            "aiven-token",
            "aiven-token",
            &["aivenv1 "],
            r"aivenv1 [A-Za-z0-9+/=]{100,}",
        ),
        tok(
            "notify-api-key",
            "notify-key",
            &["gcntfy-"],
            r"(?i)gcntfy-[a-z0-9_-]+-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}",
        ),
        tok(
            "facebook-app-token",
            "facebook-token",
            &["facebook", "fb_", "fb-"],
            r"[0-9]{15,16}\|[A-Za-z0-9_-]{27}",
        ),
        // `EAA` and a capital: a Meta (Facebook, Instagram) access token;
        // the prefix names the format, so a sequential-looking body is
        // still one (`Check::ProviderToken`).
        RuleDef {
            check: Check::ProviderToken,
            ..tok(
                "facebook-page-token",
                "facebook-token",
                &["eaa"],
                r"EAA[A-Z][A-Za-z0-9]{40,}",
            )
        },
        tok(
            "intra42-secret",
            "intra42-secret",
            &["s-s4t2ud-", "s-s4t2af-"],
            r"s-s4t2(?:ud|af)-[a-f0-9]{64}",
        ),
        tok(
            "cloudflare-origin-ca-key",
            "cloudflare-key",
            &["v1.0-"],
            r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",
        ),
        tok(
            "easypost-token",
            "easypost-token",
            &["eztk", "ezak"],
            r"EZ[AT]K[A-Za-z0-9]{54}",
        ),
        tok(
            "openshift-token",
            "openshift-token",
            &["sha256~"],
            r"sha256~[A-Za-z0-9_-]{43}",
        ),
        tok(
            "mailchimp-key",
            "mailchimp-key",
            &[
                "-us1", "-us2", "-us3", "-us4", "-us5", "-us6", "-us7", "-us8", "-us9",
            ],
            r"[a-f0-9]{32}-us[0-9]{1,2}",
        ),
        tok(
            "adobe-client-secret",
            "adobe-secret",
            &["p8e-"],
            r"p8e-[A-Za-z0-9]{32}",
        ),
        tok(
            "grafana-cloud-token",
            "grafana-token",
            &["glc_"],
            r"glc_[A-Za-z0-9+/]{32,400}={0,2}",
        ),
        tok(
            "harness-token",
            "harness-token",
            &["pat.", "sat."],
            r"(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
        ),
        tok(
            "huggingface-org-token",
            "huggingface-token",
            &["api_org_"],
            r"api_org_[A-Za-z]{34}",
        ),
        tok(
            "airtable-pat",
            "airtable-token",
            &["pat"],
            r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}",
        ),
        tok(
            "authress-key",
            "authress-key",
            &[".acc_", ".acc-"],
            r"(?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_-][A-Za-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}",
        ),
        tok(
            "onepassword-secret-key",
            "1password-secret-key",
            &["a3-"],
            r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
        ),
        tok(
            "flyio-token",
            "flyio-token",
            &["fo1_", "fm1a_", "fm1r_", "fm2_", "flyv1 "],
            r"fo1_[A-Za-z0-9_-]{43}|fm1[ar]_[A-Za-z0-9+/]{100,}={0,3}|fm2_[A-Za-z0-9+/]{100,}={0,3}|FlyV1 [A-Za-z0-9=_,/+-]{100,}",
        ),
        tok(
            "gemini-api-key",
            "google-api-key",
            &["aq.ab8rn6"],
            r"AQ\.Ab8RN6[A-Za-z0-9_-]{44}",
        ),
        tok(
            "posthog-personal-key",
            "posthog-key",
            &["phx_", "phc_"],
            r"phx_[A-Za-z0-9_-]{41,49}|phc_[A-Za-z0-9_-]{39,45}",
        ),
        tok(
            "cockroach-cloud-key",
            "cockroach-key",
            &["ccdb1_"],
            r"CCDB1_[A-Za-z0-9]{22}_[A-Za-z0-9]{40}",
        ),
        // Base64 of a JWT (`eyJ` encodes to `ZXlK`): a token wrapped once more.
        tok(
            "jwt-base64",
            "jwt",
            &["zxlk"],
            r"ZXlK[A-Za-z0-9+/]{60,}={0,2}",
        ),
        // --- Transcript habits: secrets typed the way people type them ---
        grp(
            "aws-cli-secret",
            "aws-secret-key",
            &["configure"],
            r#"(?i)\baws\s+configure\s+set\s+(?:[A-Za-z0-9_.-]+\.)?aws_(?:secret_access_key|session_token)\s+["']?([A-Za-z0-9/+=]{40,})"#,
            Check::None,
        ),
        RuleDef {
            min_entropy: 3.5,
            ..grp(
                "aws-secret-after-key-id",
                "aws-secret-key",
                &["akia", "asia"],
                // Within a short phrase of the key id (`AKIA… / S`, `AKIA… and
                // the secret is S`), a 40-byte base64 word.
                r"(?:AKIA|ASIA)[A-Z0-9]{16}(?:[^\n]{0,60}?[^A-Za-z0-9/+\n])?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)",
                Check::Generic,
            )
        },
        // `docker login -u bob -p PW`, `az login -u bob -p PW`: a tool from
        // `REGISTRY_LOGIN_TOOLS` logging in with a password on the command
        // line (a value starting with `-` is the next flag).
        grp(
            "registry-login-password",
            "password",
            &["login"],
            r#"(?i)\b(?:docker|podman|buildah|skopeo|helm\s+registry|oras|nerdctl|az|oc|cf)\s+login\b[^\n]*?\s(?:-p|--password)(?:=|\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::Password,
        ),
        // A setting whose name and value are two attributes or an element of
        // a settings tag (`add`, `property`, `param`, `entry`, …):
        // .NET `<add key="ApiKey" value="V" />`, Spring's `<property
        // name="password" value="V"/>`, Java properties XML `<entry
        // key="db.password">V</entry>`, `<property
        // name="hibernate.connection.password">V</property>`, Tomcat's
        // `<Environment name="DB_PASS" value="V"/>`.
        grp(
            "xml-named-setting",
            "generic-secret",
            &[
                "<add ",
                "<property ",
                "<param ",
                "<parameter ",
                "<constant ",
                "<entry ",
                "<setting ",
                "<env ",
                "<variable ",
                "<environment ",
            ],
            leak(format!(
                r#"(?i)<(?:add|property|param|parameter|constant|entry|setting|env|variable|environment)\s+(?:key|name)\s*=\s*["'](?:[A-Za-z0-9_.:/-]*{SETTING_SECRET_NAMES}[A-Za-z0-9_.:/-]*|[A-Za-z0-9_.:/-]*[_.-]pass)["'](?:\s*>\s*([^<>\s]{{4,}})\s*</|(?:\s+[A-Za-z_:-]+\s*=\s*"[^"\n]*")*?\s+value\s*=\s*(?:"([^"\n]{{4,}})"|'([^'\n]{{4,}})'))"#
            )),
            Check::EntryPassword,
        ),
        // A property list's key named like a secret and its string value
        // (`Info.plist`, `GoogleService-Info.plist`): `<key>APIKey</key>` ⏎
        // `<string>V</string>` — one text in a decoded view, or on one line.
        // Apps' settings and labels share these files, so the value must
        // read as a key (the prose rules' shape, 12 bytes or more).
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "plist-secret",
                "generic-secret",
                &["</key>"],
                leak(format!(
                    r#"(?i)<key>[A-Za-z0-9_.:-]*{SETTING_SECRET_NAMES}[A-Za-z0-9_.:-]*</key>\s*<string>([^<>\s]{{12,}})</string>"#
                )),
                Check::ProseSecret,
            )
        },
        // A REPL asked for a secret and printed it: the prompt line's
        // expression names one (`>>> os.environ["DB_PASSWORD"]`,
        // `irb(main):001> ENV["API_TOKEN"]`, `> process.env.SESSION_SECRET`,
        // `In [3]: settings.SECRET_KEY`, `iex(1)> System.get_env("TOKEN")`)
        // and the next line is the quoted value (after `=> ` or `Out[3]: `).
        // One text in a decoded view (the prompt and the value at a line's ends or a
        // JSON string's); plain text line by line is
        // `conversation::Conversation::repl_value`.
        grp(
            "repl-secret",
            "generic-secret",
            REPL_KEYWORDS,
            leak(format!(
                r#"(?im)(?:^|"){}\n{REPL_VALUE}(?:$|")"#,
                repl_prompt_expr()
            )),
            Check::Password,
        ),
        // An Android string resource named like a secret:
        // `<string name="api_key">V</string>`. Most string resources are UI
        // text (`<string name="password">Kennwort</string>`), so the value
        // must read as a key: 16 bytes or more, the prose rules' shape.
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "android-string-secret",
                "generic-secret",
                &["<string "],
                leak(format!(
                    r#"(?i)<string\s+name\s*=\s*["'][A-Za-z0-9_.:-]*{SETTING_SECRET_NAMES}[A-Za-z0-9_.:-]*["'][^<>]*>([^<>\s]{{16,}})</string>"#
                )),
                Check::ProseSecret,
            )
        },
        // An `env` list entry named like a secret (Kubernetes, Compose, CI):
        // `- name: DB_PASSWORD` ⏎ `  value: "V"` — one text in a decoded
        // view; read line by line in plain text
        // (`conversation::Conversation::env_value`, reporting as this rule).
        grp(
            "env-entry-secret",
            "generic-secret",
            &["- name:"],
            leak(format!(
                r#"(?i)-[ \t]+name:[ \t]*["']?[A-Za-z0-9_.-]*{SETTING_SECRET_NAMES}[A-Za-z0-9_.-]*["']?[ \t]*\r?\n[ \t]+value:[ \t]*(?:"([^"\n]{{4,}})"|'([^'\n]{{4,}})'|([^\s"'#][^\s"'#]{{3,}}))"#
            )),
            Check::EntryPassword,
        ),
        // HTTP basic auth as a pair in code: Python `requests`' `auth=("bob",
        // "V")`, `HTTPBasicAuth("bob", "V")`, `BasicAuth("bob", "V")`.
        grp(
            "code-basic-auth-pair",
            "password",
            &["auth=", "auth =", "basicauth("],
            r#"(?:\bauth\s*=\s*\(|BasicAuth\()\s*(?:"[^"\n]{1,64}"|'[^'\n]{1,64}')\s*,\s*(?:"([^"\n]{4,})"|'([^'\n]{4,})')"#,
            Check::FlagPassword,
        ),
        // A `pass` key with a quoted value (nodemailer's `auth: { user,
        // pass: "V" }`, `"pass": "V"`, `pass = 'V'`); bare `pass` is every
        // "tests pass", so the quote is required.
        grp(
            "pass-key-password",
            "password",
            &["pass:", "pass\":", "pass':", "pass =", "pass="],
            r#"(?:^|[^A-Za-z0-9_.-])["']?pass["']?[ \t]*(?::|=)[ \t]*(?:"([^"\n]{4,})"|'([^'\n]{4,})')"#,
            Check::FlagPassword,
        ),
        // Commands that store a secret take it as an argument: `gh secret
        // set N --body V`, `aws secretsmanager create-secret …
        // --secret-string V`, `az keyvault secret set … --value V` (Expo's
        // `eas secret:create … --value V`), `aws ssm
        // put-parameter … --type SecureString … --value V`, `dotnet
        // user-secrets set N V`, `ansible-vault encrypt_string 'V'`,
        // `doppler secrets set N V`, macOS `security add-generic-password …
        // -w V`, `kubectl create secret generic N --from-literal=K=V` (a
        // JSON `--secret-string` loses what is inside its braces), and a
        // here-string into `gcloud secrets`, `docker secret
        // create`, `vercel env add`, `wrangler secret put`, `secret-tool
        // store`, `pass insert`, `passwd`-like commands, or a command reading a
        // token or password on standard input (`gh auth login --with-token
        // <<< V`, `… --password-stdin <<< V`).
        grp(
            "secret-store-command",
            "generic-secret",
            &[
                "secret set",
                "secret:create",
                "secretsmanager",
                "securestring",
                "user-secrets",
                "encrypt_string",
                "doppler secrets",
                "add-generic-password",
                "add-internet-password",
                "<<<",
                "from-literal",
            ],
            r#"(?i)\bgh\s+secret\s+set\b[^\n|;&]*?\s(?:--body|-b)(?:=|\s+)?(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\bsecretsmanager\s+(?:create-secret|put-secret-value|update-secret)\b[^\n|;&]*?\s--secret-string(?:=|\s+)(?:'\{([^'\n]{4,})\}'|"\{((?:[^"\\\n]|\\.){4,})\}"|'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\b(?:keyvault\s+secret\s+set|eas\s+secret:create)\b[^\n|;&]*?\s--value(?:=|\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\bput-parameter\b[^\n|;&]*?SecureString[^\n|;&]*?\s--value(?:=|\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\bput-parameter\b[^\n|;&]*?\s--value(?:=|\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))["']?[^\n|;&]*?SecureString|\buser-secrets\s+set\s+["']?[^\s"']+["']?\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\bencrypt_string\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\bdoppler\s+secrets\s+set\s+[A-Za-z0-9_]+(?:=|\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\bsecurity\s+add-(?:generic|internet)-password\b[^\n|;&]*?\s-w\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\b(?:gcloud\s+secrets|docker\s+secret\s+create|vercel\s+env\s+add|wrangler\s+secret\s+put|gh\s+secret\s+set|secret-tool\s+store|(?:go)?pass\s+insert|smbpasswd|chpasswd|passwd|kinit|cryptsetup)\b[^\n|;&]*?<<<[ \t]*(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>]{4,}))|--(?:with-token|password-stdin|token-stdin)\b[^\n|;&]*?<<<[ \t]*(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>]{4,}))|--from-literal[= ]["']?[A-Za-z0-9_.-]+=(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>]{4,}))"#,
            Check::FlagPassword,
        ),
        // A secrets store set from the command line, every `NAME=V` pair
        // after the command a secret whatever its name (`fly secrets set
        // -a api GEOCODER=V TOKEN=W`, `supabase secrets set N=V`): the pairs
        // are taken as one value, names and all, since a match ends where
        // the next search starts and only the first pair follows the
        // command's name.
        grp(
            "secrets-set-pairs",
            "generic-secret",
            &["secrets set"],
            r#"(?i)\b(?:fly|flyctl|supabase)\s+secrets\s+set\b(?:\s+--?[a-z][a-z-]*(?:[= ][^\s=|;&]+)?)*?\s+([A-Za-z_][A-Za-z0-9_]*=(?:'[^'\n]+'|"[^"\n]+"|[^\s"'`;&|<>]+)(?:\s+[A-Za-z_][A-Za-z0-9_]*=(?:'[^'\n]+'|"[^"\n]+"|[^\s"'`;&|<>]+))*)"#,
            Check::SecretPairs,
        ),
        // A tool's `config set NAME V` where NAME is a secret's: `wp config
        // set DB_PASSWORD V`, `git config --global github.token V`, `npm
        // config set _authToken V`, `composer config github-oauth.github.com
        // V`, `pulumi config set dbPassword V` (with `--secret` too: the
        // value is on the command line either way).
        grp(
            "config-set-secret",
            "generic-secret",
            &["config set", "git config", "composer config"],
            r#"(?i)(?:\b(?:wp|npm|yarn|pnpm|pip|pulumi)\s+config\s+set|\b(?:git|composer)\s+config)\b(?:\s+--?[A-Za-z-]+)*\s+["']?[A-Za-z0-9_.:/@-]*(?:password|passwd|secret|token|api[_-]?key|oauth)[A-Za-z0-9_.:/@-]*["']?\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>=-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // Server config directives that hold a password: Redis'
        // `requirepass PW` / `masterauth PW` (also through `CONFIG SET`) and
        // Sentinel's `sentinel auth-pass MASTER PW`, a
        // Wi-Fi pre-shared key (`psk="PW"` in wpa_supplicant and
        // NetworkManager files), keepalived's `auth_pass PW`, an LDAP
        // client's bind password (`bindpw PW` in nslcd.conf, `bind_pw = PW`,
        // slapd's `rootpw PW`), and LDIF's password attributes
        // (`olcRootPW: PW`, `userPassword:: base64`; a `{SCHEME}` hash is
        // `password-scheme-hash`'s). At the start of a line or of a quoted
        // string.
        grp(
            "config-directive-password",
            "password",
            &[
                "requirepass",
                "masterauth",
                "auth-pass",
                "psk",
                "auth_pass",
                "bindpw",
                "bind_pw",
                "rootpw",
                "userpassword:",
                "sambantpassword:",
            ],
            r#"(?i)(?:(?:^|["\n])[ \t]*|\bconfig\s+set\s+)(?:requirepass|masterauth|sentinel[ \t]+auth-pass[ \t]+[^\s"']+)[ \t]+["']?([^\s"'#]{4,})|(?m)(?:^|["\n])[ \t]*(?:wpa_)?psk[ \t]*=[ \t]*(?:"([^"\n]{8,63})"|([^\s"'#]{8,64}))|(?m)(?:^|["\n])[ \t]*(?:auth_pass|bindpw|bind_pw|rootpw)(?:[ \t]*=[ \t]*|[ \t]+)["']?([^\s"'#]{4,})|(?m)(?:^|["\n])[ \t]*(?:olc(?:Db)?RootPW|userPassword|sambaNTPassword)::?[ \t]*([^\s"'#{][^\s"'#]{3,})"#,
            Check::FlagPassword,
        ),
        // A `.pgpass` line, `host:port:database:user:password` (`*` for any
        // of the first four), at the start of a line or of a quoted
        // string (`echo "db:5432:app:bob:PW" >> ~/.pgpass`).
        grp(
            "pgpass-line",
            "password",
            &[":5432:", ":5433:", ":6432:", ":*:"],
            r#"(?m)(?:^|["'\n])[ \t]*(?:[A-Za-z0-9_.-]+|\*):(?:[0-9]{1,5}|\*):[A-Za-z0-9_.$*-]+:[A-Za-z0-9_.@$*-]+:([^\s:"']{4,})[ \t]*(?:$|["'\n])"#,
            Check::FlagPassword,
        ),
        // `psexec \\host -u USER -p PASSWORD cmd`.
        grp(
            "psexec-password",
            "password",
            &["psexec"],
            r#"(?i)\bpsexec(?:\.exe)?\b[^\n]*?\s-p\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>]{4,}))"#,
            Check::Password,
        ),
        // Clients whose `-p` (or `--password`) is the password of the `-u`
        // user: MongoDB's shells and tools, remote-shell and SMB tools
        // (`evil-winrm -i H -u U -p PW`, `crackmapexec smb H -u U -p PW`),
        // `rdesktop`, InfluxDB's `influx setup -u U -p PW`. A value starting
        // with `-` is the next flag (`-p` alone
        // prompts).
        grp(
            "client-flag-password",
            "password",
            &[
                "mongo",
                "evil-winrm",
                "crackmapexec",
                "netexec",
                "nxc ",
                "smbmap",
                "rdesktop",
                "redis-cli",
                "influx",
            ],
            r#"(?i)\b(?:mongo(?:sh|dump|restore|export|import|stat|top|files)?|evil-winrm|crackmapexec|netexec|nxc |smbmap|rdesktop|influx)\b[^\n]*?\s(?:-p|--password)(?:=|\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\bredis-cli\b[^\n]*?\s(?:-a|--pass)\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // Archive and crypto tools given a password as a flag: `zip -P PW`
        // (upper case: `unzip -p` pipes), `7z a -pPW`, `rar a -hpPW` (glued), OpenSSL's
        // `-passin pass:PW` / `-passout pass:PW` (`env:` and `file:` name
        // where it is) and `enc -k PW` / `-K HEXKEY`.
        grp(
            "tool-flag-password",
            "password",
            &["zip -", "7z ", "7za ", "7zr ", "7zz ", "rar ", "openssl"],
            r#"(?i:\b(?:zip|unzip))\b[^\n]*?\s(?:-P|--password)(?:=|\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|(?i:\b(?:7z[azr]?|rar|unrar))\b[^\n]*?\s-(?:p|hp)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|(?i:\bopenssl)\b[^\n]*?\s-(?:pass(?:in|out)?|password)\s+["']?pass:([^\s"'`;&|<>]{4,})|(?i:\bopenssl)\b[^\n]*?\s-[kK]\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // Servers' user commands that take the password as an argument:
        // Redis' `ACL SETUSER bob on >PW`, `mosquitto_passwd -b FILE bob
        // PW`, MinIO's `mc alias set NAME URL ACCESS SECRET`, the Azure
        // CLI's `az sql server create … -p PW` (`--admin-password`).
        grp(
            "server-user-password",
            "password",
            &[
                "setuser",
                "mosquitto_passwd",
                "mc alias set",
                "mc config host add",
                "az sql ",
                "az vm ",
                "az postgres ",
                "az mysql ",
            ],
            r#"(?i:\bACL\s+SETUSER)\s+[^\s>]+(?:\s+[^\s>]+)*?\s+>([^\s"'`;&|<>]{4,})|\bmosquitto_passwd\b[^\n]*?\s-b\s+\S+\s+\S+\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\bmc\s+(?:alias\s+set|config\s+host\s+add)\s+\S+\s+\S+\s+\S+\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\baz\s+(?:sql|vm|postgres|mysql)\b[^\n|;&]*?\s(?:-p|--admin-password|--password)(?:=|\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // Java key stores: `keytool` / `jarsigner` `-storepass PW`,
        // `-keypass PW` and their `src` / `dest` forms (`-storepass:env V`
        // and `:file` name where it is). Each flag is matched on its own:
        // one command often carries two.
        grp(
            "keystore-password",
            "password",
            &["storepass", "keypass"],
            r#"\s-(?:src|dest)?(?:store|key)pass[ \t]+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // `ssh-keygen -p -P OLD -N NEW`: the old and new passphrases, one
        // rule each (a rule's search resumes after its match, past the tool
        // name the other flag needs).
        grp(
            "ssh-keygen-old-passphrase",
            "password",
            &["ssh-keygen"],
            r#"\bssh-keygen\b[^\n]*?\s-P[ \t]*(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        grp(
            "ssh-keygen-new-passphrase",
            "password",
            &["ssh-keygen"],
            r#"\bssh-keygen\b[^\n]*?\s-N[ \t]*(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // `htpasswd -b[c] FILE USER PW`, `htpasswd -nb USER PW`: in batch
        // mode (`-b`) the password is the command's last word.
        grp(
            "htpasswd-password",
            "password",
            &["htpasswd"],
            r#"\bhtpasswd\b[^\n;&|]*?\s-[A-Za-z]*b[A-Za-z]*\s[^\n;&|]*?\s(?:'([^'\n]{4,})'|"([^"\n]{4,})"|["']?([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}?))["']?[ \t]*(?:$|[;&|)>\n},\]])"#,
            Check::FlagPassword,
        ),
        // OpenLDAP's clients bind with `-w PW` (`-W` prompts).
        grp(
            "ldap-bind-password",
            "password",
            &["ldap"],
            r#"(?i:\bldap(?:search|add|modify|delete|modrdn|passwd|whoami|compare|exop))\b[^\n]*?\s-w[ \t]*(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // `ldappasswd -a OLD -s NEW`: each flag on its own (one command
        // often carries both), on a line that runs `ldappasswd`.
        grp(
            "ldappasswd-password",
            "password",
            &["ldappasswd"],
            r#"\s-[as][ \t]+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // `rabbitmqctl add_user NAME PW`, `rabbitmqctl change_password NAME
        // PW`.
        grp(
            "rabbitmq-user-password",
            "password",
            &["rabbitmqctl"],
            r#"\brabbitmqctl\b[^\n]*?\s(?:add_user|change_password)\s+["']?[^\s"']+["']?\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // Oracle's tools take `USER/PW[@db]`: `sqlplus system/PW@//h/ORCL`,
        // `rman target sys/PW@db`, `expdp … userid=scott/PW`, a thin JDBC
        // URL `jdbc:oracle:thin:app/PW@//h:1521/ORCL`. The password may
        // hold `& ; | < >` past its first byte (quoted for the shell).
        grp(
            "oracle-user-password",
            "password",
            &[
                "sqlplus",
                "rman target",
                "expdp",
                "impdp",
                "sqlldr",
                "dgmgrl",
                "userid=",
                "jdbc:oracle:",
            ],
            r#"(?i:\b(?:sqlplus|rman\s+target|expdp|impdp|sqlldr|dgmgrl)\b[^\n]*?\s|\buserid=|\bjdbc:oracle:(?:thin|oci):)["']?[A-Za-z][A-Za-z0-9_$#]*/([^\s@/"'`;&|<>][^\s@/"'`]{3,})(?:[@"'\s]|$)"#,
            Check::FlagPassword,
        ),
        // SQL: `CREATE USER 'app'@'%' IDENTIFIED BY 'PW'`, `… IDENTIFIED WITH
        // mysql_native_password BY 'PW'`, Oracle's unquoted `IDENTIFIED BY
        // PW` — in a statement about a user, role or login (`GRANT … TO u
        // IDENTIFIED BY`, a database link's `CONNECT TO u IDENTIFIED BY`),
        // not prose (`the row identified by ID`).
        grp(
            "sql-identified-by",
            "password",
            &["identified"],
            r#"(?i)\b(?:user|role|login|grant|connect\s+to)\b[^\n;]*?\bidentified\s+(?:with\s+['"`]?[A-Za-z0-9_]+['"`]?\s+)?by\s+(?:password\s+)?(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s'"`;,)]{4,}))"#,
            Check::FlagPassword,
        ),
        // A password file that is a process substitution: `restic
        // --password-file <(echo PW)`, `--passphrase-file <(printf '%s' PW)`,
        // `gcloud secrets create N --data-file=<(echo -n V)`.
        grp(
            "substituted-password-file",
            "password",
            &["<(echo", "<(printf", "<( echo", "<( printf"],
            r#"(?i)--?[A-Za-z_-]*(?:pass|secret|token|key|data-file)[A-Za-z_-]*(?:=|\s+)<\(\s*(?:echo|printf)\s+(?:-[neE]+\s+)?(?:'%s(?:\\n)?'\s+|"%s(?:\\n)?"\s+)?(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s'"|;&<>()]{4,}))\s*\)"#,
            Check::FlagPassword,
        ),
        // Device and broker clients: `ipmitool … -P PW` and mosquitto's
        // `-P PW` (upper case: their `-p` is a port), `rabbitmqadmin -p PW`
        // (lower case: its `-P` is the port), net-snmp's community `-c C`
        // and SNMPv3 `-A AUTHPASS` / `-X PRIVPASS` (`public` and `private`,
        // all lower case, stay).
        grp(
            "device-flag-password",
            "password",
            &["ipmitool", "mosquitto_", "rabbitmqadmin", "snmp"],
            r#"\b(?:ipmitool|mosquitto_(?:pub|sub|rr))\b[^\n]*?\s-P\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\brabbitmqadmin\b[^\n]*?\s(?:-p|--password)(?:=|\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))|\bsnmp[a-z]*\b[^\n]*?\s-[cA]\s*(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // SNMPv3's privacy pass phrase, a rule of its own: it follows `-A`
        // in the same command, past which the rule above resumes.
        grp(
            "snmp-priv-password",
            "password",
            &["snmp"],
            r#"\bsnmp[a-z]*\b[^\n]*?\s-X\s*(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // Redis' `AUTH PW` (and `AUTH user PW`), SMTP's `AUTH PLAIN
        // <base64>`, typed at a prompt or sent by a script: upper case, the
        // value ends the line or a quoted string.
        grp(
            "auth-command-password",
            "password",
            &["auth "],
            r#"(?m)(?:^|[>\s"'])AUTH [ \t]*(?:[A-Za-z0-9_.@-]+[ \t]+)?([^\s"'`]{6,})[ \t]*(?:$|["'])"#,
            Check::Bearer,
        ),
        // A password fed on standard input: `echo PW | sudo -S …`, `echo PW
        // | docker login -u bob --password-stdin` (also `--token-stdin`, and
        // `gh auth login --with-token`), `echo 'bob:PW' |
        // chpasswd`, `echo -e "PW\nPW" | passwd bob`, `smbpasswd -s`, `gpg
        // --passphrase-fd 0`, `kinit`, `cryptsetup`, and commands
        // that store a secret read from it (`gcloud secrets create`, `docker
        // secret create`, `vercel env add`, `wrangler secret put`, `gh
        // secret set`).
        grp(
            "stdin-password",
            "password",
            &[
                "sudo -s",
                "passwd",
                "passphrase-fd",
                "password-stdin",
                "token-stdin",
                "with-token",
                "--stdin",
                "chpasswd",
                "kinit",
                "cryptsetup",
                "gcloud secrets",
                "secret create",
                "env add",
                "secret put",
                "secret set",
            ],
            r#"(?i:\b(?:echo|printf))\s+(?:-[neE]+\s+)?(?:'%s(?:\\n)?'\s+|"%s(?:\\n)?"\s+)?(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s'"|;&<>]{4,}))[ \t]*\|[ \t]*(?:sudo[ \t]+-S\b|[^\n|]*?--(?:password-stdin|token-stdin|with-token)|(?:sudo\s+)?(?:passwd\b|smbpasswd\b|chpasswd\b|kinit\b|cryptsetup\b)|gpg\b[^\n|]*?--passphrase-fd[ \t=]+0\b|(?:gcloud\s+secrets|docker\s+secret\s+create|vercel\s+env\s+add|wrangler\s+secret\s+put|gh\s+secret\s+set)\b)"#,
            Check::FlagPassword,
        ),
        // SQL Server's command-line tools take the password as `-P` (upper
        // case; `-p` prints statistics), often glued to it.
        grp(
            "sqlcmd-password",
            "password",
            &[
                "sqlcmd",
                "bcp ",
                "bcp.exe",
                "osql ",
                "osql.exe",
                "mssql-cli",
            ],
            r#"(?i:\b(?:sqlcmd\b|bcp(?: |\.exe\b)|osql(?: |\.exe\b)|mssql-cli\b))[^\n]*?\s-P[ \t]*(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // FreeRDP's `/p:PW`, Samba's `-U user%PW`.
        grp(
            "rdp-smb-password",
            "password",
            &["freerdp", "smbclient", "rpcclient", "smbcacls", "smbget"],
            r#"(?i)\b(?:[a-z]*freerdp3?)\b[^\n]*?\s/p:(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>]{4,}))|\b(?:smbclient|rpcclient|smbcacls|smbget)\b[^\n]*?\s(?:-U|--user)(?:=|\s*)["']?[^\s%"']+%([^\s"'`;&|<>]{4,})"#,
            Check::FlagPassword,
        ),
        // Windows: `cmdkey /add:HOST /user:NAME /pass:PW` (the credential
        // manager), `schtasks /Create … /RU NAME /RP PW` (a task's account).
        grp(
            "windows-flag-password",
            "password",
            &["cmdkey", "schtasks"],
            r#"(?i)\bcmdkey(?:\.exe)?\b[^\n]*?\s/pass:(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>/][^\s"'`;&|<>]{3,}))|\bschtasks(?:\.exe)?\b[^\n]*?\s/RP\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>/*][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // Windows: `net user NAME PW /add`, `net use \\host\share PW
        // /user:NAME`, `net use Z: \\host\share /user:NAME PW`.
        grp(
            "net-use-password",
            "password",
            &["net use"],
            r#"(?i)\bnet\s+user\s+[^\s/]+\s+([^\s/*"'`;&|<>-][^\s"'`;&|<>]{3,})|\bnet\s+use\s+(?:[A-Za-z]:\s+)?\\\\[^\s]+\s+([^\s/*"'`;&|<>-][^\s"'`;&|<>]{3,})|\bnet\s+use\b[^\n]*?\s/user:[^\s]+\s+([^\s/*"'`;&|<>-][^\s"'`;&|<>]{3,})"#,
            Check::FlagPassword,
        ),
        grp(
            "cli-user-colon-password",
            "password",
            &["curl", "wget", " -a ", "--auth", " -a"],
            r#"(?i)\b(?:curl|wget|http|https|httpie|xh)\b[^\n]*?\s(?:-u|--user|-a|--auth)(?:=|\s*)["']?[^\s:"'/]{0,64}:([^\s"'`;&|<>]{4,})"#,
            Check::Password,
        ),
        // A continued command's flag line (`curl … \⏎ -u id:secret`).
        grp(
            "continued-user-colon-password",
            "password",
            &["-u ", "--user"],
            r#"^[ \t]*(?:-u|--user)(?:=|[ \t]+)["']?[^\s:"'/]{1,64}:([^\s"'`;&|<>]{4,})"#,
            Check::Password,
        ),
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "prose-secret",
                "generic-secret",
                // The phrases themselves: `token` alone is in every usage
                // record.
                &[
                    "client secret",
                    "client_secret",
                    "client-secret",
                    "clientsecret",
                    "app secret",
                    "app_secret",
                    "app-secret",
                    "appsecret",
                    "api secret",
                    "api_secret",
                    "api-secret",
                    "apisecret",
                    "secret key",
                    "secret_key",
                    "secret-key",
                    "secretkey",
                    "api key",
                    "api_key",
                    "api-key",
                    "apikey",
                    "api token",
                    "api_token",
                    "api-token",
                    "apitoken",
                    "access token",
                    "access_token",
                    "access-token",
                    "accesstoken",
                    "auth token",
                    "auth_token",
                    "auth-token",
                    "authtoken",
                    "access key",
                    "access_key",
                    "access-key",
                    "accesskey",
                ],
                r#"(?i)\b(?:client[ _-]?secret|app[ _-]?secret|secret[ _-]?key|api[ _-]?(?:key|token|secret)|access[ _-]?(?:token|key)|auth[ _-]?token)(?:\s+(?:for|of|to)\s+(?:the\s+|my\s+|our\s+)?[A-Za-z0-9_.-]{1,30}(?:\s+[A-Za-z0-9_.-]{1,30})?)?(?:\s*[:=]\s*|\s+(?:is:?\s+)?)["'`]?([A-Za-z0-9_./+=-]{10,})"#,
                Check::ProseSecret,
            )
        },
        // Credentials named in prose in other languages: "das Passwort ist
        // V", "la contraseña es V", "пароль: V", "パスワード：V", "API
        // キー: V". A value is a word of printable ASCII holding a letter
        // and a digit (`Check::Bearer`), so a sentence's next word is not
        // one. Latin-script names are keywords and may be followed by a
        // linking word; names in other scripts are not keywords (a keyword
        // automaton over non-ASCII bytes would widen every state of it):
        // those rules run where `non_ascii_trigger` finds one of their words
        // before a colon or `=`, the only separator they read.
        grp(
            "prose-password-intl",
            "password",
            &[
                "mot de passe",
                "contrase",
                "passwort",
                "kennwort",
                "senha",
                "wachtwoord",
                "parola",
                "salasana",
                "passord",
                "adgangskode",
                "heslo",
                "jelsz",
                "lozinka",
                "geslo",
                "kata sandi",
                "kata laluan",
            ],
            leak(format!(
                r#"\b(?:[Mm]ot\s+de\s+passe|MOT\s+DE\s+PASSE|[Cc]ontrase(?:ñ|Ñ)a|CONTRASEÑA|[Pp]asswort|PASSWORT|[Kk]ennwort|[Ss]enha|SENHA|[Ww]achtwoord|[Pp]arol(?:a|ă)|[Ss]alasana|[Pp]assord|[Aa]dgangskode|[Hh]eslo|HESLO|[Jj]elsz(?:ó|Ó)|[Ll]ozinka|[Gg]eslo|[Kk]ata\s+sandi|[Kk]ata\s+laluan){INTL_LINK}{INTL_VALUE}"#
            )),
            Check::Bearer,
        ),
        grp(
            "prose-secret-intl",
            "generic-secret",
            &[
                "clave",
                "chave",
                "zugangstoken",
                "api-schl",
                "api schl",
                "apischl",
                "token de acc",
                "token di acc",
                "jeton",
                "api est ",
            ],
            leak(format!(
                r#"\b(?:[Cc]lave\s+(?:de\s+(?:la\s+)?)?(?:API|api)|[Cc]have\s+(?:da\s+)?(?:API|api)|[Zz]ugangstoken|(?:API|[Aa]pi)[- ]?[Ss]chl(?:ü|Ü)ssel|[Tt]oken\s+d[ei]\s+acc?ess?o|[Jj]eton(?:\s+d'acc(?:è|e)s)?|[Cc]l(?:é|É)\s+(?:d'|de\s+l')?API){INTL_LINK}{INTL_VALUE}"#
            )),
            Check::Bearer,
        ),
        grp(
            "prose-password-script",
            "password",
            &[],
            leak(format!(
                r#"(?:has(?:ł|Ł)o|Has(?:ł|Ł)o|(?:ş|Ş)ifre|(?:l|L)(?:ö|Ö)senord|[mM](?:ậ|Ậ)t\s+[kK]h(?:ẩ|Ẩ)u|(?:п|П)ароль|ПАРОЛЬ|(?:κ|Κ)ωδικός|סיסמה|كلمة\s+(?:المرور|السر)|رمز\s+عبور|पासवर्ड|パスワード|暗証番号|密码|密碼|口令|비밀번호|암호|รหัสผ่าน){INTL_SEP}{INTL_VALUE}"#
            )),
            Check::Bearer,
        ),
        grp(
            "prose-secret-script",
            "generic-secret",
            &[],
            leak(format!(
                r#"(?:(?:API|api|Api)[ \t]*(?:キー|키|密钥|密鑰)|アクセストークン|トークン|(?:т|Т)окен|(?:к|К)люч\s+API|API[- ]?(?:к|К)люч|令牌|密钥|密鑰|秘密鍵|(?:c|C)l(?:é|É)\s+(?:d'|de\s+l')?API){INTL_SEP}{INTL_VALUE}"#
            )),
            Check::Bearer,
        ),
        // `token for staging: V`, `the secret of the CI job is V`, `set the
        // secret to V`: the bare words with a phrase naming what they are
        // for (the bare words alone are in every usage record), on their
        // own keywords so the phrase rule above keeps its literal prefix.
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "prose-secret-phrase",
                "generic-secret",
                &[
                    "token for",
                    "token of",
                    "token to",
                    "secret for",
                    "secret of",
                    "secret to",
                ],
                r#"(?i)\b(?:token|secret)\s+(?:(?:for|of)\s+(?:the\s+|my\s+|our\s+)?[A-Za-z0-9_.-]{1,30}(?:\s+[A-Za-z0-9_.-]{1,30})?(?:\s*[:=]\s*|\s+is\s+)|to\s+)["'`]?([A-Za-z0-9_./+=-]{16,})"#,
                Check::Generic,
            )
        },
        // A token or secret pointed at in a sentence: `use this token V`,
        // `here's the token, V`, `my new secret: V`. The value has the
        // prose rules' shape (`this token expires` is not one); `the token
        // is V` is left to the phrase rules (`is` is followed by what the
        // token is as often: `base64url-encoded`). Each two-word phrase is
        // a keyword (one space between the words), so a match starts where
        // a keyword does and the rule is searched only there
        // (`ANCHORED_RULES`).
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "prose-token-pointed",
                "generic-secret",
                &[
                    "this token",
                    "the token",
                    "my token",
                    "your token",
                    "our token",
                    "new token",
                    "this secret",
                    "the secret",
                    "my secret",
                    "your secret",
                    "our secret",
                    "new secret",
                ],
                r#"(?i)\b(?:this|the|my|your|our|new) (?:token|secret)(?:\s*[,:]\s*|\s+)["'`]?([A-Za-z0-9_./+=-]{16,})"#,
                Check::ProseSecret,
            )
        },
        // A variable named for a secret, written in prose: `JWT_SECRET is
        // V`, `I set SECRET_KEY_BASE to V`, `STRIPE_SECRET_KEY was V`. The
        // name is an upper-case identifier holding `_`, the link right after
        // it (`Gate::UpperLink`); the value has the prose rules' shape
        // (`API_KEY is required` is not one).
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "named-secret-prose",
                "generic-secret",
                &["secret", "token", "_key", "apikey"],
                r#"(?:\b(?:[A-Z][A-Z0-9]*_)+[A-Z0-9]*(?:SECRET|TOKEN|KEY|APIKEY)|\b(?:SECRET|TOKEN)(?:_[A-Z0-9]+)+)["'`]?[ \t]+(?:is|was|to|=)[ \t]+(?:now[ \t]+|still[ \t]+)?(?:set[ \t]+to[ \t]+)?["'`]?([A-Za-z0-9_./+=-]{10,})"#,
                Check::ProseSecret,
            )
        },
        // `DB_PASSWORD is V`, `the ADMIN_PASS is now V`: the password names'
        // counterpart (a human password: a letter and a digit).
        grp(
            "named-password-prose",
            "password",
            &["_password", "_passwd", "_pass", "_pwd"],
            r#"\b(?:[A-Z][A-Z0-9]*_)+(?:PASSWORD|PASSWD|PASS|PWD)(?:_[A-Z0-9]+)*["'`]?[ \t]+(?:is|was)[ \t]+(?:now[ \t]+|still[ \t]+)?["'`]?([^\s"'`]{5,63}[^\s"'`.,;:!?)])"#,
            Check::Bearer,
        ),
        // A key named by what it does, in prose: `master key: V`, `the
        // signing key is V`, `encryption key for prod = V` (a bare `key:`
        // names anything: `primary key: id`).
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "qualified-key-prose",
                "generic-secret",
                &[
                    "master key",
                    "master_key",
                    "masterkey",
                    "encryption key",
                    "encryption_key",
                    "decryption key",
                    "decryption_key",
                    "signing key",
                    "signing_key",
                    "session key",
                    "deploy key",
                    "shared key",
                    "hmac key",
                    "aes key",
                    "jwt key",
                    "webhook key",
                    "root key",
                    "admin key",
                    "service key",
                    "app key",
                    "cookie key",
                    "cipher key",
                ],
                r#"(?i)\b(?:master|encryption|decryption|signing|session|deploy|shared|hmac|aes|jwt|webhook|root|admin|service|app|cookie|cipher)[ _]?key\b(?:\s+(?:for|of)\s+(?:the\s+|my\s+|our\s+)?[A-Za-z0-9_.-]{1,30})?(?:\s*[:=]\s*|\s+(?:is|was)\s+(?:now\s+)?)["'`]?([A-Za-z0-9_./+=-]{16,})"#,
                Check::ProseSecret,
            )
        },
        // `the token is V`, `my key was V`: a bare secret word and a long
        // credential-shaped value (`the token is expired` is not one). Its
        // keywords end at the blanks before the value or `now`
        // (`Gate::ValueAfterNow`).
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "bare-secret-word-prose",
                "generic-secret",
                &[
                    "token is ",
                    "token was ",
                    "key is ",
                    "key was ",
                    "secret is ",
                    "secret was ",
                ],
                r#"(?i)\b(?:token|key|secret) (?:is|was) [ \t]*(?:now[ \t]+)?["'`]?([A-Za-z0-9][A-Za-z0-9_./+=-]{19,})"#,
                Check::ProseSecret,
            )
        },
        // A literal key handed to a signing or cipher call: `jwt.encode(p,
        // "K")`, `jwt.sign(p, 'K')`, `jwt.decode(t, "K", …)`, `hmac.new(b"K",
        // …)`, Node's `createHmac("sha256", "K")`, `Fernet(b"K")`,
        // `AES.new(b"K", …)`, Java's `new SecretKeySpec("K".getBytes(), …)`,
        // Rust's `Key::from_slice(b"K")` / `Hmac::new_from_slice(b"K")`,
        // jjwt's `Keys.hmacShaKeyFor("K".getBytes())`.
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "crypto-call-key",
                "generic-secret",
                &[
                    "jwt.encode(",
                    "jwt.sign(",
                    "jwt.decode(",
                    "jwt.verify(",
                    "hmac.new(",
                    "createhmac(",
                    "fernet(",
                    "aes.new(",
                    "secretkeyspec(",
                    "key::from_slice(",
                    "new_from_slice(",
                    "hmacshakeyfor(",
                ],
                r#"(?i)\bjwt\.(?:encode|sign|decode|verify)\(\s*[A-Za-z_][A-Za-z0-9_.]*\s*,\s*b?(?:"([^"\s]{12,})"|'([^'\s]{12,})')|\b(?:hmac\.new|Fernet|AES\.new|Key::from_slice|new_from_slice)\(\s*b?(?:"([^"\s]{12,})"|'([^'\s]{12,})')|\bcreateHmac\(\s*["'][A-Za-z0-9-]+["']\s*,\s*(?:"([^"\s]{12,})"|'([^'\s]{12,})')|\b(?:SecretKeySpec|hmacShaKeyFor)\(\s*"([^"\s]{12,})""#,
                Check::ProseSecret,
            )
        },
        // An OAuth 1 consumer's secret, the call's second argument:
        // tweepy's `OAuthHandler("K", "S")`, requests-oauthlib's
        // `OAuth1Session("K", client_secret="S")`.
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "oauth-consumer-secret",
                "generic-secret",
                &["oauthhandler(", "oauth1session(", "oauth1("],
                r#"\b(?:OAuthHandler|OAuth1Session|OAuth1)\(\s*["'][^"'\s]+["']\s*,\s*(?:client_secret\s*=\s*)?(?:"([^"\s]{12,})"|'([^'\s]{12,})')"#,
                Check::ProseSecret,
            )
        },
        // A password in libcurl's options (`curl_setopt($ch,
        // CURLOPT_USERPWD, "bob:S")`, `CURLOPT_PROXYUSERPWD`,
        // `CURLOPT_PASSWORD, "S"`) or an LDAP bind (`simple_bind_s(dn,
        // "S")`, JNDI's `put(Context.SECURITY_CREDENTIALS, "S")`).
        grp(
            "library-option-password",
            "password",
            &[
                "curlopt_userpwd",
                "curlopt_proxyuserpwd",
                "curlopt_password",
                "simple_bind",
                "bind_s(",
                "security_credentials",
            ],
            r#"\bCURLOPT_(?:PROXY)?USERPWD\s*,\s*["'][^"':\s]*:([^"'\s]{4,})["']|\bCURLOPT_PASSWORD\s*,\s*["']([^"'\s]{4,})["']|\b(?:simple_bind_s|simple_bind|bind_s)\(\s*["'][^"'\n]*["']\s*,\s*["']([^"'\s]{4,})["']|\bSECURITY_CREDENTIALS\s*,\s*"([^"\s]{4,})""#,
            Check::Bearer,
        ),
        // Azure API Management's subscription key as a header or a query
        // parameter (`Ocp-Apim-Subscription-Key: K`, `.Add("Ocp-Apim-…",
        // "K")`, `?subscription-key=K`).
        grp(
            "apim-subscription-key",
            "generic-secret",
            &["subscription-key"],
            r#"(?i)\b(?:ocp-apim-)?subscription-key["']?\s*(?:[:=,]\s*)?["']?([A-Za-z0-9]{32})\b"#,
            Check::Generic,
        ),
        // Twilio's client built from the account SID and the auth token:
        // `Client("AC…", "T")`, `Twilio::REST::Client.new("AC…", "T")`,
        // `Twilio.init("AC…", "T")`, `new TwilioRestClient("AC…", "T")`.
        grp(
            "twilio-client-token",
            "twilio-key",
            &["(\"ac", "('ac"],
            r#"\(\s*["']AC[a-f0-9]{32}["']\s*,\s*["']([a-f0-9]{32})["']"#,
            Check::Generic,
        ),
        // A typed binding named for a secret: Swift's and Kotlin's `let
        // apiToken: String = "T"`, TypeScript's `const apiKey: string =
        // 'T'`, Objective-C's `NSString *const kAPIKey = @"T"`. The name
        // stands right before each keyword (`Gate::SecretNameBefore`):
        // every OpenAPI `type: string` would run it otherwise.
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "typed-secret-binding",
                "generic-secret",
                &[": string", ":string", "= @\"", "=@\""],
                r#"(?i)\b[A-Za-z_][A-Za-z0-9_]*(?:secret|token|api_?key|apikey|password|passwd)[A-Za-z0-9_]*\s*(?::\s*(?:String|string)[?!]?\s*=\s*["'`]([^"'`\s]{8,})["'`]|=\s*@"([^"\s]{8,})")"#,
                Check::ProseSecret,
            )
        },
        // Gradle's Groovy DSL calls a setting with its value as the
        // argument: `storePassword 'S'`, `keyPassword "S"` in an Android
        // `signingConfigs` block.
        grp(
            "gradle-signing-password",
            "password",
            &["storepassword ", "keypassword ", "keystorepassword "],
            r#"\b(?:storePassword|keyPassword|keystorePassword)[ \t]+["']([^"'\s]{4,})["']"#,
            Check::Password,
        ),
        // An EVM account's private key where chain tooling takes one:
        // Foundry's `cast send … --private-key 0x…` / `forge script
        // --private-key …`, a wallet built from one (`new ethers.Wallet("0x…")`,
        // web3.py's `Account.from_key(…)`, viem's `privateKeyToAccount(…)`,
        // web3.js's `accounts.privateKeyToAccount(…)` / `wallet.add(…)`),
        // and Hardhat's `accounts: ["0x…", …]` (the whole list), and `0x`
        // and 64 hex digits named a private key in prose (`private key:
        // 0x…`; the `0x` says an EVM key, not a hex dump). A bare
        // 64-hex string is a transaction hash as often, so the context is
        // what says key.
        grp(
            "evm-private-key",
            "private-key",
            &[
                "--private-key",
                "wallet(",
                "from_key(",
                "fromprivatekey(",
                "privatekeytoaccount(",
                "signingkey(",
                "wallet.add(",
                "accounts:",
                "private key",
                "priv key",
            ],
            r#"(?i)(?:--private-key(?:=|[ \t]+)["']?((?:0x)?[0-9a-f]{64})\b|\bpriv(?:ate)?[ \t]+key\b(?:[ \t]+(?:is|was))?[ \t]*[:=]?[ \t]*["'`]?(0x[0-9a-f]{64})\b|(?:\bWallet|from_key|fromPrivateKey|privateKeyToAccount|SigningKey|wallet\.add)\(\s*["'`]((?:0x)?[0-9a-f]{64})["'`]|\baccounts\s*:\s*\[\s*((?:["'](?:0x)?[0-9a-f]{64}["']\s*,?\s*)+)\])"#,
            Check::None,
        ),
        // A Solana keypair's 64 secret bytes where code or a setting holds
        // them (`Keypair.fromSecretKey(Uint8Array.from([…]))`,
        // `SOLANA_PRIVATE_KEY=[…]`), or their base58 (`fromSecretKey(
        // bs58.decode("…"))`).
        grp(
            "solana-secret-key",
            "private-key",
            &[
                "fromsecretkey",
                "key=[",
                "key = [",
                "key: [",
                "key\":[",
                "key\": [",
            ],
            r#"(?i)(?:fromSecretKey\(\s*(?:Uint8Array\.from\(|new\s+Uint8Array\()?|(?:secret|private)_?key"?\s*[:=]\s*)(?:\[\s*((?:[0-9]{1,3}\s*,\s*){63}[0-9]{1,3})\s*\]|(?:bs58\.decode|decode)\(\s*["']([1-9A-HJ-NP-Za-km-z]{85,90})["'])"#,
            Check::None,
        ),
        // A Bitcoin private key in wallet import format named as one
        // (`importprivkey K…`, `WIF: L…`).
        grp(
            "bitcoin-wif-key",
            "private-key",
            &["wif:", "wif=", "wif ", "privkey"],
            r"(?i:\bwif\b|privkey)[^\n]{0,40}?\b([5KLc9][1-9A-HJ-NP-Za-km-z]{50,51})\b",
            Check::Token,
        ),
        // A node provider's RPC endpoint carries its API key in the path:
        // Alchemy (`…g.alchemy.com/v2/KEY`), Infura (`…infura.io/v3/KEY`,
        // `/ws/v3/`), QuickNode (`….quiknode.pro/KEY/`), Ankr
        // (`rpc.ankr.com/eth/KEY`), GetBlock, Chainstack (`p2pify.com/KEY`).
        grp(
            "rpc-url-key",
            "api-key",
            &[
                "alchemy.com/",
                "infura.io/",
                "quiknode.pro/",
                "rpc.ankr.com/",
                "getblock.io/",
                "p2pify.com/",
            ],
            r"(?i)(?:\balchemy\.com/(?:nft/)?v[23]|\binfura\.io/(?:ws/)?v3|\bquiknode\.pro|\brpc\.ankr\.com/[a-z0-9_]+|\bgetblock\.io|\bp2pify\.com)/([A-Za-z0-9_-]{24,})",
            Check::Token,
        ),
        // An Apple app-specific password (`abcd-efgh-ijkl-mnop`) given to
        // Xcode's upload and notarization tools (`altool -p`, `notarytool
        // --password`) or named as one.
        grp(
            "apple-app-specific-password",
            "password",
            &[
                "altool",
                "notarytool",
                "app-specific",
                "application_specific",
                "app specific",
            ],
            r#"(?i:(?:altool|notarytool)\b[^\n]*?\s(?:-p|--password)(?:[ \t]+|=)["']?|app[ _-]?specific[ _-]?password[^\n]{0,20}?[:=][ \t]*["']?|APPLICATION_SPECIFIC_PASSWORD[ \t]*=[ \t]*["']?)([a-z]{4}-[a-z]{4}-[a-z]{4}-[a-z]{4})\b"#,
            Check::None,
        ),
        // A wallet's recovery phrase named in prose or a setting: `seed
        // phrase: w1 … w12`, `my recovery phrase is …`, `MNEMONIC="…"`,
        // `mnemonic: '…'`, or on the line under a label that names it
        // (`solana-keygen new`: `Save this seed phrase … keypair:` ⏎ `w1 …`;
        // plain text line by line is `Conversation::phrase_value`). BIP-39
        // words are 3–8 lower-case letters.
        grp(
            "wallet-recovery-phrase",
            "private-key",
            &[
                "seed phrase",
                "recovery phrase",
                "seed words",
                "mnemonic",
                "secret phrase",
                "recovery words",
                "secret words",
                "backup phrase",
                "backup words",
            ],
            leak(format!(
                r#"(?i:{RECOVERY_PHRASE_NAME}(?:[ \t]+(?:is|was))?[ \t]*[:=]?|\bmnemonic(?:[ \t]+(?:phrase|is))?[ \t]*[:=]?|{RECOVERY_PHRASE_NAME}[^\n]{{0,100}}:[ \t]*\n[ \t]*)[ \t]*["'`]?((?:[a-z]{{3,8}}[ \t]+){{11,}}[a-z]{{3,8}})"#
            )),
            Check::Mnemonic,
        ),
        // Two-factor backup codes listed after their name: GitHub's
        // `xxxxx-xxxxx` (hex), GitLab's 16 hex digits, Google's 8 digits
        // (also as `1234 5678`), on the name's line or one a line below it
        // in a decoded text (`recovery codes: HTTP-ERROR`, `backup codes
        // 2023-2024` are not ones).
        grp(
            "two-factor-backup-codes",
            "password",
            &["recovery code", "backup code"],
            r#"(?i)\b(?:recovery|backup)[ \t]+codes?\b(?:[ \t]+(?:are|is))?[ \t]*[:=]?[ \t]*(?:\n[ \t]*)?((?:[0-9a-f]{5}-[0-9a-f]{5}|[0-9a-f]{16}|[0-9]{4} [0-9]{4}|[0-9]{8,10})(?:[ \t]*[, \t\n][ \t]*(?:[0-9a-f]{5}-[0-9a-f]{5}|[0-9a-f]{16}|[0-9]{4} [0-9]{4}|[0-9]{8,10}))*)\b"#,
            Check::None,
        ),
        // One recovery or backup code named in a sentence, in another
        // provider's shape (`recovery code a1b2c3d4e5f6`, Twitter's 12
        // characters; `backup code: K7QX-2M9P`): letters and a digit
        // (`recovery code is invalid` is a message).
        grp(
            "two-factor-recovery-code",
            "password",
            &["recovery code", "backup code"],
            r#"(?i)\b(?:recovery|backup)[ \t]+code\b(?:[ \t]+(?:is|was))?[ \t]*[:=]?[ \t]*["'`]?([A-Za-z0-9]{4,32}(?:-[A-Za-z0-9]{4,12}){0,5})\b"#,
            Check::Bearer,
        ),
        // A PuTTY private key file (`.ppk`): the base64 lines after
        // `Private-Lines: N`, in a decoded view (plain text line by line is
        // `Conversation::ppk_value`). The `Public-Lines` are public.
        grp(
            "putty-private-key",
            "private-key",
            &["private-lines:"],
            r#"Private-Lines:[ \t]*[0-9]{1,3}[ \t]*\r?\n((?:[A-Za-z0-9+/]{4,}={0,2}[ \t]*(?:\r?\n|$))+)"#,
            Check::None,
        ),
        // A row of a table that pairs a secret's name with its value:
        // `vault kv get`'s `db_pass            S`, a Markdown `| api_token |
        // T |`. The whole line is the row (a name, two blanks or a bar, a
        // value; also a JSON string's whole content; `Gate::TableCell`); a
        // letter and a digit (`| token | string |` is a schema).
        grp(
            "table-row-secret",
            "password",
            &["secret", "token", "pass", "pwd", "api_key", "apikey"],
            r#"(?m)(?:^|["\n])[ \t]*(?:\|[ \t]*)?[A-Za-z0-9_.-]*(?i:secret|token|pass|passwd|password|pwd|api_?key|apikey)[A-Za-z0-9_.-]*(?:[ \t]*\|[ \t]*|[ \t]{2,})([^\s|"]{6,})[ \t]*\|?[ \t]*(?:$|")"#,
            Check::Bearer,
        ),
        // `terraform output -json`: an output declared sensitive keeps its
        // value under `"value"`.
        grp(
            "terraform-sensitive-output",
            "password",
            &["\"sensitive\": true", "\"sensitive\":true"],
            r#""sensitive"\s*:\s*true\s*,\s*"type"\s*:\s*(?:"[^"]*"|\[[^\]]*\])\s*,\s*"value"\s*:\s*"([^"\\]{4,})""#,
            Check::Password,
        ),
        // Installers that print the password they generated: MySQL's `A
        // temporary password is generated for root@localhost: S`,
        // Jenkins' `Please use the following password to proceed to
        // installation:` with the password on a line of its own,
        // Elasticsearch's `The generated password for the elastic built-in
        // superuser is:` likewise (one text in a decoded view).
        grp(
            "generated-password-notice",
            "password",
            &[
                "password is generated for",
                "proceed to installation",
                "built-in superuser is",
            ],
            r#"\bpassword is generated for [^\s:]+:[ \t]+([^\s"'`]{4,})|\bproceed to installation:\s*\n\s*([a-f0-9]{32})\b|\bbuilt-in superuser is:\s*\n?\s*([^\s"'`]{8,})"#,
            Check::Password,
        ),
        // `creds are bob:V`, `credentials for staging: admin:V`.
        grp(
            "creds-colon-pair",
            "password",
            &["creds", "credentials"],
            r#"(?i)\b(?:creds|credentials)\b(?:\s+(?:for|of|to|on)\s+[^\s:]{1,40})?\s*(?:\bare\b|\bis\b|:|=)\s*['"`]?[A-Za-z0-9_.@+-]{1,64}:([^\s"'`/:]{5,}[^\s"'`/:.,;!?)])"#,
            Check::Bearer,
        ),
        grp(
            "login-slash-password",
            "password",
            &[" / ", "/ "],
            r#"(?i)\b(?:login|user(?:name)?|account|creds|credentials)\b[^\n]{0,40}?(?:\bis|\bare|:|=)\s*[A-Za-z0-9_.@-]{2,64}\s*/\s*([^\s/"'`]{6,64})"#,
            Check::Bearer,
        ),
        // `the password for the db is S`, `password: S`: a human password
        // named in prose must hold a letter and a digit (`the password is
        // wrong` is not one). The first alternative is the change of one:
        // `set the password to S`, `password was changed to S`, `I set
        // MYSQL_ROOT_PASSWORD to S` (a name's last word, so no `\b` before
        // it, but its `_`, a keyword of its own); it comes first because
        // the second would take `changed` for the value, and the rule
        // resumes after a match its check refused.
        grp(
            "prose-password",
            "password",
            &[
                "password",
                "passwd",
                "passphrase",
                "pw",
                "pwd",
                "_password",
                "_passwd",
                "_passphrase",
                "passcode",
            ],
            r#"(?i)(?:_|\b)(?:password|passwd|passphrase)\s+(?:(?:is|was|has\s+been|have\s+been|got)\s+)?(?:now\s+)?(?:(?:changed|set|reset|updated|rotated)\s+)?to\s+["'`]?([^\s"'`]{5,63}[^\s"'`.,;:!?)])|\b(?:password|passwd|passphrase|passcode|pw|pwd)\b(?:\s+(?:for|of|to|on)\s+(?:the\s+|my\s+|our\s+|this\s+)?[A-Za-z0-9_.@-]{1,40}(?:\s+[A-Za-z0-9_.@-]{1,30})?)?(?:\s*[:=]\s*|(?:\s+(?:is|was|are)|(?:'|’)s):?\s+(?:now\s+)?|\s+)["'`]?([^\s"'`]{5,63}[^\s"'`.,;:!?)])"#,
            Check::Bearer,
        ),
        // A C or C++ macro named like a secret (`#define WIFI_PASS "V"`,
        // Arduino's `secrets.h`): the secret word is a whole part of the
        // name between underscores (`COMPASS_ID` is not one).
        grp(
            "c-define-secret",
            "generic-secret",
            &["#define"],
            r#"#define[ \t]+(?:[A-Za-z0-9]+_)*(?i:pass|passwd|password|pwd|secret|token|api_?key|apikey|psk|auth_?key)(?:_[A-Za-z0-9]+)*[ \t]+L?"([^"\n]{4,})""#,
            Check::FlagPassword,
        ),
        // fish's `set -x NAME V` (also `-gx`, `-Ux`, `--export`) where the
        // name is a secret's: the shell's `export NAME=V`.
        grp(
            "fish-set-secret",
            "generic-secret",
            &[
                "set -x",
                "set -gx",
                "set -xg",
                "set -ux",
                "set -xu",
                "set --export",
            ],
            r#"(?i)\bset\s+(?:-[a-z]*x[a-z]*|--export)(?:\s+-[a-z]+)*\s+[A-Za-z0-9_]*(?:password|passwd|secret|token|api_?key|private_key|access_key)[A-Za-z0-9_]*\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>$]{4,}))"#,
            Check::FlagPassword,
        ),
        // `the default password is admin.`, `wifi password was dragon`: a
        // one-word password of letters only (the rule above takes those
        // with a digit), where the clause ends after it (punctuation, a
        // quote or bracket closing the string or object it is in, an
        // escape, the line's end, `and` / `but` / `so`); the words that
        // end such a clause as often are refused (`Check::PasswordWord`).
        grp(
            "prose-password-word",
            "password",
            &[
                "password is ",
                "password was ",
                "passwd is ",
                "passphrase is ",
                "password is now ",
            ],
            r#"(?i)\b(?:password|passwd|passphrase)\s+(?:is|was)\s+(?:now\s+|just\s+|still\s+)?["'`]?([A-Za-z]{4,32})["'`]?(?:[.,;:!?)"'\]}\\]|\s*(?:\n|$)|\s+(?:and|but|so)\b)"#,
            Check::PasswordWord,
        ),
        // `my sudo pass is S`, `the wifi pass was S`: `pass` as a noun,
        // after a word that says whose (bare `pass is` is every "the first
        // pass is slow").
        grp(
            "pass-is-password",
            "password",
            &[" pass is ", " pass was "],
            r#"(?i)\b(?:my|the|our|your|his|her|their|sudo|root|admin|wifi|wi-fi|db|database|ssh|vpn|login|account)\s+pass\s+(?:is|was)\s+(?:now\s+)?["'`]?([^\s"'`]{5,63}[^\s"'`.,;:!?)])"#,
            Check::Bearer,
        ),
        // A `pass` key starting a line with its value bare (`pass: S` in
        // YAML, `pass = S` in an INI file or a mail client's config): the
        // value ends the line and holds a letter and a digit, so test
        // tallies (`pass: 12`, `pass: 3/3`), flags (`pass: true`) and types
        // (`pass: string;`) are not taken.
        grp(
            "pass-line-password",
            "password",
            &["pass:", "pass =", "pass=", "pass :"],
            r#"(?m)(?:^|["\n])[ \t]*(?:-[ \t]+)?["']?pass["']?[ \t]*[:=][ \t]*([^\s"'`,;&|<>(){}\[\]\\$%][^\s"'`]{5,63})[ \t]*(?:$|["\n])"#,
            Check::Bearer,
        ),
        // Logging in with a pair in prose: `login with bob:S`, `log in as
        // admin/S`, `login with alice / S`, `sign in using ops:S`, `use
        // admin/S to log in`. The
        // value holds a letter and a digit (`login with user:pass`,
        // `log in as root/admin` are not ones).
        // No `"` in a match: the rule is searched only in the stretch
        // around its keyword between quotes (`WINDOWED_RULES`), not in
        // every JSON line that says `login`; and only where the verb is
        // followed by one of the words a pair comes after, or follows
        // `to ` (`Gate::LoginPair`): `docker login -u` and `the login page`
        // cost no search.
        grp(
            "login-with-pair",
            "password",
            &[
                "login", "log in", "log-in", "sign in", "sign-in", "signin", "logon", "log on",
                "log-on",
            ],
            r#"(?i)\b(?:log[ -]?in|sign[ -]?in|log[ -]?on) (?:(?:to|into)\s[^\n"]{0,40}?\s)?(?:with|as|using)\s+['`]?[A-Za-z0-9_.@+-]{1,64}(?:[:/]|[ \t]+/[ \t]+)([^\s"'`/:]{5,}[^\s"'`/:.,;!?)])|\b(?:log|sign) into\s[^\n"]{0,40}?\s(?:with|as|using)\s+['`]?[A-Za-z0-9_.@+-]{1,64}(?:[:/]|[ \t]+/[ \t]+)([^\s"'`/:]{5,}[^\s"'`/:.,;!?)])|\buse\s+['`]?[A-Za-z0-9_.@+-]{1,64}[:/]([^\s"'`/:]{5,}[^\s"'`/:.,;!?)])['`]?\s+to (?:log[ -]?in|sign[ -]?in|log[ -]?on)\b"#,
            Check::Bearer,
        ),
        // `user admin pass S`, `login zed pw S`.
        grp(
            "user-pass-words",
            "password",
            // With the separator: bare ` pass` is in every "tests pass".
            &[
                " pass ",
                " pass:",
                " pass=",
                " pw ",
                " pw:",
                " pw=",
                " pwd ",
                " pwd:",
                " pwd=",
                " password ",
                " password:",
                " password=",
            ],
            r#"(?i)\b(?:user(?:name)?|login|account)\s*[:=]?\s*[A-Za-z0-9_.@-]{2,64}[,;]? +(?:pass(?:word)?|pw|pwd)(?:[:=]|  *[:=]?) *["'`]?([^\s"'`]{5,63}[^\s"'`.,;:!?)])"#,
            Check::Bearer,
        ),
        // A password handed to a call in code. A setter or builder named
        // for it (`user.set_password("S")`, `setPassword("S")`,
        // `.with_password("S")`, `.password(Some("S"))`, keyring's
        // `set_password("svc", "bob", "S")`: the last of up to three string
        // arguments). The callee is exactly the word, with `set`, `with` or
        // `use` before it: `check_password("x")`, `reset_password(email)`
        // and `get_password("service")` are not setters.
        grp(
            "password-setter-call",
            "password",
            &["password(", "passwd(", "passphrase("],
            r#"(?i)(?:^|[^A-Za-z0-9_])(?:(?:set|with|use)_?)?(?:password|passwd|passphrase)\([ \t]*(?:Some\([ \t]*)?(?:(?:"[^"\n]*"|'[^'\n]*')[ \t]*,[ \t]*){0,2}(?:[bruL@]|&?str::)?["']([^"'\s\\]{4,})["'][ \t]*[,)]"#,
            Check::Password,
        ),
        // A password as a positional argument of a call that logs in or
        // connects: the second of `login(user, "S")` (exactly two
        // arguments) and of the credential types' constructors
        // (`NetworkCredential`, `PasswordAuthentication`, Apache's
        // `UsernamePasswordCredentials`, Spring's `…AuthenticationToken`,
        // pika's `PlainCredentials`, aiohttp's `BasicAuth`, requests'
        // `HTTPDigestAuth`); the third of `getConnection(url, user, "S")`,
        // `new PDO(dsn, user, "S")`, `mysqli_connect(host, user, "S", db)`
        // and the Python MySQL clients' `connect(host, user, "S", db)`; the
        // fourth of paramiko's `connect(host, 22, user, "S")`; the first of
        // a Redis client's `.auth("S")`; reqwest's `.basic_auth(user,
        // Some("S"))`, Go's `smtp.PlainAuth("", user, "S", host)`, MongoDB's
        // `db.changeUserPassword(user, "S")`, Ruby's
        // `Net::SMTP.start(host, port, domain, user, 'S', :plain)`. The
        // value holds a letter and a digit (`login(user, "admin")`,
        // `passport.auth('jwt')` stay).
        grp(
            "login-call-password",
            "password",
            &[
                "login(",
                "log_in(",
                "signin(",
                "sign_in(",
                "credential(",
                "authentication(",
                "credentials(",
                "authenticationtoken(",
                "basicauth(",
                "digestauth(",
                "getconnection(",
                "pdo(",
                "mysqli(",
                "mysqli_connect(",
                "mysql_connect(",
                "mysql_pconnect(",
                ".connect(",
                ".auth(",
                "basic_auth(",
                "plainauth(",
                "changeuserpassword(",
                "smtp.start(",
            ],
            r#"(?i)(?:\.auth\([ \t]*[bru]?["']([^"'\s\\]{4,})["'][ \t]*[,)]|\b(?:log_?in|sign_?in|changeUserPassword)\([ \t]*(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_$][A-Za-z0-9_.$\[\]>-]*)[ \t]*,[ \t]*[bru]?["']([^"'\s\\]{4,})["'][ \t]*\)|\b(?:NetworkCredential|PasswordAuthentication|UsernamePasswordCredentials|UsernamePasswordAuthenticationToken|PlainCredentials|SimpleCredentials|BasicAuth|HTTPBasicAuth|HTTPDigestAuth|DigestAuth|basic_auth)\([ \t]*(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_$][A-Za-z0-9_.$\[\]>-]*)[ \t]*,[ \t]*(?:Some\([ \t]*)?[bru@]?["']([^"'\s\\]{4,})["'][ \t]*[,).]|\bPlainAuth\([ \t]*(?:(?:"[^"\n]*"|[A-Za-z_][A-Za-z0-9_.]*)[ \t]*,[ \t]*){2}"([^"\s\\]{4,})"[ \t]*,|\bNet::SMTP\.start\([ \t]*(?:(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_@$][A-Za-z0-9_.]*|[0-9]{1,5})[ \t]*,[ \t]*){4}["']([^"'\s\\]{4,})["'][ \t]*[,)]|\b(?:getConnection|PDO|mysqli|mysqli_connect|mysql_p?connect|(?:pymysql|MySQLdb|mysql\.connector|mariadb)\.connect)\([ \t]*(?:(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_$][A-Za-z0-9_.$\[\]>-]*)[ \t]*,[ \t]*){2}[bru@]?["']([^"'\s\\]{4,})["'][ \t]*[,)]|\.connect\([ \t]*(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_$][A-Za-z0-9_.$\[\]>-]*)[ \t]*,[ \t]*[0-9]{1,5}[ \t]*,[ \t]*(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_$][A-Za-z0-9_.$\[\]>-]*)[ \t]*,[ \t]*[bru]?["']([^"'\s\\]{4,})["'][ \t]*[,)])"#,
            Check::Bearer,
        ),
        // A password typed into a login form by a browser test: Cypress'
        // `cy.get('#password').type('S')`, Selenium's
        // `find_element(By.ID, "password").send_keys("S")`, Playwright's
        // `locator('input[name=password]').fill('S')` and
        // `page.type('#password', 'S')`, Testing Library's
        // `userEvent.type(getByLabelText(/password/i), 'S')`.
        grp(
            "form-password-typed",
            "password",
            &[
                ".type(",
                ".fill(",
                "send_keys(",
                "sendkeys(",
                ".setvalue(",
                "presssequentially(",
                "press_sequentially(",
            ],
            r#"(?i)(?:^|[^a-z])pass(?:word|wd)?[^"'`\n]{0,40}["'`/][^\n]{0,40}?\.(?:type|fill|send_keys|sendKeys|setValue|pressSequentially|press_sequentially)\([ \t]*["'`]([^"'`\s\\{]{4,})["'`]|\.(?:type|fill|setValue)\([ \t]*[^\n]{0,60}?(?:^|[^a-z])pass(?:word|wd)?[^\n,]{0,40},[ \t]*["'`]([^"'`\s\\{]{4,})["'`]"#,
            Check::Password,
        ),
        // Go's MySQL DSN: `root:S@tcp(db:3306)/app`, `u:S@unix(/run/…)`.
        // Not after a `[`: the user would be a placeholder's `REDACTED`.
        grp(
            "go-dsn-password",
            "password",
            &["@tcp(", "@tcp6(", "@udp(", "@unix("],
            r#"(?:^|[^A-Za-z0-9_.\[-])[A-Za-z0-9_.-]+:([^\s:@"'`/\[]{3,})@(?:tcp6?|udp|unix)\("#,
            Check::Password,
        ),
        // Ruby's `set :password, "S"` (Capistrano, Sinatra's
        // `set :session_secret, 'S'`) and R's `db_password <- "S"`: a
        // secret's name, then a quoted value.
        grp(
            "ruby-r-secret-setting",
            "generic-secret",
            &["set :", "<- \"", "<- '", "<-\"", "<-'"],
            r#"(?i)\bset :[a-z0-9_]*(?:password|passwd|passphrase|secret|token|api_key|apikey|private_key|access_key)[a-z0-9_]*[ \t]*,[ \t]*(?:'([^'\s]{4,})'|"([^"\s]{4,})")|[A-Za-z0-9_.]*(?:password|passwd|passphrase|secret|token|api_?key|apikey|private_?key|access_?key)[A-Za-z0-9_.]*[ \t]*<<?- ?(?:'([^'\s]{4,})'|"([^"\s]{4,})")"#,
            Check::Password,
        ),
        // A command-line flag whose name ends in a secret word:
        // `--current-password S`, `--admin-password=S`, consul's `-secret
        // T`, `--registry-token T` (`--password` and `--token` alone are
        // `generic-password`'s and `generic-secret`'s).
        grp(
            "dashed-flag-secret",
            "password",
            &[
                "-password ",
                "-password=",
                "-passwd ",
                "-passwd=",
                "-passphrase ",
                "-passphrase=",
                "-secret ",
                "-secret=",
                "-token ",
                "-token=",
            ],
            r#"(?i)(?:^|[\s"'])(?:--?[a-z0-9]+(?:-[a-z0-9]+)*-(?:password|passwd|passphrase|secret|token)|-secret)(?:=| [ \t]*)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>$-][^\s"'`;&|<>]{3,}))"#,
            Check::FlagPassword,
        ),
        // Package managers' and CI tools' credentials on the command line:
        // `poetry config http-basic.REPO user S`, `composer config
        // http-basic.HOST user S`, `bundle config set HOST user:S`,
        // `dotnet nuget add source URL -u user -p S`, `twine upload -u
        // __token__ -p T`, `jenkins-cli -auth user:S`, `cargo login T`,
        // `pulumi config set --secret NAME S`.
        grp(
            "tool-credential-command",
            "password",
            &[
                "poetry config",
                "composer config",
                "bundle config",
                "nuget add source",
                "nuget update source",
                "twine",
                "jenkins-cli",
                "cargo login",
                "pulumi config set",
            ],
            r#"\b(?:poetry\s+config\s+http-basic\.[^\s]+|composer\s+config\s+(?:--global\s+|-g\s+)?http-basic\.[^\s]+)\s+[^\s-][^\s]*\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>$-][^\s"'`;&|<>]{3,}))|\bbundle\s+config\s+(?:set\s+)?(?:--(?:global|local)\s+)?[^\s-][^\s]*\s+["']?[^\s:"']+:([^\s"'`;&|<>]{4,})|\b(?:nuget\s+(?:add|update)\s+source|twine\s+upload)\b[^\n]*?\s(?:-p|--password)(?:=|\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>$-][^\s"'`;&|<>]{3,}))|\bjenkins-cli\b[^\n]*?\s-auth\s+["']?[^\s:"'@]+:([^\s"'`;&|<>@]{4,})|\bcargo\s+login\s+(?:--registry(?:=|\s+)[^\s]+\s+)?["']?([A-Za-z0-9_-]{20,})|\bpulumi\s+config\s+set\s+--secret\s+(?:--[a-z-]+(?:=[^\s]+)?\s+)*[^\s-][^\s]*\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>$-][^\s"'`;&|<>]{3,}))|\bpulumi\s+config\s+set\s+[^\s-][^\s]*\s+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>$-][^\s"'`;&|<>]{3,}))\s+--secret\b"#,
            Check::FlagPassword,
        ),
        // A password hashed from the command line (`openssl passwd -6 S`,
        // `useradd -p "$(openssl passwd -1 S)"`, `mkpasswd -m sha-512 S`)
        // or in code (`bcrypt.hashpw(b"S", …)`, `password_hash('S', …)`,
        // Django's `make_password("S")`, `BCrypt::Password.create("S")`,
        // Spring's `passwordEncoder.encode("S")`): the input is the
        // password. The commands' options are spelled out, so that an
        // option's argument (`-salt xyz`, `-m help`) is never taken for it
        // and `-stdin` or `-in FILE` ends the search.
        grp(
            "hashed-password-input",
            "password",
            &[
                "openssl passwd",
                "mkpasswd",
                "crypt.crypt(",
                "hashpw(",
                "password_hash(",
                "make_password(",
                "hash_password(",
                "hashpassword(",
                "bcrypt.hash",
                "password.create(",
                "hash::make(",
                "passwordencoder.encode(",
                "argon2.hash(",
                "ph.hash(",
                "context.hash(",
                "hasher.hash(",
            ],
            r#"(?i)\bopenssl passwd(?:[ \t]+(?:-(?:salt|rand|writerand|provider|provider-path|propquery)[ \t]+[^\s]+|-(?:crypt|1|apr1|aixmd5|5|6|noverify|quiet|table|reverse)))*[ \t]+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>()$-][^\s"'`;&|<>()]{3,}))|\bmkpasswd(?:[ \t]+(?:-[mSRP][ \t]+[^\s]+|--(?:method|salt|rounds|password-fd)[= ][^\s]+|-5))*[ \t]+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>()$-][^\s"'`;&|<>()]{3,}))|\b(?:crypt\.crypt|bcrypt\.hashpw|bcrypt\.hash(?:Sync)?|bcrypt\.generate_password_hash|password_hash|generate_password_hash|make_password|hash_password|hashPassword|argon2\.hash|BCrypt::Password\.create|Hash::make|BCrypt\.hashpw|[A-Za-z]*PasswordEncoder\.encode|ph\.hash|pwd_context\.hash|hasher\.hash)\([ \t]*[bru]?["']([^"'\s\\]{4,})["']"#,
            Check::Password,
        ),
        // A secret's default when its variable is unset:
        // `process.env.JWT_SECRET || "S"`, `getenv('DB_PASS') ?: 'S'`,
        // `os.environ.get("API_TOKEN") or "S"`, `env::var("TOKEN")
        // .unwrap_or("S")` (the shell's `${DB_PASSWORD:-S}` is an
        // assignment `generic-password` reads). The value holds a letter
        // and a digit (`|| "localdev"` stays).
        grp(
            "secret-fallback-default",
            "generic-secret",
            &[
                "||\"",
                "|| \"",
                "||'",
                "|| '",
                "??\"",
                "?? \"",
                "??'",
                "?? '",
                "?:\"",
                "?: \"",
                "?:'",
                "?: '",
                " or\"",
                " or \"",
                " or'",
                " or '",
                "unwrap_or(\"",
                "unwrap_or('",
            ],
            r#"(?i)[A-Za-z0-9_]*(?:secret|token|api_?key|apikey|password|passwd|passphrase|_pass|private_?key|access_?key)[A-Za-z0-9_]*["']?[ \t]*[\])]{0,2}[ \t]*(?:\|\||\?\?|\?:|[ ]or|\)?\.unwrap_or\()[ ]?["']([^"'\s\\]{4,})["']"#,
            Check::Bearer,
        ),
        // Small command and config spellings: lftp's `-u user,S`, `vault
        // login S` with a Vault token, npm's legacy `_auth=<base64 of
        // user:password>`, a name ending in `_pw` (`DB_PW=S`, `root_pw:
        // S`), expect's `send "S\r"` answering a password prompt.
        grp(
            "lftp-user-password",
            "password",
            &["lftp"],
            r#"\blftp\b[^\n]*?\s-u\s+["']?[^\s,"']{1,64},([^\s"'`;&|<>]{3,})"#,
            Check::Password,
        ),
        grp(
            "vault-login-token",
            "generic-secret",
            &["vault login"],
            r#"\bvault\s+login\s+(?:-[^\s]+\s+)*((?:hvs|hvb|hvr|s|b|r)\.[A-Za-z0-9_-]{20,})"#,
            Check::Bearer,
        ),
        // What `vault operator init` prints: each Shamir share and the
        // recovery keys, base64 or hex, on a line of their own.
        grp(
            "vault-unseal-key",
            "generic-secret",
            &["unseal key ", "recovery key "],
            r#"(?i)\b(?:unseal|recovery) key \d{1,2}:[ \t]+([A-Za-z0-9+/]{32,}={0,2})"#,
            Check::Bearer,
        ),
        // Environment variables clients read a password from, named without
        // the word: `sshpass -e` reads `SSHPASS`, `redis-cli` reads
        // `REDISCLI_AUTH` (set in POSIX shells or fish, `set -gx NAME V`).
        grp(
            "client-password-variable",
            "password",
            &[
                "sshpass=",
                "rediscli_auth=",
                "x sshpass ",
                "x rediscli_auth ",
            ],
            r#"(?:^|[\s;&|("'`])(?:(?:export\s+)?(?:SSHPASS|REDISCLI_AUTH)=|set\s+-[gxU]*x[gxU]*\s+(?:SSHPASS|REDISCLI_AUTH)\s+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>]{4,}))"#,
            Check::Password,
        ),
        // A value piped into an encoder or a digest: `echo -n 'S' | base64`
        // (a Kubernetes `Secret`'s `data:` is made this way), `printf '%s'
        // S | sha256sum`, `echo S | openssl passwd -stdin`; or into a
        // secret store (`printf '%s' S | podman secret create db -`). The
        // value must read as a credential (a letter and a digit): `echo
        // hello | base64` stays.
        grp(
            "piped-to-encoder",
            "password",
            // The pipe and the encoder, as the pattern spells them:
            // `base64` alone is in every image block of a transcript.
            &[
                "| base64",
                "|base64",
                "| sha",
                "|sha",
                "| md5sum",
                "|md5sum",
                "| b2sum",
                "|b2sum",
                "| openssl",
                "|openssl",
                "| htpasswd",
                "|htpasswd",
                "| mkpasswd",
                "|mkpasswd",
                "| argon2",
                "|argon2",
                "| docker secret",
                "|docker secret",
                "| podman secret",
                "|podman secret",
            ],
            r#"\b(?:echo|printf)(?:[ \t]+-[neE]+)*(?:[ \t]+["']?%s(?:\\n)?["']?)?[ \t]+(?:'([^'\n]{6,})'|"([^"\n]{6,})"|([^\s"'`;&|<>$()]{6,}))[ \t]*\| ?(?:base64|sha(?:1|224|256|384|512)sum|md5sum|shasum|b2sum|openssl[ \t]+(?:base64|enc|dgst|passwd|sha\d*)|htpasswd|mkpasswd|argon2|(?:docker|podman)[ \t]+secret[ \t]+create)\b"#,
            Check::Bearer,
        ),
        // Composer's `auth.json` (and `COMPOSER_AUTH`): a token per host
        // under `github-oauth`, `gitlab-token`, `gitlab-oauth`, `bearer`.
        grp(
            "composer-auth-token",
            "generic-secret",
            &["github-oauth", "gitlab-token", "gitlab-oauth", "\"bearer\""],
            r#"(?i)"(?:github-oauth|gitlab-token|gitlab-oauth|bearer)"\s*:\s*\{\s*"[^"\n]{1,253}"\s*:\s*"([^"\s]{12,})""#,
            Check::Bearer,
        ),
        // A password named after its value in a sentence: `use S as the
        // password`, `try S as your passphrase`.
        grp(
            "value-as-password",
            "password",
            &[
                " as the password",
                " as password",
                " as my password",
                " as your password",
                " as the passphrase",
            ],
            r#"(?i)\b(?:use|using|try|set|with|chose|picked)\s+["'`]?([^\s"'`]{5,63}?)["'`]?\s+as\s+(?:the\s+|my\s+|your\s+)?(?:password|passphrase)\b"#,
            Check::Bearer,
        ),
        // Django's user factories take the password third:
        // `create_superuser('admin', 'a@x.org', 'S')`, `create_user(name,
        // email, 'S')`.
        grp(
            "django-user-password",
            "password",
            &["create_superuser(", "create_user("],
            r#"\bcreate_(?:superuser|user)\(\s*(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_][A-Za-z0-9_.]*)\s*,\s*(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_][A-Za-z0-9_.]*|None)\s*,\s*(?:password\s*=\s*)?(?:"([^"\n]{4,})"|'([^'\n]{4,})')"#,
            Check::FlagPassword,
        ),
        // A Wi-Fi passphrase (8 to 63 characters): `wpa_passphrase SSID
        // S`, and what `netsh wlan show profile key=clear` prints (`Key
        // Content : S`).
        grp(
            "wifi-passphrase",
            "password",
            &["wpa_passphrase", "key content"],
            r#"\bwpa_passphrase[ \t]+(?:'[^'\n]*'|"[^"\n]*"|[^\s"']+)[ \t]+(?:'([^'\n]{8,63})'|"([^"\n]{8,63})"|([^\s"'`;&|<>]{8,63}))|(?:^|["\n])[ \t]*Key Content[ \t]+:[ \t]+([^\s"][^"\n]{6,61}[^\s"])[ \t]*(?:$|["\n])"#,
            Check::Password,
        ),
        // A key in a URL's query (`?key=K`, Google's and many APIs'
        // spelling) and a token sent as a URL's user with GitHub's
        // `x-oauth-basic` password.
        grp(
            "url-query-key",
            "generic-secret",
            &["?key=", "&key=", "?authkey=", "&authkey="],
            r#"(?i)[?&](?:auth)?key=([A-Za-z0-9_~.-]{20,256})(?:[&#"'\s]|$)"#,
            Check::Token,
        ),
        grp(
            "oauth-basic-user-token",
            "generic-secret",
            &[":x-oauth-basic@"],
            r#"//([A-Za-z0-9_-]{20,255}:x-oauth-basic)@"#,
            Check::Bearer,
        ),
        // WordPress's keys and salts (`wp-config.php`'s `define`s, the
        // official image's `WORDPRESS_AUTH_KEY`, Bedrock's `.env`): 64
        // characters from an alphabet with every ASCII symbol but the quotes
        // and a blank in it, which no assignment rule takes whole. The
        // sample file's `put your unique phrase here` stays.
        grp(
            "wordpress-salt",
            "generic-secret",
            &[
                "auth_key",
                "auth_salt",
                "logged_in_key",
                "logged_in_salt",
                "nonce_key",
                "nonce_salt",
            ],
            r#"(?i)\bdefine\(\s*["'](?:(?:SECURE_)?AUTH|LOGGED_IN|NONCE)_(?:KEY|SALT)["']\s*,\s*(?:'([^'\n]{16,})'|"([^"\n]{16,})")\s*\)|(?:^|[\s;"'])(?:export[ \t]+)?(?:WORDPRESS_)?(?:(?:SECURE_)?AUTH|LOGGED_IN|NONCE)_(?:KEY|SALT)[ \t]*[=:][ \t]*(?:'([^'\n]{16,})'|"([^"\n]{16,})"|([^\s'"]{16,}))"#,
            Check::Bearer,
        ),
        grp(
            "npm-auth-pair",
            "password",
            &["_auth"],
            r#"(?m)(?:^|["\n:])[ \t]*_auth[ \t]*=[ \t]*["']?([A-Za-z0-9+/]{8,}={0,2})["']?[ \t]*(?:$|["\n])"#,
            Check::Bearer,
        ),
        grp(
            "pw-suffix-password",
            "password",
            &["_pw", "-pw"],
            r#"(?i)(?:^|[^A-Za-z0-9_])[A-Za-z0-9_-]*[_-]pw["']?[ \t]*(?::=|=|:)[ \t]*["']?([^\s"'`,;&|<>(){}\[\]\\$]{4,})"#,
            Check::Password,
        ),
        // A Python (or Rust) bytes literal under a secret's name: Flask's
        // `app.secret_key = b'…'`, `SECRET_KEY = b"…"`,
        // `app.config["SECRET_KEY"] = rb'…'` — the `b` ended every
        // assignment rule's value before its quote — and Go's `jwtKey :=
        // []byte("…")`. Escapes stay inside.
        grp(
            "bytes-literal-secret",
            "generic-secret",
            &[
                "= b'",
                "= b\"",
                "=b'",
                "=b\"",
                "= rb'",
                "= br'",
                "= rb\"",
                "= br\"",
                "[]byte(\"",
            ],
            r#"(?i)[A-Za-z0-9_]*(?:secret|token|key|password|passwd|passphrase|salt|pepper)[A-Za-z0-9_]*(?:["']?\]?[ \t]*(?::[ \t]*bytes[ \t]*)?=[ \t]*(?:rb|br|b)(?:'((?:[^'\\\n]|\\[^\n]){8,})'|"((?:[^"\\\n]|\\[^\n]){8,})")|[ \t]*:?=[ \t]*\[\]byte\("((?:[^"\\\n]|\\[^\n]){8,})"\))"#,
            Check::Bearer,
        ),
        // A password or a password hash set on `useradd` / `usermod`'s
        // command line (`-p`, `--password`).
        grp(
            "useradd-password",
            "password",
            &["useradd", "usermod", "adduser"],
            r#"\b(?:useradd|usermod|adduser)\b[^\n;&|]*?\s(?:-p|--password)(?:=|[ \t]+)(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{3,}))"#,
            Check::Password,
        ),
        // A password stored under a scheme tag (LDAP's `userPassword`,
        // slapd's `rootpw`, Dovecot's passwd files, Spring's delegating
        // encoder): `{SSHA}base64`, `{SHA512-CRYPT}$6$…`, `{PLAIN}pw`,
        // `{bcrypt}$2a$…`. A hash of a password is a password to whoever
        // runs a cracker on it; the tags name nothing else.
        grp(
            "password-scheme-hash",
            "password",
            &[
                "{ssha",
                "{sha",
                "{smd5",
                "{md5",
                "{crypt}",
                "{pbkdf2",
                "{argon2",
                "{blf-crypt}",
                "{plain",
                "{clear",
                "{cleartext}",
                "{ntlm}",
                "{lanman}",
                "{cram-md5}",
                "{digest-md5}",
                "{scram-sha",
                "{bcrypt}",
                "{scrypt}",
                "{noop}",
            ],
            r#"(?i)\{(?:SSHA(?:256|384|512)?|SHA(?:256|384|512)?(?:-CRYPT)?|SMD5|MD5(?:-CRYPT)?|CRYPT|PBKDF2(?:-SHA(?:1|256|512))?|ARGON2(?:I|ID)?|BLF-CRYPT|PLAIN(?:-MD5)?|CLEAR(?:TEXT)?|NTLM|LANMAN|CRAM-MD5|DIGEST-MD5|SCRAM-SHA-(?:1|256)|BCRYPT|SCRYPT|NOOP)\}([^\s"'`<>,;]{4,})"#,
            Check::Bearer,
        ),
        // PostgreSQL's stored password verifiers, which log in as the
        // password does (PgBouncer's `userlist.txt`, `pg_authid`):
        // `md5` and 32 hex, and SCRAM's `SCRAM-SHA-256$iter:salt$key:key`.
        grp(
            "postgres-password-verifier",
            "password",
            &["\"md5", "'md5", " md5", "scram-sha-256$"],
            r#"(?:^|[\s"'=:,(|])(md5[0-9a-f]{32}|SCRAM-SHA-256\$[0-9]{1,7}:[A-Za-z0-9+/]{8,}={0,2}\$[A-Za-z0-9+/]{16,}={0,2}:[A-Za-z0-9+/]{16,}={0,2})(?:$|[\s"',;)|\\])"#,
            Check::None,
        ),
        // BIND's TSIG and rndc keys: `secret "base64";` in a `key` block.
        grp(
            "tsig-key-secret",
            "generic-secret",
            &["secret \""],
            r#"(?:^|[\s{;])secret[ \t]+"([A-Za-z0-9+/]{16,}={0,2})"[ \t]*;"#,
            Check::Bearer,
        ),
        // A Fernet key (32 bytes, URL-safe base64: 43 characters and `=`)
        // under its name, however deep the name's prefix
        // (`AIRFLOW__CORE__FERNET_KEY`, also a rotation's comma-separated
        // list), or handed to `Fernet(…)`.
        grp(
            "fernet-key",
            "generic-secret",
            &["fernet"],
            r#"(?i)fernet[_-]?keys?["']?\]?[ \t]*[:=][ \t]*(?:b?["'])?([A-Za-z0-9_-]{43}=(?:,[A-Za-z0-9_-]{43}=)*)|\bFernet\([ \t]*b?["']([A-Za-z0-9_-]{43}=)["']"#,
            Check::Bearer,
        ),
        // A token handed to an HTTP client's bearer setter: reqwest's
        // `.bearer_auth("T")`, Go resty's `SetAuthToken("T")`.
        grp(
            "bearer-call-token",
            "generic-secret",
            &["bearer_auth(", "setauthtoken("],
            r#"(?:\.bearer_auth|\bSetAuthToken)\([ \t]*"([^"\s\\]{16,})"[ \t]*\)"#,
            Check::Bearer,
        ),
        // A user and password joined by `:` (or `/`) in a service's own
        // config: HAProxy's `stats auth admin:PW`, Squid's `cache_peer …
        // login=bob:PW`, Postfix's `sasl_passwd` (`[smtp.host]:587
        // bob:PW`; the relay's port, as the line is mostly written), the
        // Neo4j image's `NEO4J_AUTH=neo4j/PW`.
        grp(
            "service-user-password",
            "password",
            &["stats auth", "login=", "]:", "neo4j_auth="],
            r#"(?i)\bstats[ \t]+auth[ \t]+[^\s:]{1,64}:([^\s"']{4,})|\bcache_peer\b[^\n]*?[ \t]login=[^\s:]{1,64}:([^\s"']{4,})|(?:^|["\n])[ \t]*\[[A-Za-z0-9.-]+\]:[0-9]{1,5}[ \t]+[^\s:]{1,128}:([^\s"']{4,})[ \t]*(?:$|["\n])|\bNEO4J_AUTH=[^\s/"']{1,64}/([^\s"']{4,})"#,
            Check::Password,
        ),
        // An IPsec pre-shared key or password in `ipsec.secrets` (strongSwan,
        // Libreswan): `: PSK "S"`, `%any %any : PSK "S"`, `bob : EAP "S"`.
        grp(
            "ipsec-secret",
            "password",
            &[": psk", ":psk", ": eap", ": xauth"],
            r#"(?i):[ \t]*(?:PSK|EAP|XAUTH)[ \t]+(?:"([^"\n]{4,})"|'([^'\n]{4,})'|0s([A-Za-z0-9+/]{8,}={0,2})|([^\s"'#]{4,}))"#,
            Check::Password,
        ),
        // An application's secret salt under its name: Drupal's
        // `$settings['hash_salt'] = '…'`, Mattermost's `"PublicLinkSalt":
        // "…"`, CakePHP's `'salt' => '…'`, `SECURITY_SALT=…`; it signs
        // one-time links and tokens as a key does. The value has a
        // generated key's shape (16 or more bytes, entropy, not code).
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "salt-setting",
                "generic-secret",
                &["salt"],
                r#"(?i)[A-Za-z0-9_.]*salt["']?\]?[ \t]*(?:=>|:|=)[ \t]*(?:'([^'\n]{16,})'|"([^"\n]{16,})"|([A-Za-z0-9+/=_.-]{16,}))"#,
                Check::Generic,
            )
        },
        // Claude Code's `apiKeyHelper` set to a command that prints the key
        // itself (`"apiKeyHelper": "echo sk-…"`).
        grp(
            "api-key-helper-echo",
            "generic-secret",
            &["apikeyhelper"],
            r#""apiKeyHelper"[ \t]*:[ \t]*"(?:echo|printf)(?:[ \t]+-[neE]+)*(?:[ \t]+(?:'%s'|%s))?[ \t]+(?:'([^'"\s]{12,})'|\\"([^"\\\s]{12,})\\"|([^'"\s\\]{12,}))[ \t]*""#,
            Check::Bearer,
        ),
        // Kaggle's `kaggle.json`: `{"username":"…","key":"<32 hex>"}`.
        grp(
            "kaggle-key",
            "generic-secret",
            &["\"username\""],
            r#""username"[ \t]*:[ \t]*"[^"\n]{1,64}"[ \t]*,[ \t]*"key"[ \t]*:[ \t]*"([0-9a-f]{32})""#,
            Check::None,
        ),
        // An ACL token's secret as Consul (`SecretID:`) and Nomad (`Secret ID
        // =`) print it after `acl bootstrap` or `acl token create`.
        grp(
            "acl-secret-id",
            "generic-secret",
            &["secretid", "secret id"],
            r#"(?:^|[\s"{,])Secret ?ID"?[ \t]*[:=][ \t]*"?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"#,
            Check::None,
        ),
        // A password manager's unlocked session key: 1Password's
        // `OP_SESSION_<account>`, Bitwarden's `BW_SESSION`.
        grp(
            "password-manager-session",
            "generic-secret",
            &["op_session_", "bw_session"],
            r#"\b(?:OP_SESSION_[A-Za-z0-9_]+|BW_SESSION)[ \t]*=[ \t]*["']?([A-Za-z0-9+/=_-]{20,})"#,
            Check::Bearer,
        ),
        // Tokens given to CI and deploy CLIs on their command line:
        // `snyk auth T`, `codecov -t T`, `netlify deploy --auth T`, `modal
        // token set --token-secret T`.
        grp(
            "ci-cli-token",
            "generic-secret",
            &["snyk auth", "codecov", "netlify", "--token-secret"],
            r#"\bsnyk[ \t]+auth[ \t]+([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[A-Za-z0-9_-]{20,})|\bcodecov(?:cli)?\b[^\n]*?[ \t](?:-t|--token)(?:=|[ \t]+)["']?([A-Za-z0-9-]{20,})|\bnetlify\b[^\n]*?[ \t]--auth(?:=|[ \t]+)["']?([A-Za-z0-9_-]{20,})|\bmodal[ \t]+token[ \t]+set\b[^\n]*?[ \t]--token-secret(?:=|[ \t]+)["']?([A-Za-z0-9_-]{16,})"#,
            Check::Bearer,
        ),
        grp(
            "expect-send-password",
            "password",
            &["send \"", "send -- \"", "send '", "send -- '"],
            r#"\bexpect\s+(?:-[a-z]+\s+)*["'{][^"'}\n]*(?:assword|assphrase)[^"'}\n]*["'}][^\n]*?(?:\n[ \t]*|;\s*)\bsend\s+(?:--\s+)?["']([^"'\\\s$]{4,})(?:\\[rn])*["']"#,
            Check::Password,
        ),
        // `<apiToken>S</apiToken>`, also with the value on its own line (a
        // decoded view holds the newlines; a bare multi-line text is read
        // line by line, see `engine::xml_open_tag`).
        grp(
            "xml-element-secret",
            "generic-secret",
            &["</"],
            "",
            Check::Password,
        ),
        grp(
            "netrc-password",
            "password",
            // Every match holds `password\s` (see `Gate::SpaceAfter`).
            &["password"],
            r#"(?i)\b(?:machine\s+[^\s]+\s+(?:login\s+[^\s]+\s+)?|login\s+[^\s]+\s+)password\s+([^\s"'`]{4,})|(?m)^[ \t]*password[ \t]+([^\s"'`]{3,}[^\s"'`.,!?])[ \t]*$"#,
            Check::Password,
        ),
        // A `.env` line's unquoted value runs to the end of the line: Django
        // keys hold `( % ! @ # & )`, which end a bare value elsewhere.
        grp(
            "env-line-secret",
            "generic-secret",
            &[
                "secret",
                "token",
                "api_key",
                "apikey",
                "private_key",
                "pepper",
            ],
            r#"(?m)(?:^|["\n])[ \t]*(?:export[ \t]+)?[A-Za-z0-9_]*(?:SECRET|TOKEN|API_KEY|APIKEY|PRIVATE_KEY|PEPPER)[A-Za-z0-9_]*[ \t]*=[ \t]*([^\s"'$][^\s"]{7,})"#,
            Check::Generic,
        ),
        // The same for a password, and Dockerfile's `ENV NAME value`
        // (quoted values whole).
        grp(
            "env-line-password",
            "password",
            &["password", "passwd"],
            r#"(?m)(?:^|["\n])[ \t]*(?:(?:export[ \t]+)?[A-Za-z0-9_]*(?:PASSWORD|PASSWD)[A-Za-z0-9_]*[ \t]*=[ \t]*([^\s"'$][^\s"]{3,})|ENV[ \t]+[A-Za-z0-9_]*(?:PASSWORD|PASSWD)[A-Za-z0-9_]*[ \t]+(?:'([^'\n]{4,})'|"([^"\n]{4,})"|([^\s"'$][^\s"]{3,})))"#,
            Check::Password,
        ),
        grp(
            "base64-app-key",
            "generic-secret",
            &["base64:"],
            r#"(?i)[A-Za-z0-9_]*key["']?\s*(?:=>|[=:])\s*["']?base64:([A-Za-z0-9+/]{32,}={0,2})"#,
            Check::None,
        ),
        grp(
            "byte-string-secret",
            "generic-secret",
            &["&[u8", "&str", "&'static", "bytes"],
            r#"(?i)[A-Za-z0-9_]*(?:secret|token|key|password|passwd)[A-Za-z0-9_]*\s*:\s*(?:&(?:'static\s+)?(?:\[u8(?:\s*;\s*[0-9]+)?\]|str)|bytes)\s*=\s*b?r?#*"([^"\s]{8,})""#,
            Check::Generic,
        ),
        grp(
            "base64-private-key",
            "private-key",
            &["ls0tls1"],
            r"(LS0tLS1[A-Za-z0-9+/]{40,}={0,2})",
            Check::DecodedSecret,
        ),
        grp(
            "base64-encoded-secrets",
            "encoded-secret",
            &["data:", "base64 -d", "base64 --decode", "base64 -d"],
            r#"(?:[A-Za-z0-9_.-]+["']?\s*:\s*["']?|echo\s+(?:-n\s+)?["']?)([A-Za-z0-9+/]{24,}={0,2})"#,
            Check::DecodedSecret,
        ),
        grp(
            "base64-json-secrets",
            "encoded-secret",
            &["eyj"],
            r"(?:^|[^A-Za-z0-9+/])(eyJ[A-Za-z0-9+/]{21,}={0,2})(?:[^A-Za-z0-9+/=.]|$)",
            Check::DecodedSecret,
        ),
        tok(
            "password-hash",
            "password-hash",
            &[
                "$1$", "$5$", "$6$", "$apr1$", "$2a$", "$2b$", "$2y$", "$2x$", "$y$", "$8$",
                "$krb5",
            ],
            r"\$(?:[156]|apr1)\$(?:rounds=[0-9]+\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{22,86}|\$8\$[./A-Za-z0-9]{14}\$[./A-Za-z0-9]{43}|\$krb5(?:asrep|tgs)\$[0-9]{1,2}\$(?:[^\s:$]{1,256}:)?[a-f0-9]{32}\$[a-f0-9]{64,}|\$2[abxy]\$[0-9]{2}\$[./A-Za-z0-9]{53}|\$y\$[./A-Za-z0-9]{1,8}\$[./A-Za-z0-9]{1,86}\$[./A-Za-z0-9]{43}",
        ),
        // --- Keyword-anchored generic secrets ---
        RuleDef {
            min_entropy: 3.0,
            ..grp(
                "generic-secret",
                "generic-secret",
                &[
                    "secret",
                    "token",
                    "api_key",
                    "api-key",
                    "api.key",
                    "apikey",
                    "license_key",
                    "license-key",
                    "licensekey",
                    "access_key",
                    "access-key",
                    "accesskey",
                    "private_key",
                    "private-key",
                    "privatekey",
                    "credential",
                    "auth_key",
                    "auth-key",
                    "authkey",
                    "signing_key",
                    "signing-key",
                    "signingkey",
                    "encryption_key",
                    "encryption-key",
                    "encryptionkey",
                    "master_key",
                    "master-key",
                    "masterkey",
                    "session_key",
                    "session-key",
                    "sessionkey",
                ],
                "",
                Check::Generic,
            )
        },
        grp(
            "generic-password",
            "password",
            // Not bare "pass": "tests passed" is in every other transcript.
            &[
                "password",
                "passwd",
                "passphrase",
                "pwd",
                "_pass",
                "--pass",
                "sshpass",
                "mysql",
                "mariadb",
            ],
            "",
            Check::Password,
        ),
    ];
    // The two generic rules share a shape; their key alternations are
    // spliced in here so the patterns stay in one place.
    for rule in r.iter_mut() {
        if rule.id == "xml-element-secret" {
            rule.pattern = leak(format!(
                r#"(?i)<[A-Za-z0-9_.:-]*(?:{GENERIC_KEY_NAMES}|{PASSWORD_KEY_NAMES})[A-Za-z0-9_.:-]*(?:\s[^<>]*)?>\s*([^<>\s]{{8,}})\s*</"#
            ));
        } else if rule.id == "generic-secret" {
            rule.pattern = leak(format!(
                r#"(?i)[A-Za-z0-9_.-]*{GENERIC_KEY_NAMES}[A-Za-z0-9_.-]*{}{YAML_VALUE_TAG}(?:'((?-u:[^'\s]){{8,}})'|"((?-u:[^"\s]){{8,}})"|`((?-u:[^`\s]){{8,}})`|((?-u:[^\s"'`,;&|<>(){{}}\[\]\\]){{8,}}))|--(?:token|secret|api-key|access-key|client-secret)[= ]["']?([^\s"'`,;&|<>(){{}}\[\]\\]{{8,}})"#,
                assign_q!()
            ));
        } else if rule.id == "generic-password" {
            rule.pattern = leak(format!(
                r#"(?i)[A-Za-z0-9_.-]*{PASSWORD_KEY_NAMES}[A-Za-z0-9_.-]*{}{YAML_VALUE_TAG}(?:'((?-u:[^'\s]){{4,}})'|"((?-u:[^"\s]){{4,}})"|`((?-u:[^`\s]){{4,}})`|((?-u:[^\s"'`,;&|<>(){{}}\[\]\\]){{4,}}))|--(?:password|passwd|pass)[= ]["']?([^\s"'`,;&|<>(){{}}\[\]\\]{{4,}})|\bsshpass\s+-p\s*(?:'([^'\n]{{4,}})'|"([^"\n]{{4,}})"|([^\s"'`;&|<>]{{4,}}))|\b(?:mysql(?:dump|admin|import|show|check|pump|sh|binlog|slap)?|mariadb(?:-?(?:dump|admin|import|check|show))?)\b[^\n]*?\s-p(?:'([^'\n]{{4,}})'|"([^"\n]{{4,}})"|([^\s"'`;&|<>-][^\s"'`;&|<>]{{3,}}))"#,
                assign_q!()
            ));
        }
    }
    r.extend(named_values());
    r.extend(named_formats());
    r.extend(terraform_variables());
    r.push(provider_named());
    r.extend(provider_tokens());
    r.extend(provider_bare_values());
    r.extend(webhook_urls_and_calls());
    r.extend(network());
    r
}

/// Values whose shape is only a secret next to the provider's name
/// (`asana_client_id = 16 digits`, `<discordToken>` …): one rule per
/// provider, so a line naming one runs one small pattern.
fn named_values() -> Vec<RuleDef> {
    let table: &[(&'static str, &'static [&'static str], &str, &str)] = &[
        (
            "named-asana",
            &["asana"],
            "asana",
            r"[0-9]{16}|[0-9]/[0-9]{16}:[A-Za-z0-9]{32}|[A-Za-z0-9]{32,36}",
        ),
        (
            "named-discord",
            &["discord"],
            "discord",
            r"[0-9]{17,19}|[A-Za-z0-9=_-]{32}",
        ),
        (
            "named-sonar",
            &["sonar"],
            r"sonar[_.-]?(?:login|token)",
            r"(?:squ_|sqp_|sqa_)?[A-Za-z0-9=_-]{40}",
        ),
        (
            "named-sumologic",
            &["sumo"],
            r"(?-i:[Ss]umo|SUMO)",
            r"su[A-Za-z0-9]{12}|[A-Za-z0-9]{64}",
        ),
        (
            "named-sidekiq",
            &["contribsys"],
            r"bundle_(?:enterprise|gems)__contribsys__com",
            r"[a-f0-9]{8}:[a-f0-9]{8}",
        ),
        (
            "named-ollama",
            &["ollama"],
            "ollama",
            r"[a-f0-9]{32}\.[A-Za-z0-9_-]{24}",
        ),
        (
            "named-zai",
            &["zai", "z_ai", "z.ai", "glm"],
            r"zai|z_ai|z\.ai|glm",
            r"[a-f0-9]{32}\.[A-Za-z0-9]{16}",
        ),
        (
            "named-telegram",
            &["telegram"],
            "telegram",
            r"[0-9]{5,16}:[A-Za-z0-9_-]{35}",
        ),
        (
            "named-sourcegraph",
            &["sourcegraph"],
            "sourcegraph",
            r"[a-fA-F0-9]{40}",
        ),
        (
            "named-cloudflare",
            &["cloudflare"],
            "cloudflare",
            r"[A-Za-z0-9_-]{40}|[a-f0-9]{37}",
        ),
        (
            "named-ovh",
            &["ovh"],
            "ovh",
            r"[A-Za-z0-9_-]{32}|[A-Za-z0-9_-]{16}",
        ),
        (
            "named-configcat",
            &["configcat"],
            "configcat",
            r"(?:configcat-sdk-1/)?[A-Za-z0-9_-]{22}/[A-Za-z0-9_-]{22}",
        ),
        ("named-canva", &["canva"], "canva", r"OC-[A-Za-z0-9_-]{10,}"),
        (
            "named-klaviyo",
            &["klaviyo"],
            "klaviyo",
            r"pk_[A-Za-z0-9]{34}",
        ),
        ("named-gumroad", &["gumroad"], "gumroad", r"[a-f0-9]{64}"),
        ("named-ibm", &["ibm"], "ibm", r"[A-Za-z0-9_-]{44}"),
        (
            "named-greptile",
            &["greptile"],
            "greptile",
            r"[A-Za-z0-9+/]{48}",
        ),
        ("named-plivo", &["plivo"], "plivo", r"MA[A-Z0-9]{18}"),
        (
            "named-clickhouse",
            &["clickhouse"],
            "clickhouse",
            r"[A-Za-z0-9]{20}",
        ),
        (
            "named-openweather",
            &["openweather", "pyowm", "owm"],
            "openweather|pyowm|owm",
            r"[a-z0-9]{32}",
        ),
        (
            "named-cloudinary",
            &["cloudinary"],
            "cloudinary",
            r"[0-9]{15}",
        ),
        (
            "named-azure-devops",
            &["ado_pat", "devops"],
            r"ado_pat|devops[ _-]?pat",
            r"[a-z0-9]{52}|[A-Za-z0-9]{84}",
        ),
        (
            "named-codeclimate",
            &["cc_test_reporter_id"],
            "cc_test_reporter_id",
            r"[a-f0-9]{64}",
        ),
        (
            "named-cloudflare-service-key",
            &["x-auth-user-service-key"],
            "x-auth-user-service-key",
            r"v1\.0-[a-f0-9]{24,}-[a-f0-9]{100,}(?:-[a-f0-9]{24,})?",
        ),
        (
            "named-uuid-key",
            &["hubspot", "messagebird", "snyk"],
            "hubspot|messagebird|snyk",
            r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
        ),
    ];
    named_rules(table, Check::Token)
}

/// A table of `(id, keywords, names, value)` as `generic-secret` rules of
/// [`named_pattern`]s, each value checked by `check`.
fn named_rules(
    table: &[(&'static str, &'static [&'static str], &str, &str)],
    check: Check,
) -> Vec<RuleDef> {
    table
        .iter()
        .map(|&(id, keywords, names, value)| {
            grp(
                id,
                "generic-secret",
                keywords,
                named_pattern(names, value),
                check,
            )
        })
        .collect()
}

/// `<name>… = <value>` for [`named_values`] and [`named_formats`]: the
/// provider's name, up to 30 name bytes, an operator, then the value.
fn named_pattern(names: &str, value: &str) -> &'static str {
    leak(format!(
        r#"(?i)(?:{names})[A-Za-z0-9_.-]{{0,30}}(?:{}|>)\s*["'`]?(?-i:({value}))(?:["'`\s;,<]|$)"#,
        assign_q!()
    ))
}

/// A provider's own prefixed format under its name (`beamer = b_…`,
/// `notion = secret_…`, `storecove_token=storecove_…`, `kickbox_key=live_…`):
/// the prefix alone is too common a word to key on, and with the name
/// before it the prefix names the format, so the value is checked as a
/// provider token (slot fillers and one-byte runs are placeholders,
/// keyboard runs are not; see [`provider_token_ok`]).
fn named_formats() -> Vec<RuleDef> {
    let table: &[(&'static str, &'static [&'static str], &str, &str)] = &[
        (
            "named-beamer",
            &["beamer"],
            "beamer",
            r"b_[A-Za-z0-9=_-]{44}",
        ),
        (
            "named-notion",
            &["notion"],
            "notion",
            r"secret_[A-Za-z0-9]{43}",
        ),
        (
            "named-storecove",
            &["storecove"],
            "storecove",
            r"storecove_[A-Za-z0-9]{20,}",
        ),
        (
            "named-closecrm",
            &["closecrm"],
            "closecrm",
            r"api_[A-Za-z0-9]{40,}",
        ),
        (
            "named-kickbox",
            &["kickbox"],
            "kickbox",
            r"(?:test|live)_[A-Za-z0-9]{40,}",
        ),
        (
            "named-column",
            &["column"],
            "column",
            r"(?:test|live)_[A-Za-z0-9]{20,}",
        ),
        (
            "named-courier",
            &["courier"],
            "courier",
            r"pk_(?:prod|test)_[A-Za-z0-9]{20,}",
        ),
        (
            "named-gocardless",
            &["gocardless"],
            "gocardless",
            r"live_[A-Za-z0-9_=-]{38,44}",
        ),
    ];
    named_rules(table, Check::ProviderToken)
}

/// Words that make a name a secret's name when they follow a provider's
/// name, in any case and glued or separated (`owlbotTOKEN`, `zonka
/// ACCESS_KEY`, `signaturit secret TOKEN`, `hiveage-secret-KEY-`).
const PROVIDER_SECRET_WORDS: &str =
    r"(?:secret|token|tkn|key|private|access|apikey|api|auth|pat|credentials?)";

/// The secret words a `provider-named` name may end in: the keyed ones
/// (see [`PROVIDER_NAMED_KEYWORDS`]), so its gate is exact.
const PROVIDER_CLOSING_WORDS: &str = r"(?:secret|token|key|private|access|credentials?)";

/// Keywords of `provider-named`: each closing secret word followed by a
/// byte that ends a name before its value (a space, an operator, a dash, a
/// quote). A bare `token` would trigger the rule on every usage record
/// (`"output_tokens":`), and each keyword costs the automaton states on
/// every byte, so names ending in `api`, `auth`, `pat` or a tab are not
/// keyed (a line holding none of these is not searched).
const PROVIDER_NAMED_KEYWORDS: &[&str] = &[
    "secret ",
    "secret:",
    "secret=",
    "secret-",
    "secret\"",
    "token ",
    "token:",
    "token=",
    "token-",
    "token\"",
    "key ",
    "key:",
    "key=",
    "key-",
    "key\"",
    "private ",
    "private:",
    "private=",
    "private-",
    "private\"",
    "access ",
    "access:",
    "access=",
    "access-",
    "access\"",
    "credential ",
    "credential:",
    "credential=",
    "credential-",
    "credential\"",
    "credentials ",
    "credentials:",
    "credentials=",
    "credentials-",
    "credentials\"",
];

/// Values published in documentation or in widely used public code, so
/// that no rule's finding is one of them (alongside every rule's own
/// `allow`). Each is public where it came from; redacting it would hide
/// what a session quoted and protect nothing.
pub const PUBLISHED_VALUES: &[&str] = &[
    // The NuGet.Config reference's two example `ClearTextPassword` values
    // (Microsoft's documentation, every language edition).
    "33f!!lloppa",
    "hal+9ooo_da!sY",
    // The search-only Algolia key of the public `npm-search` index, which
    // yarn and many package-search front ends ship in their sources.
    "6fe4476ee5a1832882e326b506d14126",
];

/// Terraform input variables named like a secret, with a default:
/// `variable "okta_api_token" {` ⏎ `default = "V"` ⏎ `}` (or on one line).
/// The block's lines are one text in a decoded view (a file read by a tool
/// and JSON-escaped into a transcript line); plain text read line by line
/// is joined by `conversation::Conversation::block_default`. Written as
/// `terraform fmt` writes it (`variable "`), which every match holds.
fn terraform_variables() -> Vec<RuleDef> {
    let pattern = |names: &str, min: usize| {
        leak(format!(
            r#"\bvariable "[A-Za-z0-9_-]*(?i:{names})[A-Za-z0-9_-]*"[ \t]*\{{[^{{}}]*?\bdefault[ \t]*=[ \t]*"([^"\s]{{{min},}})""#
        ))
    };
    vec![
        grp(
            "terraform-variable-secret",
            "generic-secret",
            &["variable \""],
            pattern(GENERIC_KEY_NAMES, GENERIC_MIN_VALUE),
            Check::BlockSecret,
        ),
        grp(
            "terraform-variable-password",
            "password",
            &["variable \""],
            pattern(PASSWORD_KEY_NAMES, PASSWORD_MIN_VALUE),
            Check::BlockPassword,
        ),
    ]
}

/// Shortest value `bare-secret-word-prose` accepts (`{19,}` after the
/// first byte).
pub const BARE_SECRET_MIN_VALUE: usize = 20;

/// Shortest value `provider-named` accepts (`{13,}` after the first byte).
pub const PROVIDER_MIN_VALUE: usize = 14;

/// `<provider><secret words><separator><value>`: the value a provider's
/// name labels as its secret. The provider is checked in code
/// ([`provider_named_ok`]); the separator may be an operator, spaces or one
/// dash (`unplu-access-token-V`). Case-insensitive (ASCII only, as the
/// keywords are) only in the secret words and without counted repetitions
/// before the value, so the regex stays small for the lazy DFA. The last
/// word and the byte after it are always one of the rule's keywords, which
/// `Gate::ValueAfter` relies on.
fn provider_named() -> RuleDef {
    let w = PROVIDER_SECRET_WORDS;
    let k = PROVIDER_CLOSING_WORDS;
    let pattern = leak(format!(
        r#"(?:^|[^A-Za-z0-9_.$-])[A-Za-z][A-Za-z0-9]+?(?:[_.-][A-Za-z0-9]+?)?(?:[_.-]|[ ]+)?(?:(?i-u:{w})(?:[_.-]|[ ]+)?){{0,3}}(?i-u:{k})(?:(?:"\]?[ \t]*|[ ][ \t]*)?(?::::=|::=|:=|=>|=|:)[ \t]*["'`]?|[ ][ \t]*["'`]?|-|",[ \t]*")([A-Za-z0-9][A-Za-z0-9_+/=.-]{{13,}})"#
    ));
    RuleDef {
        min_entropy: NO_ENTROPY_FLOOR,
        ..grp(
            "provider-named",
            "generic-secret",
            PROVIDER_NAMED_KEYWORDS,
            pattern,
            Check::ProviderNamed,
        )
    }
}

/// Prefixed tokens whose prefix names one provider's format. Each row:
/// id, keywords (the prefix, lower-case), pattern.
fn provider_tokens() -> Vec<RuleDef> {
    let table: &[(&'static str, &'static [&'static str], &'static str)] = &[
        ("adafruit-io-key", &["aio_"], r"aio_[A-Za-z0-9]{28}"),
        ("buildkite-token", &["bkua_"], r"bkua_[A-Za-z0-9]{40}"),
        ("dependency-track-key", &["odt_"], r"odt_[A-Za-z0-9]{32,40}"),
        ("groq-key", &["gsk_"], r"gsk_[A-Za-z0-9]{52}"),
        ("ionic-token", &["ion_"], r"ion_[A-Za-z0-9]{42}"),
        (
            "circleci-token",
            &["ccipat_"],
            r"CCIPAT_[A-Za-z0-9]{22,26}_[A-Za-z0-9]{40}",
        ),
        (
            "contentful-token",
            &["cfpat-"],
            r"CFPAT-[A-Za-z0-9_-]{43,64}",
        ),
        ("flexport-token", &["shltm_"], r"shltm_[A-Za-z0-9_-]{40}"),
        ("frameio-token", &["fio-u-"], r"fio-u-[A-Za-z0-9_=-]{64}"),
        (
            "hubspot-pat",
            &["pat-na", "pat-eu", "pat-ap"],
            r"pat-(?:na|eu|ap)[0-9]-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        ),
        (
            "planetscale-token",
            &["pscale_tkn_", "pscale_pw_", "pscale_oauth_"],
            r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,64}",
        ),
        ("prefect-key", &["pnu_"], r"pnu_[A-Za-z0-9]{36}"),
        ("readme-key", &["rdme_"], r"rdme_[a-z0-9]{70}"),
        ("replicate-token", &["r8_"], r"r8_[A-Za-z0-9]{37,}"),
        ("typeform-token", &["tfp_"], r"tfp_[A-Za-z0-9_.=-]{40,59}"),
        ("xai-key", &["xai-"], r"xai-[A-Za-z0-9_]{80}"),
        ("square-app-id", &["sq0idp-"], r"sq0idp-[A-Za-z0-9_-]{22}"),
        ("nvidia-key", &["nvapi-"], r"nvapi-[A-Za-z0-9_-]{64}"),
        ("pulumi-token", &["pul-"], r"pul-[a-f0-9]{40}"),
        ("segment-token", &["sgp_"], r"sgp_[A-Za-z0-9]{64}"),
        ("sourcegraph-slack-key", &["slk_"], r"slk_[a-f0-9]{64}"),
        (
            "sendinblue-key",
            &["xkeysib-"],
            r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        ),
        (
            "voiceflow-key",
            &["vf.dm.", "vf.ws."],
            r"VF\.(?:DM|WS)\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{16}",
        ),
        ("ubidots-token", &["bbff-"], r"BBFF-[A-Za-z0-9]{30}"),
        (
            "mongodb-atlas-sa-secret",
            &["mdb_sa_sk_"],
            r"mdb_sa_sk_[A-Za-z0-9_-]{40}",
        ),
        (
            "teamwork-token",
            &["tkn.v1_"],
            r"tkn\.v1_[A-Za-z0-9+/]{60,}={0,2}",
        ),
        ("rubygems-key", &["rubygems_"], r"rubygems_[a-f0-9]{48}"),
        (
            "pagarme-key",
            &["ak_live_", "ak_test_"],
            r"ak_(?:live|test)_[A-Za-z0-9]{30}",
        ),
        (
            "pubnub-key",
            &["pub-c-", "sub-c-"],
            r"(?:pub|sub)-c-[0-9a-z]{8}-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{12}",
        ),
        ("nuget-key", &["oy2"], r"oy2[a-z0-9]{43}"),
        (
            "zoho-token",
            &["1000."],
            r"1000\.[a-f0-9]{32}\.[a-f0-9]{32}",
        ),
        (
            "terraform-token",
            &[".atlasv1."],
            r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
        ),
        (
            "maxmind-key",
            &["_mmk"],
            r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk",
        ),
        ("nightfall-key", &["nf-"], r"NF-[A-Za-z0-9]{32}"),
        ("okta-token", &["ssws 00"], r"SSWS 00[A-Za-z0-9_-]{40}"),
        ("fullstory-key", &["na1."], r"na1\.[A-Za-z0-9+/]{100}"),
        (
            "dropbox-short-lived-token",
            &["sl."],
            r"sl\.(?:u\.)?[A-Za-z0-9_-]{130,}",
        ),
        ("clickup-token", &["pk_"], r"pk_[0-9]{6,9}_[0-9A-Z]{32}"),
        (
            "fleetbase-key",
            &["flb_live_", "flb_test_"],
            r"flb_(?:live|test)_[A-Za-z0-9]{20}",
        ),
        // Not all digits after the prefix (`GR134894112312312312…` is a
        // made-up number).
        (
            "gitlab-runner-registration-token",
            &["gr1348941"],
            r"GR1348941[0-9]*[A-Za-z_-][A-Za-z0-9_-]{10,}",
        ),
        // Base64 of `{"k":"…`.
        (
            "grafana-api-key",
            &["eyjrijoi"],
            r"eyJrIjoi[A-Za-z0-9+/]{40,}={0,2}",
        ),
        (
            "sourcegraph-token",
            &["sgp_"],
            r"sgp_(?:[a-fA-F0-9]{16}_)?(?:local_)?[a-f0-9]{40}",
        ),
        (
            "salesforce-access-token",
            &["00d"],
            r"00D[A-Za-z0-9]{12,15}![A-Za-z0-9_.]{80,}",
        ),
        (
            "tickettailor-key",
            &["sk_"],
            r"sk_[0-9]{3,5}_[0-9]{5,7}_[A-Za-z0-9]{32,40}",
        ),
        // Three dotted base64url segments opening with `ey` and a header
        // that is not `{"` (`eyA` is `{ `): signed tokens of a JWT-like
        // layout.
        (
            "dotted-token",
            &["eya", "eyh"],
            r"ey[AH][A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_.-]{20,}",
        ),
        ("cratesio-token", &["cio"], r"cio[A-Za-z0-9]{32}"),
        ("dfuse-key", &["web_"], r"web_[a-f0-9]{32}"),
        // An OAuth client's id: with its secret it is the app's credential
        // pair, and the suffix makes the format unambiguous.
        (
            "google-oauth-client-id",
            &[".apps.googleusercontent.com"],
            r"[0-9]{12}-[a-z0-9]{32}\.apps\.googleusercontent\.com",
        ),
        // Session 18: prefixed formats pasted bare (in prose, a chat
        // message, a command's output) with no name before them.
        (
            "linear-api-key",
            &["lin_api_", "lin_oauth_"],
            r"lin_(?:api_[A-Za-z0-9]{40}|oauth_[a-f0-9]{64})",
        ),
        (
            "atlassian-api-token",
            &["atatt3"],
            r"ATATT3[A-Za-z0-9_=-]{120,260}",
        ),
        ("perplexity-key", &["pplx-"], r"pplx-[A-Za-z0-9]{48}"),
        (
            "netlify-token",
            &["nfp_", "nfo_", "nfc_", "nfu_"],
            r"nf[pocu]_[A-Za-z0-9]{36,40}",
        ),
        (
            "vercel-token",
            &["vcp_", "vci_", "vca_", "vcr_", "vck_"],
            r"vc[pikar]_[A-Za-z0-9_-]{56}",
        ),
        (
            "grafana-service-account-token",
            &["glsa_"],
            r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
        ),
        (
            "shippo-token",
            &["shippo_live_", "shippo_test_"],
            r"shippo_(?:live|test)_[a-fA-F0-9]{40}",
        ),
        ("mailersend-token", &["mlsn."], r"mlsn\.[a-f0-9]{64}"),
        ("resend-key", &["re_"], r"re_[A-Za-z0-9]{8}_[A-Za-z0-9]{24}"),
        (
            "jfrog-token",
            &["akcp", "cmvmdgtu"],
            r"AKCp[A-Za-z0-9]{69}|cmVmdGtu[A-Za-z0-9]{56}",
        ),
        (
            "tavily-key",
            &["tvly-"],
            r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{32}",
        ),
        ("jina-key", &["jina_"], r"jina_[A-Za-z0-9_-]{50,70}"),
        (
            "langfuse-secret-key",
            &["sk-lf-"],
            r"sk-lf-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        ),
        ("e2b-key", &["e2b_"], r"e2b_[a-f0-9]{40}"),
        (
            "pinecone-key",
            &["pcsk_"],
            r"pcsk_[A-Za-z0-9]{4,8}_[A-Za-z0-9]{40,}",
        ),
        ("elevenlabs-key", &["sk_"], r"sk_[a-f0-9]{48}"),
        (
            "astra-token",
            &["astracs:"],
            r"AstraCS:[A-Za-z0-9]{24}:[a-f0-9]{64}",
        ),
        ("neon-key", &["napi_"], r"napi_[a-z0-9]{64}"),
        ("render-key", &["rnd_"], r"rnd_[A-Za-z0-9]{32}"),
        (
            "ory-token",
            &["ory_pat_", "ory_apikey_", "ory_ak_"],
            r"ory_(?:pat|apikey|ak)_[A-Za-z0-9_-]{32,64}",
        ),
        ("bitbucket-dc-token", &["bbdc-"], r"BBDC-[A-Za-z0-9+/]{44}"),
        (
            "huggingface-org-token",
            &["api_org_"],
            r"api_org_[A-Za-z0-9]{34}",
        ),
        ("deno-token", &["ddp_", "ddw_"], r"dd[pw]_[A-Za-z0-9]{36}"),
        ("twitch-oauth-token", &["oauth:"], r"oauth:[a-z0-9]{30}"),
        ("octopus-key", &["api-"], r"API-[A-Z0-9]{26}"),
        (
            "gitlab-feature-flag-token",
            &["glffct-"],
            r"glffct-[A-Za-z0-9_-]{20}",
        ),
        (
            "firebase-cloud-messaging-key",
            &[":apa91b"],
            r"AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{134}",
        ),
        (
            "plaid-access-token",
            &[
                "access-sandbox-",
                "access-development-",
                "access-production-",
            ],
            r"access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        ),
        (
            "braintree-token",
            &["access_token$"],
            r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}",
        ),
        (
            "flutterwave-secret-key",
            &["flwseck"],
            r"FLWSECK(?:_TEST)?-[a-f0-9]{32}-X",
        ),
        (
            "new-relic-key",
            &["nrak-", "nrii-"],
            r"NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9_-]{32}",
        ),
        (
            "honeycomb-key",
            &["hcaik_", "hcxik_", "hcxlk_", "hcamk_"],
            r"hc(?:aik|xik|xlk|amk)_[a-z0-9]{58}",
        ),
        (
            "sonarqube-token",
            &["sqp_", "squ_", "sqa_"],
            r"sq[pua]_[a-f0-9]{40}",
        ),
        (
            "intercom-token",
            &["dg9roj"],
            r"dG9rOj[A-Za-z0-9+/_-]{40,}={0,2}",
        ),
        ("together-key", &["tgp_v1_"], r"tgp_v1_[A-Za-z0-9_-]{43}"),
        (
            "launchdarkly-key",
            &["api-", "sdk-"],
            r"(?:api|sdk)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        ),
        ("yandex-api-key", &["aqvn"], r"AQVN[A-Za-z0-9_-]{35,38}"),
    ];
    table
        .iter()
        .map(|&(id, keywords, pattern)| RuleDef {
            check: Check::ProviderToken,
            ..tok(id, "provider-token", keywords, pattern)
        })
        .collect()
}

/// Secrets a URL path or an API call carries in a fixed place: webhook
/// URLs whose path is the credential, a Telegram notification URL, a
/// device token in a ThingsBoard telemetry URL, PowerShell's plain-text
/// `ConvertTo-SecureString`, a TrueNAS API key passed to its login call.
fn webhook_urls_and_calls() -> Vec<RuleDef> {
    vec![
        grp(
            "tines-webhook",
            "webhook-url",
            &[".tines.com/webhook/"],
            r"\.tines\.com/webhook/([a-f0-9]{32}/[a-f0-9]{32})",
            Check::None,
        ),
        grp(
            "zapier-webhook",
            "webhook-url",
            &["hooks.zapier.com/hooks/catch/"],
            r"hooks\.zapier\.com/hooks/catch/((?:[0-9]+/)?[A-Za-z0-9]{8,})",
            Check::None,
        ),
        grp(
            "thingsboard-device-token",
            "thingsboard-token",
            &["thingsboard"],
            r"thingsboard\.cloud/api/v1/([A-Za-z0-9]{20})(?:[^A-Za-z0-9]|$)",
            Check::None,
        ),
        grp(
            "telegram-notify-url",
            "telegram-bot-token",
            &["tgram://"],
            r"tgram://([0-9]{5,16}:[A-Za-z0-9_-]{35})",
            Check::None,
        ),
        grp(
            "powershell-plaintext-secure-string",
            "password",
            &["convertto-securestring"],
            r#"(?i)ConvertTo-SecureString\s+(?:-String\s+)?["']([^"'\s]{4,})["']\s+-AsPlainText"#,
            Check::Password,
        ),
        grp(
            "truenas-api-key",
            "truenas-key",
            &["login_with_api_key"],
            r#"login_with_api_key"[^\[\n]{0,40}\[\s*"([0-9]{1,4}-[A-Za-z0-9]{64})""#,
            Check::None,
        ),
    ]
}

/// Providers whose name alone labels the value after it (`chartmogul V`,
/// `wandb V`, `findl=V`, `fastforex-V`, `paydirtapp ACCESS code V`, with up
/// to two short words between): one rule for all, keyed on each (long,
/// distinctive) name. The name is the rule's own, so only the value is
/// checked (`Check::ProviderValue`; `the-odds-api` begins with `the`).
fn provider_bare_values() -> Vec<RuleDef> {
    const NAMES: &[&str] = &[
        "chartmogul",
        "cloudsmith",
        "blazemeter",
        "runscope",
        "fastforex",
        "findl",
        "dareboost",
        "everhour",
        "mailjet",
        "nicereply",
        "noticeable",
        "nozbe",
        "nozbeteams",
        "pepipost",
        "netcore",
        "parseur",
        "paydirtapp",
        "refiner",
        "skrapp",
        "smartsheets",
        "surveybot",
        "theoddsapi",
        "the-odds-api",
        "wandb",
        "telnyx",
        "enigma",
        "beamer",
        "uclassify",
        "scrapingant",
        "signupgenius",
        "yousign",
        "shipday",
    ];
    let names = NAMES.join("|");
    let pattern = leak(format!(
        r#"(?i)(?:^|[^A-Za-z0-9_.$-])(?:{names})[A-Za-z0-9_]{{0,12}}?(?:[ \t]+[A-Za-z]{{1,10}}){{0,2}}?(?:[ \t]*[=:][ \t]*|[ \t]+|-|\.)["'`]?([A-Za-z0-9][A-Za-z0-9_+/=.-]{{11,}})"#
    ));
    vec![RuleDef {
        min_entropy: NO_ENTROPY_FLOOR,
        ..grp(
            "provider-named-bare",
            "generic-secret",
            NAMES,
            pattern,
            Check::ProviderValue,
        )
    }]
}

/// The value check of [`Check::ProviderToken`]: slot-filler marks and runs
/// of six copies of one byte are placeholders; keyboard runs are not.
pub fn provider_token_ok(val: &[u8]) -> bool {
    let l = val.to_ascii_lowercase();
    !PROVIDER_VALUE_MARKS
        .iter()
        .any(|m| l.windows(m.len()).any(|w| w == m.as_bytes()))
        && !has_run(val, 6)
}

/// Does `v` hold `n` copies of one byte in a row?
fn has_run(v: &[u8], n: usize) -> bool {
    let mut run = 1;
    for w in v.windows(2) {
        run = if w[0] == w[1] { run + 1 } else { 1 };
        if run >= n {
            return true;
        }
    }
    false
}

/// First words of a name that are not a provider's: generic qualifiers
/// (`api_key`, `my_token`, `client secret`), code (`const fooToken`), and
/// names that say the value is public, made up or about a secret
/// (`publicToken`, `nonMatchingToken`, `csrf-token`, `primaryKey`).
const NOT_PROVIDERS: &[&str] = &[
    "api",
    "app",
    "apps",
    "my",
    "your",
    "our",
    "the",
    "this",
    "that",
    "secret",
    "secrets",
    "access",
    "client",
    "auth",
    "private",
    "public",
    "test",
    "tests",
    "testing",
    "dev",
    "prod",
    "production",
    "staging",
    "other",
    "new",
    "old",
    "default",
    "example",
    "examples",
    "sample",
    "fake",
    "dummy",
    "mock",
    "user",
    "users",
    "service",
    "master",
    "session",
    "signing",
    "encryption",
    "bearer",
    "refresh",
    "db",
    "web",
    "server",
    "local",
    "admin",
    "root",
    "non",
    "nonmatching",
    "invalid",
    "csrf",
    "xsrf",
    "primary",
    "foreign",
    "schema",
    "sdk",
    "entry",
    "const",
    "let",
    "var",
    "export",
    "set",
    "get",
    "env",
    "add",
    "begin",
    "end",
    "print",
    "cache",
    "key",
    "keys",
    "token",
    "tokens",
    "pat",
    "tkn",
    "id",
    "ssh",
    "gpg",
    "pgp",
    "rsa",
    "ecdsa",
    "ed25519",
    "openssh",
    "pem",
    "jwt",
    "oauth",
    "oauth2",
    "bot",
    "read",
    "write",
    "global",
    "personal",
    "project",
    "org",
    "team",
    "account",
    "accounts",
    "application",
    "partition",
    "sort",
    "hash",
    "lookup",
    "index",
    "row",
    "column",
    "map",
    "dict",
    "cert",
    "certificate",
    "license",
    "unique",
    "idempotency",
    "cursor",
    "page",
    "next",
    "continuation",
    "sas",
    "storage",
    "upload",
    "download",
    "deploy",
    "runner",
    "registration",
    "base",
    "shared",
    "temp",
    "tmp",
    "internal",
    "external",
    "system",
    "device",
    "host",
    "instance",
    "file",
    "config",
    "settings",
    "option",
    "options",
    "param",
    "params",
    "header",
    "headers",
    "the",
];

/// Marks of a value written to fill a slot (`pplx-xxxx…`,
/// `sk_test_example`, `placeholder-secret`, `tskey-api-short`): the
/// placeholder marks of the generic rules without the keyboard runs.
const PROVIDER_VALUE_MARKS: &[&str] = &[
    "xxxx",
    "example",
    "placeholder",
    "redacted",
    "your_",
    "your-",
    "${",
    "{{",
    "$(",
    "process.env",
    "getenv",
    "dummy",
    "sample",
    "invalid",
    "short",
    "notreal",
    "not-a-",
    "not_a_",
    "changeme",
    "insert",
    "replace",
    "secret-value",
    "fake",
    "_secret_",
    "sandbox",
];

/// Is `pre` (the match before the value: a boundary byte, the name and its
/// separator) a provider's name followed by secret words, and `val` a
/// credential-shaped value? The provider is the name's first part (split
/// at `_ - .`, spaces and camel-case humps) once the secret words are
/// dropped from its end; it must not be a generic word ([`NOT_PROVIDERS`]).
/// The value must not carry a placeholder mark, a run of six copies of one
/// byte, or be a lowercase phrase; sequential-looking values (`abcdef…`,
/// `1a2b3c…`) are accepted.
pub fn provider_named_ok(pre: &[u8], val: &[u8]) -> bool {
    const WORDS: &[&str] = &[
        "secret",
        "secrets",
        "token",
        "tkn",
        "key",
        "private",
        "access",
        "apikey",
        "api",
        "auth",
        "pat",
        "credential",
        "credentials",
    ];
    // The name: from its first letter to its last.
    let Some(first) = pre.iter().position(u8::is_ascii_alphabetic) else {
        return false;
    };
    let Some(last) = pre.iter().rposition(u8::is_ascii_alphanumeric) else {
        return false;
    };
    if last < first {
        return false;
    }
    let name = &pre[first..=last];
    let mut parts: Vec<&[u8]> = Vec::new();
    let mut from = 0;
    for i in 0..name.len() {
        let b = name[i];
        if !b.is_ascii_alphanumeric() {
            if i > from {
                parts.push(&name[from..i]);
            }
            from = i + 1;
        } else if i > from
            && b.is_ascii_uppercase()
            && (name[i - 1].is_ascii_lowercase() || name[i - 1].is_ascii_digit())
        {
            parts.push(&name[from..i]);
            from = i;
        }
    }
    if from < name.len() {
        parts.push(&name[from..]);
    }
    let provider = parts
        .first()
        .copied()
        .unwrap_or_default()
        .to_ascii_lowercase();
    // A word glued to the secret word (`apitemplateKEY`, `imaggaSECRET`):
    // the provider is the word without it.
    let provider: &[u8] = WORDS
        .iter()
        .filter(|w| provider.len() > w.len() + 2 && provider.ends_with(w.as_bytes()))
        .map(|w| &provider[..provider.len() - w.len()])
        .next()
        .unwrap_or(&provider);
    let provider = WORDS
        .iter()
        .filter(|w| provider.len() > w.len() + 2 && provider.ends_with(w.as_bytes()))
        .map(|w| &provider[..provider.len() - w.len()])
        .next()
        .unwrap_or(provider);
    if provider.len() < 3
        || provider.iter().all(u8::is_ascii_digit)
        || NOT_PROVIDERS.iter().any(|w| provider == w.as_bytes())
        || WORDS.iter().any(|w| provider == w.as_bytes())
    {
        return false;
    }
    provider_value_ok(val)
}

/// Heads of credential formats that have a rule of their own here or at a
/// peer (Stripe-style `sk_`/`rk_`, Elastic `ess_`, Gemini `AQ.`, Persona,
/// Proof, RunPod, Supabase, Cloudsmith, GitHub, GitLab, Slack, npm, PyPI,
/// Hugging Face, DigitalOcean, Shopify, Linear, Notion, Sentry, Segment,
/// Tailscale): the peers list their sandbox, test and short values as
/// negatives, so that format's rule decides. Stripe's `pk_` keys are
/// publishable, so no secret format claims `pk_`.
const KNOWN_TOKEN_HEADS: &[&str] = &[
    "sk", "rk", "ak", "ess", "essu", "aq", "persona", "prf", "rpa", "sbp", "csa", "csb", "ghp",
    "gho", "ghu", "ghs", "ghr", "glpat", "xoxb", "xoxp", "xoxa", "xoxe", "npm", "pypi", "hf",
    "dop", "doo", "shpat", "shpss", "lin", "ntn", "sntrys", "sgp", "tskey", "whsec",
];

/// The value half of [`provider_named_ok`].
pub fn provider_value_ok(val: &[u8]) -> bool {
    // A token with a known format's prefix (`sk_…`, `ess_…`, `AQ.…`): that
    // format has its own, stricter rule, which decides (a value the format
    // rejects, such as a sandbox or short key, is not caught here). Any
    // other head (`pk_…`, `abcd-…`, `scp-test-…`) is part of this
    // provider's value.
    let head = val.iter().take_while(|b| b.is_ascii_alphabetic()).count();
    if matches!(val.get(head), Some(b'_' | b'-' | b'.'))
        && KNOWN_TOKEN_HEADS
            .iter()
            .any(|h| val[..head].eq_ignore_ascii_case(h.as_bytes()))
    {
        return false;
    }
    // `eyJ….eyJ….signature`: a JWT with a word for a signature.
    if val.starts_with(b"eyJ") {
        if let Some(dot) = val.iter().rposition(|&b| b == b'.') {
            let sig = &val[dot + 1..];
            if (1..16).contains(&sig.len()) && sig.iter().all(u8::is_ascii_lowercase) {
                return false;
            }
        }
    }
    // `SalesResults-1.2`: a name and a version.
    if let Some(dash) = val.iter().rposition(|&b| b == b'-' || b == b'_') {
        let (name, ver) = (&val[..dash], &val[dash + 1..]);
        if name.iter().all(u8::is_ascii_alphabetic)
            && !ver.is_empty()
            && ver.iter().all(|&b| b.is_ascii_digit() || b == b'.')
        {
            return false;
        }
    }
    let l = val.to_ascii_lowercase();
    if PROVIDER_VALUE_MARKS
        .iter()
        .any(|m| l.windows(m.len()).any(|w| w == m.as_bytes()))
    {
        return false;
    }
    if has_run(val, 6) || val.ends_with(b"..") {
        return false;
    }
    let digit = val.iter().any(u8::is_ascii_digit);
    let letter = val.iter().any(u8::is_ascii_alphabetic);
    let phrase = val.iter().any(|&b| b == b'-' || b == b'.' || b == b'_');
    // `placeholder-consumer-key`, `serviceAccounts`: words, not a value.
    // Twenty letters of one case with no separator are not a word.
    let one_case = val.iter().all(u8::is_ascii_lowercase) || val.iter().all(u8::is_ascii_uppercase);
    if !digit && (phrase || val.len() < if one_case { 20 } else { 24 }) && !random_case(val) {
        return false;
    }
    // All digits: an id or a counter unless long.
    if !letter && val.len() < 20 {
        return false;
    }
    true
}

/// `ABCdefGHIjklMNOpqr`: letters whose case changes in runs, with three or
/// more runs of two or more capitals. An identifier in camel case has
/// single capitals (`getUserToken`) and at most an acronym or two
/// (`parseXMLHttpURL`); a random mixed-case string of 16 letters has
/// several capital runs.
fn random_case(val: &[u8]) -> bool {
    if val.len() < 16 || !val.iter().all(u8::is_ascii_alphabetic) {
        return false;
    }
    let mut runs = 0;
    let mut len = 0;
    for &b in val.iter().chain(std::iter::once(&b'a')) {
        if b.is_ascii_uppercase() {
            len += 1;
        } else {
            if len >= 2 {
                runs += 1;
            }
            len = 0;
        }
    }
    runs >= 3
}

/// Generated patterns live for the program's lifetime; the catalogue is
/// built once per scanner.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn network() -> Vec<RuleDef> {
    let net = |id, kind, keywords, pattern, check| RuleDef {
        id,
        kind,
        keywords,
        pattern,
        group: 0,
        check,
        min_entropy: 0.0,
        severity: Severity::Block,
        class: Class::Network,
        allow: &[],
    };
    vec![
        net(
            "private-ipv4",
            "ip-address",
            &["10.", "172.", "192.168.", "169.254.", "100."],
            r"(?:10|172|192|169|100)\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}",
            Check::Ipv4,
        ),
        net(
            "private-ipv6",
            "ip-address",
            // No keyword: `fc`/`fd` are everywhere in hex and base64, so a
            // shape check on each `:` gates this rule instead (see engine).
            &[],
            r"(?i)(?:fe[89ab][0-9a-f]|f[cd][0-9a-f]{2}):[0-9a-f:]{2,40}(?:%[A-Za-z0-9]{1,16})?",
            Check::Ipv6,
        ),
        net(
            "mac-address",
            "mac-address",
            // No literal to key on: runs on every line (the regex engine's
            // DFA handles it in one pass).
            &[],
            r"[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){4}",
            Check::Mac,
        ),
        net(
            "lan-hostname",
            "hostname",
            &[
                ".local",
                ".lan",
                ".internal",
                ".fritz.box",
                ".home.arpa",
                ".localdomain",
                ".intranet",
                ".corp",
            ],
            r"(?i)[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*\.(?:local|lan|internal|fritz\.box|home\.arpa|localdomain|intranet|corp)",
            Check::Host,
        ),
        RuleDef {
            severity: Severity::Warn,
            ..net(
                "machine-hostname",
                "hostname",
                &[
                    "macbook",
                    "laptop",
                    "desktop-",
                    "imac",
                    "-mbp",
                    "thinkpad",
                    "mac-mini",
                    "-pc",
                    "workstation",
                ],
                r"(?i)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*-(?:macbook(?:-pro|-air)?|laptop|imac|mbp|thinkpad|mac-mini|pc|workstation)(?:-[0-9]{1,3})?|DESKTOP-[A-Z0-9]{7}",
                Check::Host,
            )
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ASCII spelling of a key name in `alternation` (`(?:a|b[_-]?c|ds?)`):
    /// `[_-]?` becomes nothing, `_` or `-`, and `s?` nothing or `s`.
    fn spellings(alternation: &str) -> Vec<String> {
        let inner = alternation
            .strip_prefix("(?:")
            .and_then(|s| s.strip_suffix(')'))
            .expect("a non-capturing alternation");
        let mut out = Vec::new();
        for alt in inner.split('|') {
            let mut forms = vec![String::new()];
            let mut rest = alt;
            while !rest.is_empty() {
                let (opts, used): (Vec<&str>, usize) = if rest.starts_with("[_-]?") {
                    (vec!["", "_", "-"], 5)
                } else if rest.starts_with("[_.-]?") {
                    (vec!["", "_", ".", "-"], 6)
                } else if rest.starts_with("s?") {
                    (vec!["", "s"], 2)
                } else {
                    (vec![&rest[..1]], 1)
                };
                forms = forms
                    .iter()
                    .flat_map(|f| opts.iter().map(move |o| format!("{f}{o}")))
                    .collect();
                rest = &rest[used..];
            }
            out.extend(forms);
        }
        out
    }

    /// The engine's assignment gate is exact only if every ASCII spelling
    /// of every key name the generic regexes accept contains one of the
    /// rule's keywords (see `engine::AssignGate`).
    /// The script rules run only where `non_ascii_trigger` says so: every
    /// text their patterns match must pass it. Random texts from the
    /// fragments that decide a match (each name, separators, linking
    /// words, values, other scripts' words and punctuation), and edges.
    #[test]
    fn non_ascii_words_cover_every_match() {
        let res: Vec<regex::bytes::Regex> = NON_ASCII_RULES
            .iter()
            .map(|id| {
                let def = builtin().into_iter().find(|d| d.id == *id).unwrap();
                crate::engine::compile_builtin(def.pattern).unwrap()
            })
            .collect();
        let parts: Vec<&[u8]> = [
            "hasło",
            "Hasło",
            "HasŁo",
            "şifre",
            "Şifre",
            "lösenord",
            "LÖsenord",
            "mật khẩu",
            "Mật khẩu",
            "пароль",
            "Пароль",
            "ПАРОЛЬ",
            "κωδικός",
            "Κωδικός",
            "סיסמה",
            "كلمة المرور",
            "كلمة السر",
            "رمز عبور",
            "पासवर्ड",
            "パスワード",
            "暗証番号",
            "密码",
            "密碼",
            "口令",
            "비밀번호",
            "암호",
            "รหัสผ่าน",
            "APIキー",
            "API 키",
            "api密钥",
            "Api 密鑰",
            "アクセストークン",
            "トークン",
            "токен",
            "Токен",
            "ключ API",
            "Ключ API",
            "API-ключ",
            "API ключ",
            "令牌",
            "秘密鍵",
            "clé API",
            "Clé d'API",
            "clé de l'API",
            ":",
            "：",
            "=",
            " ",
            "\t",
            "\"",
            "「",
            "Qm83kZpx19#",
            "ab12",
            "数据库",
            "は",
            "是",
            "为",
            "는",
            "은",
            " — ",
            "–",
            " от базы ",
            " là ",
            "là",
            " هي ",
            " היא ",
            "คือ",
            "Mật khẩu",
            "הסיסמה",
            " доступа",
            " от ",
            "базы",
            "доступа",
            " для CI",
            " для db",
            "      ",
            "です",
            "от",
            "x",
            "\n",
            "é",
            "ь",
            "I",
        ]
        .iter()
        .map(|s| s.as_bytes())
        .collect();
        let mut rng = crate::testkit::XorShift(0x9E37_79B9_7F4A_7C15);
        let mut matched = 0;
        for _ in 0..200_000 {
            let n = 2 + (rng.next() % 6) as usize;
            let v = rng.concat(&parts, n);
            for re in &res {
                if re.is_match(&v) {
                    matched += 1;
                    assert!(non_ascii_trigger(&v), "{:?}", String::from_utf8_lossy(&v));
                }
            }
        }
        assert!(matched > 300, "only {matched} random matches");
        // The farthest a name can stand before a dash: the longest name
        // (Thai, 24 bytes) and the longest phrase (two blanks, `для`, two
        // blanks, 16 bytes).
        let far = "รหัสผ่าน  для  абвгдежз — Qm83kZpx19#".as_bytes();
        assert!(res.iter().any(|re| re.is_match(far)));
        assert!(non_ascii_trigger(far));
    }

    #[test]
    fn assignment_keywords_cover_every_key_name() {
        let defs = builtin();
        for (id, names) in [
            ("generic-secret", GENERIC_KEY_NAMES),
            ("generic-password", PASSWORD_KEY_NAMES),
        ] {
            let def = defs.iter().find(|d| d.id == id).expect("rule exists");
            let whole = regex::Regex::new(&format!("^(?i){names}$")).unwrap();
            let forms = spellings(names);
            let alternatives = names.matches('|').count() + 1;
            assert!(
                forms.len() >= alternatives,
                "{id}: expander found {forms:?}"
            );
            for f in forms {
                // The expander must agree with the regex it reads.
                assert!(whole.is_match(&f), "{id}: {f} is not a key name");
                assert!(
                    def.keywords.iter().any(|k| f.contains(k)),
                    "{id}: no keyword inside key name {f:?}"
                );
            }
            // The `--NAME value` alternatives are keyed too.
            for flag in ["token", "secret", "api-key", "access-key", "client-secret"] {
                if id == "generic-secret" {
                    assert!(def.keywords.iter().any(|k| flag.contains(k)), "{flag}");
                }
            }
        }
        let pw = defs.iter().find(|d| d.id == "generic-password").unwrap();
        for k in ASSIGN_UNGATED_KEYWORDS {
            assert!(pw.keywords.contains(k), "{k} is a generic-password keyword");
        }
    }
}
