//! Byte layout of the journal file: header, frame, checksums.
//!
//! This module owns encoding and context-free decoding of the bytes described
//! in `journal-format/README.md`. It does no I/O and must never panic on any
//! input: every length is checked before it is used.

use sha2::{Digest, Sha256};

use crate::error::FrameError;

/// File magic: PNG-style, so text-mode transfers and line-ending rewrites
/// (CR LF, LF, the ^Z) are detected at offset 0.
pub const FILE_MAGIC: [u8; 8] = [0x89, b'J', b'R', b'N', b'L', 0x0D, 0x0A, 0x1A];
/// Version of the file header written by this engine (journal-format/).
/// 2: the frames are unchanged; the version says what their payloads are —
/// a store's events of schema 2, with no free text — so a binary that only
/// knows version 1 refuses the file instead of appending schema-1 events
/// to it. Version 1 files are still read (the upgrade reads them).
pub const FORMAT_VERSION: u16 = 2;
/// Every header version this engine reads.
pub const READ_VERSIONS: [u16; 2] = [1, 2];
/// Header flag: frames carry `prev_hash` (always set in version 1).
pub const HEADER_FLAG_CHAINED: u16 = 1;
/// Size of the file header; the first frame starts here.
pub const HEADER_LEN: usize = 64;

/// Frame magic. The first byte is non-ASCII and non-zero, so neither text nor
/// zero fill can look like the start of a frame.
pub const FRAME_MAGIC: [u8; 4] = [0xD7, b'J', b'F', b'R'];
/// Version of the frame layout.
pub const FRAME_VERSION: u8 = 1;
/// Frame flag: the 32-byte `prev_hash` field is present (required in v1).
pub const FLAG_HAS_PREV_HASH: u16 = 1;
/// Frame flag: more frames of the same atomic batch follow this one.
pub const FLAG_BATCH_CONT: u16 = 2;
const KNOWN_FLAGS: u16 = FLAG_HAS_PREV_HASH | FLAG_BATCH_CONT;

/// Bytes before the payload (magic .. prev_hash).
pub const FRAME_HEAD_LEN: usize = 80;
/// Bytes after the padded payload (`frame_len` u32 + masked CRC u32).
pub const FRAME_TRAILER_LEN: usize = 8;
/// Smallest possible frame (empty payload).
pub const MIN_FRAME_LEN: usize = FRAME_HEAD_LEN + FRAME_TRAILER_LEN;

/// Cap on one frame's payload: a record body is up to 64 MiB of redacted
/// transcript and redaction placeholders can expand text slightly; 96 MiB
/// leaves room for that plus the event envelope while keeping a single
/// allocation bounded when a length field is damaged.
pub const MAX_PAYLOAD: usize = 96 << 20;
/// Cap on the total encoded size of one atomic batch: one write() and one
/// in-memory buffer; same order as one maximal record so imports can batch
/// many small events but not blow memory.
pub const MAX_BATCH_BYTES: usize = 128 << 20;
/// Cap on the number of events in one atomic batch; keeps the per-batch
/// bookkeeping (ids, acks) bounded independent of payload sizes.
pub const MAX_BATCH_EVENTS: usize = 1 << 16;

/// What a frame records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// An opaque producer event.
    Event,
    /// A repair record: a damaged range was moved to `journal.quarantine/`.
    Repair,
}

impl FrameKind {
    pub fn to_byte(self) -> u8 {
        match self {
            FrameKind::Event => 1,
            FrameKind::Repair => 2,
        }
    }
    pub fn from_byte(b: u8) -> Option<FrameKind> {
        match b {
            1 => Some(FrameKind::Event),
            2 => Some(FrameKind::Repair),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::Event => "EVENT",
            FrameKind::Repair => "REPAIR",
        }
    }
}

