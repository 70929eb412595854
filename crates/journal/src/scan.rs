//! Buffered, validating frame walker shared by readers, verify, the index
//! catch-up and the appender's locked recovery scan.
//!
//! Owns: reading the journal file with large positioned reads and deciding
//! whether the bytes at an offset are the next valid frame in context (seq,
//! tag, chain). Must never write, lock or keep a memory map of the live file
//! (a repair truncate would turn a map into SIGBUS).

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::JournalError;
use crate::format::{self, FrameHeader, Reason, FRAME_HEAD_LEN, FRAME_MAGIC};
use crate::sys;

/// Size of one positioned read. Measured on this machine: 1 MiB reads run at
/// 4.5–6 GB/s while 64 KiB reads lose about a quarter; 4 MiB amortises the
/// syscall further and still fits comfortably in L2/L3-friendly working sets.
pub const READ_CHUNK: usize = 4 << 20;

pub(crate) struct Scanner {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    buf_off: u64,
    buf_len: usize,
    pub file_len: u64,
}

/// Result of trying to read the next frame at an offset.
pub(crate) enum Step {
    /// A valid frame; `hash` is its SHA-256 when it was computed.
    Frame {
        h: FrameHeader,
        off: u64,
        hash: Option<[u8; 32]>,
    },
    /// Exactly at end of file.
    End,
    /// The bytes at this offset are not the expected frame.
    Invalid(Reason),
}

/// What the next frame must satisfy.
pub(crate) struct Expect<'a> {
    pub seq: u64,
    pub tag: [u8; 4],
    /// Check `prev_hash` against this (chain mode).
    pub prev_hash: Option<&'a [u8; 32]>,
    /// Compute the frame's SHA-256.
    pub hash: bool,
}

impl Scanner {
    pub fn open(path: &Path) -> Result<Scanner, JournalError> {
        let file = match sys::open(path, sys::Access::Read) {
            Err(JournalError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Err(JournalError::NotFound(path.to_path_buf()))
            }
            other => other?,
        };
        Scanner::from_file(file, path)
    }

    pub fn from_file(file: File, path: &Path) -> Result<Scanner, JournalError> {
        let file_len = file
            .metadata()
            .map_err(|e| JournalError::io("stat", path, e))?
            .len();
        Ok(Scanner {
            file,
            path: path.to_path_buf(),
            buf: Vec::new(),
            buf_off: 0,
            buf_len: 0,
            file_len,
        })
    }

    /// Re-read the file size; true if it changed.
    pub fn refresh_len(&mut self) -> Result<bool, JournalError> {
        let n = self
            .file
            .metadata()
            .map_err(|e| JournalError::io("stat", &self.path, e))?
            .len();
        let changed = n != self.file_len;
        if n < self.file_len {
            self.buf_len = 0;
        }
        self.file_len = n;
        Ok(changed)
    }

    /// Bytes `[off, off+len)`, or None if they extend past the known EOF
    /// (or the file shrank under us).
    pub fn get(&mut self, off: u64, len: usize) -> Result<Option<&[u8]>, JournalError> {
        let end = match off.checked_add(len as u64) {
            Some(e) if e <= self.file_len => e,
            _ => return Ok(None),
        };
        let have = off >= self.buf_off && end <= self.buf_off + self.buf_len as u64;
        if !have {
            let want = (len.max(READ_CHUNK) as u64).min(self.file_len - off) as usize;
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            let mut done = 0;
            while done < want {
                use std::os::unix::fs::FileExt;
                match self
                    .file
                    .read_at(&mut self.buf[done..want], off + done as u64)
                {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(JournalError::io("read", &self.path, e)),
                }
            }
            self.buf_off = off;
            self.buf_len = done;
            if done < len {
                return Ok(None);
            }
        }
        let s = (off - self.buf_off) as usize;
        Ok(Some(&self.buf[s..s + len]))
    }

    /// Validate the frame at `off` against `exp`.
    pub fn next(&mut self, off: u64, exp: &Expect<'_>) -> Result<Step, JournalError> {
        if off == self.file_len {
            return Ok(Step::End);
        }
        let avail = self.file_len.saturating_sub(off);
        let head_len = (FRAME_HEAD_LEN as u64).min(avail) as usize;
        let head = match self.get(off, head_len)? {
            Some(h) => h,
            None => return Ok(Step::Invalid(Reason::Truncated)),
        };
        let h = match format::decode_head(head) {
            Ok(h) => h,
            Err(r) => return Ok(Step::Invalid(r)),
        };
        let flen = h.frame_len as usize;
        if (flen as u64) > avail {
            // Check the length against the bytes left before allocating.
            return Ok(Step::Invalid(Reason::Truncated));
        }
        let f = match self.get(off, flen)? {
            Some(f) => f,
            None => return Ok(Step::Invalid(Reason::Truncated)),
        };
        if let Err(r) = format::check_trailer(&h, f) {
            return Ok(Step::Invalid(r));
        }
        if h.journal_tag != exp.tag {
            return Ok(Step::Invalid(Reason::JournalTag));
        }
        if h.seq != exp.seq {
            return Ok(Step::Invalid(Reason::SeqGap {
                expected: exp.seq,
                found: h.seq,
            }));
        }
        if let Some(p) = exp.prev_hash {
            if &h.prev_hash != p {
                return Ok(Step::Invalid(Reason::ChainMismatch));
            }
        }
        let hash = if exp.hash || exp.prev_hash.is_some() {
            Some(format::sha256(f))
        } else {
            None
        };
        Ok(Step::Frame { h, off, hash })
    }

