//! File names derived from identifiers, bounded whatever the identifier.
//!
//! Owns: the longest name a lane file may have and the one deterministic
//! rule that shortens a longer one (a readable prefix, `~`, then a digest
//! of the whole name). Record names, blob stems (`<stem>.raw`,
//! `<stem>.stage.json`, `<stem>.quarantine.json`) and session notes all go
//! through it; index keys are digests already.
//!
//! Invariants:
//! - A name within the bound is returned unchanged, so every ordinary name
//!   (UUID session, 17-byte agent id: under 100 bytes) keeps the name it
//!   always had, and shortening a shortened name changes nothing.
//! - The rule depends only on the name, so a replay of an old journal whose
//!   events carry over-long names (an older abcd accepted 256-byte ids)
//!   derives the same shortened names every time, byte for byte.
//! - A shortened name never equals an unshortened one: `~` is outside the
//!   identifier charset (`lineage::is_valid_id`).

use std::borrow::Cow;

use crate::fsutil::sha256_hex;

/// Longest file name (stem plus extension) written into a lane. Projection
/// files are written through a temporary sibling `.<name>.<pid>.<rand>.tmp`
/// (up to 30 bytes longer, `fsutil::write_atomic`), and 255 bytes is the
/// name limit of ext4, xfs, btrfs and tmpfs: 200 keeps both under it with a
/// margin.
pub const MAX_NAME_BYTES: usize = 200;

// A session note is named by the id itself whenever the id passes the
// new-input rule: `store::session_store` looks notes up by the bare id.
const _: () = assert!(crate::lineage::MAX_ID_BYTES <= MAX_NAME_BYTES);

/// Longest extension a blob stem is given (`.quarantine.json`).
const LONGEST_STEM_EXT: usize = ".quarantine.json".len();

/// Longest blob stem, so every `<stem>.<ext>` fits [`MAX_NAME_BYTES`].
pub const MAX_STEM_BYTES: usize = MAX_NAME_BYTES - LONGEST_STEM_EXT;

/// Hex digits of SHA-256 kept in a shortened name (128 bits).
const DIGEST_HEX: usize = 32;

/// What separates the kept prefix from the digest in a shortened name.
pub const SHORTENED_MARK: char = '~';

/// `name` when it is at most `max` bytes, else its first bytes (cut at a
/// character boundary), [`SHORTENED_MARK`] and 32 hex digits of the
/// SHA-256 of the whole `name`, `max` bytes in all.
pub fn bound(name: &str, max: usize) -> Cow<'_, str> {
    if name.len() <= max {
        return Cow::Borrowed(name);
    }
    let digest = sha256_hex(name.as_bytes());
    let mut keep = max.saturating_sub(1 + DIGEST_HEX);
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    Cow::Owned(format!(
        "{}{SHORTENED_MARK}{}",
        &name[..keep],
        &digest[..DIGEST_HEX]
    ))
}

/// The on-disk stem of a blob stem (the journaled one, or a new one).
pub fn stem(stem: &str) -> Cow<'_, str> {
    bound(stem, MAX_STEM_BYTES)
}

/// The on-disk name of a record file; the `.md` extension is kept.
pub fn record_name(name: &str) -> Cow<'_, str> {
    if name.len() <= MAX_NAME_BYTES {
        return Cow::Borrowed(name);
    }
    let (base, ext) = match name.strip_suffix(".md") {
        Some(base) => (base, ".md"),
        None => (name, ""),
    };
    Cow::Owned(format!("{}{ext}", bound(base, MAX_NAME_BYTES - ext.len())))
}

/// The file name of a session note (`sessions/<name>`).
pub fn session_note(session_id: &str) -> Cow<'_, str> {
    bound(session_id, MAX_NAME_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_names_are_unchanged_and_long_ones_bounded() {
        let uuid = "8d1a1f9e-b38c-41fa-952a-5288179b5626";
        assert_eq!(stem(uuid), uuid);
        assert_eq!(session_note(uuid), uuid);
        let rec = format!("20260909T062422.051000000Z-{uuid}-agent-a490235204f1c154d.md");
        assert_eq!(record_name(&rec), rec);
        for len in [
            MAX_STEM_BYTES,
            MAX_STEM_BYTES + 1,
            MAX_NAME_BYTES + 1,
            300,
            600,
        ] {
            let long = "x".repeat(len);
            let s = stem(&long);
            assert!(s.len() <= MAX_STEM_BYTES, "{len}");
            assert_eq!(stem(&s), s, "idempotent");
            assert_eq!(s == long, len <= MAX_STEM_BYTES);
            let md = format!("{long}.md");
            let r = record_name(&md);
            assert!(r.len() <= MAX_NAME_BYTES && r.ends_with(".md"), "{r}");
            assert_eq!(record_name(&r), r, "idempotent");
            assert!(session_note(&long).len() <= MAX_NAME_BYTES);
        }
        // Deterministic, distinct for distinct names, readable prefix kept.
        let a = "a".repeat(250);
        let b = format!("{}b", "a".repeat(249));
        assert_eq!(stem(&a), stem(&a.clone()));
        assert_ne!(stem(&a), stem(&b));
        assert!(stem(&a).starts_with("aaaa") && stem(&a).contains(SHORTENED_MARK));
        // A multi-byte character is never cut in half.
        let wide = "é".repeat(200);
        assert!(stem(&wide).len() <= MAX_STEM_BYTES);
    }
}