/// Why bytes at an offset are not a valid frame (or header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Fewer bytes than a frame header, or the frame extends past EOF.
    Truncated,
    BadMagic,
    BadVersion(u8),
    BadKind(u8),
    BadFlags(u16),
    PayloadTooLarge(u32),
    /// The `frame_len` trailer disagrees with the length implied by the header.
    LengthMismatch {
        expected: u32,
        found: u32,
    },
    Crc,
    /// The frame belongs to another journal (journal_tag differs).
    JournalTag,
    SeqGap {
        expected: u64,
        found: u64,
    },
    /// `prev_hash` is not the SHA-256 of the previous frame.
    ChainMismatch,
    /// The last frame at EOF still says more frames of its batch follow.
    IncompleteBatch,
    /// The 64-byte file header at offset 0 is damaged (what is wrong).
    Header(String),
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Truncated => write!(f, "truncated frame"),
            Reason::BadMagic => write!(f, "bad frame magic"),
            Reason::BadVersion(v) => write!(f, "unknown frame version {v}"),
            Reason::BadKind(k) => write!(f, "unknown frame kind {k}"),
            Reason::BadFlags(x) => write!(f, "unknown frame flags {x:#06x}"),
            Reason::PayloadTooLarge(n) => write!(f, "payload length {n} over cap"),
            Reason::LengthMismatch { expected, found } => {
                write!(f, "frame_len {found} != {expected}")
            }
            Reason::Crc => write!(f, "crc mismatch"),
            Reason::JournalTag => write!(f, "frame from another journal (tag mismatch)"),
            Reason::SeqGap { expected, found } => {
                write!(f, "seq gap: expected {expected}, found {found}")
            }
            Reason::ChainMismatch => write!(f, "hash chain mismatch"),
            Reason::IncompleteBatch => write!(f, "incomplete batch at end of file"),
            Reason::Header(d) => write!(f, "bad journal header (bytes 0..64): {d}"),
        }
    }
}

impl Reason {
    /// Short machine-friendly name, stable for JSON output.
    pub fn code(&self) -> &'static str {
        match self {
            Reason::Truncated => "truncated",
            Reason::BadMagic => "magic",
            Reason::BadVersion(_) => "version",
            Reason::BadKind(_) => "kind",
            Reason::BadFlags(_) => "flags",
            Reason::PayloadTooLarge(_) => "payload_len",
            Reason::LengthMismatch { .. } => "frame_len",
            Reason::Crc => "crc",
            Reason::JournalTag => "journal_tag",
            Reason::SeqGap { .. } => "seq_gap",
            Reason::ChainMismatch => "hash_mismatch",
            Reason::IncompleteBatch => "incomplete_batch",
            Reason::Header(_) => "header",
        }
    }
}

/// CRC-32 (crc32fast, IEEE polynomial), stored masked: a CRC computed over
/// bytes that themselves contain CRCs (a journal copied into a payload) is
/// weak, so the stored value is rotated and offset (LevelDB's mask).
pub fn masked_crc(bytes: &[u8]) -> u32 {
    let c = crc32fast::hash(bytes);
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Parsed file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    pub version: u16,
    pub flags: u16,
    pub segment_no: u32,
    pub journal_id: [u8; 16],
    pub base_seq: u64,
    pub created_unix_ms: u64,
}