    /// Payload of a frame just returned by `next` (still buffered).
    pub fn payload(&mut self, off: u64, h: &FrameHeader) -> Result<Vec<u8>, JournalError> {
        match self.get(off + FRAME_HEAD_LEN as u64, h.payload_len as usize)? {
            Some(p) => Ok(p.to_vec()),
            None => Err(JournalError::Damaged {
                offset: off,
                reason: Reason::Truncated,
            }),
        }
    }

    /// First 8-aligned offset in `[from, file_len)` where a frame that is
    /// valid on its own (magic, lengths, CRC, tag) starts. Used to tell a torn
    /// tail (nothing valid follows) from mid-file damage.
    pub fn resync(
        &mut self,
        from: u64,
        tag: [u8; 4],
    ) -> Result<Option<(u64, FrameHeader)>, JournalError> {
        let mut off = from.div_ceil(8) * 8;
        while off + format::MIN_FRAME_LEN as u64 <= self.file_len {
            let chunk = ((self.file_len - off) as usize).min(READ_CHUNK);
            let window = match self.get(off, chunk)? {
                Some(w) => w.to_vec(),
                None => return Ok(None),
            };
            let mut i = 0;
            while i + 4 <= window.len() {
                if window[i..i + 4] == FRAME_MAGIC {
                    let at = off + i as u64;
                    if let Some(h) = self.standalone(at, tag)? {
                        return Ok(Some((at, h)));
                    }
                }
                i += 8;
            }
            off += chunk as u64;
            off = off.div_ceil(8) * 8;
        }
        Ok(None)
    }

    /// Decode a frame at `at` without context (no seq/chain), requiring the tag.
    pub fn standalone(
        &mut self,
        at: u64,
        tag: [u8; 4],
    ) -> Result<Option<FrameHeader>, JournalError> {
        let avail = self.file_len.saturating_sub(at);
        if avail < format::MIN_FRAME_LEN as u64 {
            return Ok(None);
        }
        let head = match self.get(at, FRAME_HEAD_LEN)? {
            Some(h) => h,
            None => return Ok(None),
        };
        let h = match format::decode_head(head) {
            Ok(h) => h,
            Err(_) => return Ok(None),
        };
        if h.frame_len as u64 > avail || h.journal_tag != tag {
            return Ok(None);
        }
        let f = match self.get(at, h.frame_len as usize)? {
            Some(f) => f,
            None => return Ok(None),
        };
        Ok(format::check_trailer(&h, f).ok().map(|_| h))
    }

    /// SHA-256 of the frame that ends exactly at `end`, with its header, found
    /// through the `frame_len` suffix. None if no valid frame ends there.
    pub fn frame_ending_at(
        &mut self,
        end: u64,
        tag: [u8; 4],
    ) -> Result<Option<(FrameHeader, [u8; 32])>, JournalError> {
        if end < (format::HEADER_LEN + format::MIN_FRAME_LEN) as u64 || end > self.file_len {
            return Ok(None);
        }
        let flen = match self.get(end - 8, 4)? {
            Some(b) => format::u32_at(b, 0) as u64,
            None => return Ok(None),
        };
        if flen < format::MIN_FRAME_LEN as u64
            || flen % 8 != 0
            || flen > end - format::HEADER_LEN as u64
        {
            return Ok(None);
        }
        let start = end - flen;
        let h = match self.standalone(start, tag)? {
            Some(h) if h.frame_len as u64 == flen => h,
            _ => return Ok(None),
        };
        let hash = match self.get(start, flen as usize)? {
            Some(f) => format::sha256(f),
            None => return Ok(None),
        };
        Ok(Some((h, hash)))
    }

    /// True if `[from, to)` is all zero or holds an aligned all-zero 512-byte
    /// sector (etcd's torn-write test: the medium wrote nothing there).
    pub fn looks_torn(&mut self, from: u64, to: u64) -> Result<bool, JournalError> {
        let to = to.min(self.file_len).min(from + (1 << 20));
        if to <= from {
            return Ok(true);
        }
        let bytes = match self.get(from, (to - from) as usize)? {
            Some(b) => b,
            None => return Ok(false),
        };
        if bytes.iter().all(|&b| b == 0) {
            return Ok(true);
        }
        let first = (from.div_ceil(512) * 512 - from) as usize;
        let mut i = first;
        while i + 512 <= bytes.len() {
            if bytes[i..i + 512].iter().all(|&b| b == 0) {
                return Ok(true);
            }
            i += 512;
        }
        Ok(false)
    }
}

/// Read and validate the file header of the journal at `path`.
pub(crate) fn read_header(
    file: &File,
    path: &Path,
) -> Result<(format::FileHeader, [u8; 32]), JournalError> {
    let mut b = [0u8; format::HEADER_LEN];
    let complete =
        sys::pread_exact(file, &mut b, 0).map_err(|e| JournalError::io("read header", path, e))?;
    if !complete {
        return Err(JournalError::BadHeader {
            path: path.to_path_buf(),
            detail: "file shorter than the 64-byte header".into(),
        });
    }
    let h = format::FileHeader::decode(&b).map_err(|detail| JournalError::BadHeader {
        path: path.to_path_buf(),
        detail,
    })?;
    Ok((h, format::sha256(&b)))
}