impl FileHeader {
    pub fn new(journal_id: [u8; 16], created_unix_ms: u64) -> FileHeader {
        FileHeader {
            version: FORMAT_VERSION,
            flags: HEADER_FLAG_CHAINED,
            segment_no: 0,
            journal_id,
            base_seq: 1,
            created_unix_ms,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&FILE_MAGIC);
        b[8..10].copy_from_slice(&self.version.to_le_bytes());
        b[10..12].copy_from_slice(&self.flags.to_le_bytes());
        b[12..16].copy_from_slice(&self.segment_no.to_le_bytes());
        b[16..32].copy_from_slice(&self.journal_id);
        b[32..40].copy_from_slice(&self.base_seq.to_le_bytes());
        b[40..48].copy_from_slice(&self.created_unix_ms.to_le_bytes());
        let crc = masked_crc(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode and validate a header; the error string says what is wrong.
    pub fn decode(b: &[u8]) -> Result<FileHeader, String> {
        if b.len() < HEADER_LEN {
            return Err(format!(
                "file is {} bytes, shorter than the header",
                b.len()
            ));
        }
        if b[0..8] != FILE_MAGIC {
            return Err("bad file magic (not an abcd journal)".into());
        }
        let crc = u32_at(b, 60);
        if crc != masked_crc(&b[0..60]) {
            return Err("header crc mismatch".into());
        }
        let h = FileHeader {
            version: u16::from_le_bytes([b[8], b[9]]),
            flags: u16::from_le_bytes([b[10], b[11]]),
            segment_no: u32_at(b, 12),
            journal_id: arr16(&b[16..32]),
            base_seq: u64_at(b, 32),
            created_unix_ms: u64_at(b, 40),
        };
        if !READ_VERSIONS.contains(&h.version) {
            return Err(format!("unsupported format version {}", h.version));
        }
        if h.flags != HEADER_FLAG_CHAINED {
            return Err(format!("unsupported header flags {:#06x}", h.flags));
        }
        if h.base_seq != 1 || h.segment_no != 0 {
            return Err("segmented journals are not supported by this version".into());
        }
        Ok(h)
    }

    /// journal_tag carried by every frame of this journal.
    pub fn tag(&self) -> [u8; 4] {
        [
            self.journal_id[0],
            self.journal_id[1],
            self.journal_id[2],
            self.journal_id[3],
        ]
    }
}

/// How a damaged file header was restored (journal-format §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderProof {
    /// Its SHA-256 equals the `prev_hash` stored in the first frame (H0):
    /// the exact original, proven cryptographically.
    FirstFrame,
    /// Zero frames: the unique header one bit away from the damaged bytes
    /// whose CRC and fields are valid. Nothing depends on it but the seq-0
    /// position, so even a wrong guess could lose no event.
    SingleBitCrc,
}

impl HeaderProof {
    pub fn describe(self) -> &'static str {
        match self {
            HeaderProof::FirstFrame => {
                "rebuilt from the frames: its SHA-256 equals the first frame's prev_hash (H0), so it is the exact original"
            }
            HeaderProof::SingleBitCrc => {
                "the journal has no frame; the only header one bit away from the damaged bytes with a valid CRC"
            }
        }
    }
}

/// What is known about the first frame when the header is damaged: the
/// 32 bytes stored at its `prev_hash` (offset 112..144 of the file) and its
/// `journal_tag` (76..80), read raw (the frame may be damaged too: the
/// SHA-256 comparison is the proof, not the frame's CRC).
pub struct FirstFrameHint {
    pub prev_hash: [u8; 32],
    pub tag: [u8; 4],
}

/// Bytes of the header a canonical rebuild cannot fill in from constants:
/// journal_id (16..32) and created_unix_ms (40..48).
const HEADER_FREE: [std::ops::Range<usize>; 2] = [16..32, 40..48];

/// The header of `version` with every constant field (magic, version,
/// flags, segment_no, base_seq, reserved) set and the CRC recomputed,
/// keeping `b`'s journal_id and created time.
fn canonical_header(b: &[u8; HEADER_LEN], version: u16) -> [u8; HEADER_LEN] {
    let mut id = [0u8; 16];
    id.copy_from_slice(&b[16..32]);
    let mut h = FileHeader::new(id, u64_at(b, 40));
    h.version = version;
    h.encode()
}

fn with_crc(mut b: [u8; HEADER_LEN]) -> [u8; HEADER_LEN] {
    let crc = masked_crc(&b[0..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Recover the original of a damaged header `damaged` (journal-format
/// §4.1). With a first frame, a candidate is accepted only if its SHA-256
/// equals the first frame's `prev_hash`; candidates are the canonical
/// rebuild of `damaged` (every constant field and the CRC restored, the
/// journal_tag bytes taken from the first frame, or the journal_id from
/// `id_hint`, e.g. the event-id index) with zero, one or two bits of the
/// 24 free bytes flipped. Without a frame, the unique single-bit
/// correction that decodes is accepted. Returns None when nothing is
/// proven (never a guess).
pub fn recover_header(
    damaged: &[u8; HEADER_LEN],
    first: Option<&FirstFrameHint>,
    id_hint: Option<[u8; 16]>,
) -> Option<([u8; HEADER_LEN], HeaderProof)> {
    let Some(first) = first else {
        let mut found = None;
        for bit in 0..HEADER_LEN * 8 {
            let mut c = *damaged;
            c[bit / 8] ^= 1 << (bit % 8);
            if FileHeader::decode(&c).is_ok() {
                if found.is_some() {
                    return None;
                }
                found = Some(c);
            }
        }
        return found.map(|c| (c, HeaderProof::SingleBitCrc));
    };
    let mut tagged = *damaged;
    tagged[16..20].copy_from_slice(&first.tag);
    let mut hinted = None;
    if let Some(id) = id_hint {
        let mut b = *damaged;
        b[16..32].copy_from_slice(&id);
        hinted = Some(b);
    }
    // The version the damaged bytes name first, then the others.
    let named = u16::from_le_bytes([damaged[8], damaged[9]]);
    let mut versions = vec![FORMAT_VERSION];
    versions.extend(
        READ_VERSIONS
            .iter()
            .copied()
            .filter(|v| *v != FORMAT_VERSION),
    );
    versions.sort_by_key(|v| *v != named);
    let mut bases = Vec::new();
    for v in versions {
        bases.push(canonical_header(damaged, v));
        bases.push(canonical_header(&tagged, v));
        if let Some(b) = &hinted {
            bases.push(canonical_header(b, v));
        }
    }
    let bits: Vec<usize> = HEADER_FREE
        .iter()
        .flat_map(|r| r.clone())
        .flat_map(|byte| (0..8).map(move |bit| byte * 8 + bit))
        .collect();
    let proves = |c: [u8; HEADER_LEN]| -> Option<[u8; HEADER_LEN]> {
        let c = with_crc(c);
        (sha256(&c) == first.prev_hash && FileHeader::decode(&c).is_ok()).then_some(c)
    };
    let flip = |mut c: [u8; HEADER_LEN], bit: usize| {
        c[bit / 8] ^= 1 << (bit % 8);
        c
    };
    for base in &bases {
        if let Some(c) = proves(*base) {
            return Some((c, HeaderProof::FirstFrame));
        }
    }
    for base in &bases {
        for &i in &bits {
            if let Some(c) = proves(flip(*base, i)) {
                return Some((c, HeaderProof::FirstFrame));
            }
        }
    }
    for base in &bases {
        for (k, &i) in bits.iter().enumerate() {
            let once = flip(*base, i);
            for &j in &bits[k + 1..] {
                if let Some(c) = proves(flip(once, j)) {
                    return Some((c, HeaderProof::FirstFrame));
                }
            }
        }
    }
    None
}

/// Decoded fixed part of a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameHeader {
    pub version: u8,
    pub kind: FrameKind,
    pub flags: u16,
    pub payload_len: u32,
    pub journal_tag: [u8; 4],
    pub seq: u64,
    pub ts_unix_ns: u64,
    pub event_id: [u8; 16],
    pub prev_hash: [u8; 32],
    /// Total frame length including padding and trailer.
    pub frame_len: u32,
}

impl FrameHeader {
    pub fn batch_cont(&self) -> bool {
        self.flags & FLAG_BATCH_CONT != 0
    }
}

/// Length of a frame carrying `payload_len` bytes.
pub fn frame_len_for(payload_len: usize) -> usize {
    FRAME_HEAD_LEN + payload_len.div_ceil(8) * 8 + FRAME_TRAILER_LEN
}

/// Fields of a frame to encode.
pub struct FrameSpec<'a> {
    pub kind: FrameKind,
    pub batch_cont: bool,
    pub tag: [u8; 4],
    pub seq: u64,
    pub ts_unix_ns: u64,
    pub event_id: [u8; 16],
    pub prev_hash: [u8; 32],
    pub payload: &'a [u8],
}

/// Append the encoded frame to `out` and return the frame's SHA-256 (the
/// next frame's `prev_hash`). The caller has checked the payload cap.
pub fn encode_frame(spec: &FrameSpec<'_>, out: &mut Vec<u8>) -> [u8; 32] {
    let start = out.len();
    let flen = frame_len_for(spec.payload.len());
    let mut flags = FLAG_HAS_PREV_HASH;
    if spec.batch_cont {
        flags |= FLAG_BATCH_CONT;
    }
    out.extend_from_slice(&FRAME_MAGIC);
    out.push(FRAME_VERSION);
    out.push(spec.kind.to_byte());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(spec.payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&spec.tag);
    out.extend_from_slice(&spec.seq.to_le_bytes());
    out.extend_from_slice(&spec.ts_unix_ns.to_le_bytes());
    out.extend_from_slice(&spec.event_id);
    out.extend_from_slice(&spec.prev_hash);
    out.extend_from_slice(spec.payload);
    out.resize(start + flen - FRAME_TRAILER_LEN, 0);
    out.extend_from_slice(&(flen as u32).to_le_bytes());
    let crc = masked_crc(&out[start..start + flen - 4]);
    out.extend_from_slice(&crc.to_le_bytes());
    sha256(&out[start..start + flen])
}

/// Decode the fixed header at the start of `buf` and check what can be
/// checked from the header alone. Returns the header; `frame_len` may still
/// exceed `buf`.
pub fn decode_head(buf: &[u8]) -> Result<FrameHeader, Reason> {
    if buf.len() < FRAME_HEAD_LEN {
        return Err(
            if buf.is_empty() || buf[..buf.len().min(4)] == FRAME_MAGIC[..buf.len().min(4)] {
                Reason::Truncated
            } else {
                Reason::BadMagic
            },
        );
    }
    if buf[0..4] != FRAME_MAGIC {
        return Err(Reason::BadMagic);
    }
    if buf[4] != FRAME_VERSION {
        return Err(Reason::BadVersion(buf[4]));
    }
    let kind = FrameKind::from_byte(buf[5]).ok_or(Reason::BadKind(buf[5]))?;
    let flags = u16::from_le_bytes([buf[6], buf[7]]);
    if flags & !KNOWN_FLAGS != 0 || flags & FLAG_HAS_PREV_HASH == 0 {
        return Err(Reason::BadFlags(flags));
    }
    let payload_len = u32_at(buf, 8);
    if payload_len as usize > MAX_PAYLOAD {
        return Err(Reason::PayloadTooLarge(payload_len));
    }
    Ok(FrameHeader {
        version: buf[4],
        kind,
        flags,
        payload_len,
        journal_tag: [buf[12], buf[13], buf[14], buf[15]],
        seq: u64_at(buf, 16),
        ts_unix_ns: u64_at(buf, 24),
        event_id: arr16(&buf[32..48]),
        prev_hash: arr32(&buf[48..80]),
        frame_len: frame_len_for(payload_len as usize) as u32,
    })
}

/// Check the trailer (frame_len + CRC) of a complete frame `f` whose head
/// decoded as `h` (`f.len() == h.frame_len`).
pub fn check_trailer(h: &FrameHeader, f: &[u8]) -> Result<(), Reason> {
    let n = f.len();
    let found = u32_at(f, n - 8);
    if found != h.frame_len {
        // The CRC decides first: a torn write usually breaks both, and the
        // CRC is the stronger statement.
        if u32_at(f, n - 4) != masked_crc(&f[..n - 4]) {
            return Err(Reason::Crc);
        }
        return Err(Reason::LengthMismatch {
            expected: h.frame_len,
            found,
        });
    }
    if u32_at(f, n - 4) != masked_crc(&f[..n - 4]) {
        return Err(Reason::Crc);
    }
    Ok(())
}

/// Context-free decode of one frame at the start of `buf`: magic, version,
/// kind, flags, length cap, `frame_len` and CRC. Returns the header and the
/// payload. Never panics, whatever `buf` holds.
pub fn decode_frame(buf: &[u8]) -> Result<(FrameHeader, &[u8]), FrameError> {
    let h = decode_head(buf).map_err(|reason| FrameError { reason })?;
    let flen = h.frame_len as usize;
    if buf.len() < flen {
        return Err(FrameError {
            reason: Reason::Truncated,
        });
    }
    check_trailer(&h, &buf[..flen]).map_err(|reason| FrameError { reason })?;
    let payload = &buf[FRAME_HEAD_LEN..FRAME_HEAD_LEN + h.payload_len as usize];
    Ok((h, payload))
}

pub fn sha256(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

pub(crate) fn arr16(b: &[u8]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    a
}

pub(crate) fn arr32(b: &[u8]) -> [u8; 32] {
    let mut a = [0u8; 32];
    a.copy_from_slice(&b[..32]);
    a
}
