//! Reading a hook's payload from stdin: with a deadline, stopping at the
//! end of the first complete JSON object rather than at EOF.
//!
//! Owns: [`STDIN_DEADLINE`], the incremental [`ObjectScanner`] that finds
//! where the first top-level object ends, and [`read_payload`], the
//! poll-and-read loop around it.
//!
//! Why not read to EOF: the harness may keep the pipe open after writing
//! the payload (`(echo "$PAYLOAD"; sleep 5) | abcd hook session-end`), and a
//! SessionEnd hook that waits for EOF is killed at the end of the 1.5 s
//! budget all SessionEnd hooks share, losing the capture.
//!
//! Must never: wait past the deadline, truncate an over-cap payload into a
//! short parse, change stdin's file status flags (the descriptor may be
//! shared with the harness or a terminal, so it is never made non-blocking;
//! a descriptor that already is one is handled), or print anything.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use thiserror::Error;

/// How long a hook waits for a complete payload on stdin, counted from the
/// first read. SessionEnd hooks share a 1.5 s budget; 1 s leaves the half
/// second after it for process start-up and the stage itself (a few
/// milliseconds for a 1 MiB transcript). The deadline is absolute: a
/// payload arriving slowly in pieces does not extend it (a trickle that
/// reset it could hold the hook past its budget), and anything still
/// incomplete when it passes is dropped with one line on stderr. A harness
/// writes its payload in one go, so a real one is never near it.
pub const STDIN_DEADLINE: Duration = Duration::from_millis(1000);

/// First read size: every real payload (a few KiB) arrives in one read.
const FIRST_READ: usize = 64 << 10;

/// Why no payload could be taken from stdin.
#[derive(Debug, Error)]
pub enum StdinError {
    #[error("no complete JSON payload on stdin within {} ms ({got} bytes arrived and stdin is still open); nothing captured", waited.as_millis())]
    Deadline { waited: Duration, got: usize },
    #[error("the payload is over the {cap}-byte cap; it was discarded unparsed")]
    OverCap { cap: usize },
    #[error("stdin is a terminal, not a harness payload; nothing captured (to run a hook by hand, pipe the JSON payload in: `abcd hook stop < payload.json`)")]
    Terminal,
    #[error("stdin could not be read ({0}); nothing captured")]
    Io(#[source] std::io::Error),
}

/// Where the scanner stands after the bytes fed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// Only whitespace, or an object not yet closed: more bytes are needed.
    Pending,
    /// The first object ends just before this offset (counted from the
    /// first byte ever fed, leading whitespace included).
    Complete(usize),
    /// The first non-whitespace byte, at this offset, cannot start an
    /// object: waiting for more bytes cannot help.
    NotAnObject(usize),
}

/// Finds the end of the first top-level JSON object in a byte stream fed in
/// pieces, cut anywhere, without parsing it: it tracks only whether it is
/// inside a string (and an escape there) and the nesting depth of braces
/// and brackets outside strings. Leading JSON whitespace (space, tab, LF,
/// CR) is skipped. Bytes are never decoded, so it is UTF-8 agnostic: every
/// byte of a multi-byte UTF-8 sequence is ≥ 0x80 and never mistaken for
/// structure.
///
/// On valid JSON it reports exactly where serde_json's object ends; it does
/// not validate, so on invalid bytes it may report `Complete` for an object
/// serde_json then rejects — but never for a prefix that serde_json could
/// still complete (it never cuts an object short). Both are fuzzed against
/// serde_json (`crate::fuzz::hook_inputs`). Once it answers `Complete` or
/// `NotAnObject`, the answer sticks.
#[derive(Debug, Clone, Default)]
pub struct ObjectScanner {
    /// Bytes fed so far.
    seen: usize,
    /// Open braces and brackets outside strings.
    depth: usize,
    state: State,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    #[default]
    Before,
    Structure,
    Str,
    /// Just after a backslash in a string.
    Escape,
    /// Inside the four hex digits of a `\u` escape, with this many left.
    /// They are skipped whatever they are, as serde_json consumes them
    /// before checking, so a `"` there never closes the string.
    Hex(u8),
    Done(Scan),
}

impl ObjectScanner {
    /// Feeds the next piece of the stream and answers for everything fed
    /// so far.
    pub fn feed(&mut self, chunk: &[u8]) -> Scan {
        if let State::Done(scan) = self.state {
            return scan;
        }
        for (i, &b) in chunk.iter().enumerate() {
            let at = self.seen + i;
            self.state = match self.state {
                State::Before => match b {
                    b' ' | b'\t' | b'\n' | b'\r' => State::Before,
                    b'{' => {
                        self.depth = 1;
                        State::Structure
                    }
                    _ => State::Done(Scan::NotAnObject(at)),
                },
                State::Structure => match b {
                    b'"' => State::Str,
                    b'{' | b'[' => {
                        self.depth += 1;
                        State::Structure
                    }
                    b'}' | b']' => {
                        self.depth -= 1;
                        if self.depth == 0 {
                            State::Done(Scan::Complete(at + 1))
                        } else {
                            State::Structure
                        }
                    }
                    _ => State::Structure,
                },
                State::Str => match b {
                    b'"' => State::Structure,
                    b'\\' => State::Escape,
                    _ => State::Str,
                },
                State::Escape if b == b'u' => State::Hex(4),
                State::Escape | State::Hex(1) => State::Str,
                State::Hex(n) => State::Hex(n - 1),
                done @ State::Done(_) => done,
            };
            if let State::Done(scan) = self.state {
                return scan;
            }
        }
        self.seen += chunk.len();
        Scan::Pending
    }

    /// The answer for everything fed so far.
    pub fn answer(&self) -> Scan {
        match self.state {
            State::Done(scan) => scan,
            _ => Scan::Pending,
        }
    }
}

/// Reads the hook payload from the process's stdin; see [`read_payload_from`].
pub fn read_payload(cap: usize, deadline: Duration) -> Result<Vec<u8>, StdinError> {
    let stdin = std::io::stdin();
    read_payload_from(stdin.as_fd(), cap, deadline)
}

/// Reads `fd` until the first complete JSON object has arrived and returns
/// exactly its bytes (leading whitespace included); bytes after it — a
/// newline, another object, garbage — are ignored and may stay unread.
/// EOF first returns whatever arrived (possibly nothing), as does a first
/// non-whitespace byte that cannot start an object: the parse then says
/// what is wrong with it. Never waits for EOF once the object is complete.
///
/// Refuses, without parsing anything: an object (or an unfinished one)
/// longer than `cap` bytes, whole; no complete object within `deadline`
/// (counted from this call, not reset by bytes arriving); a terminal with
/// nothing typed. Works on a pipe, socket, regular file, `/dev/null` or a
/// terminal, blocking or not, and treats a closed descriptor as empty.
pub fn read_payload_from(
    fd: BorrowedFd<'_>,
    cap: usize,
    deadline: Duration,
) -> Result<Vec<u8>, StdinError> {
    let start = Instant::now();
    let mut buf: Vec<u8> = Vec::new();
    let mut scan = ObjectScanner::default();
    // The first wait does not block: the usual payload is already there,
    // and only an empty wait needs the terminal check.
    let mut first_wait = true;
    loop {
        let timeout = if first_wait {
            Duration::ZERO
        } else {
            match deadline.checked_sub(start.elapsed()) {
                Some(left) if !left.is_zero() => left,
                _ => {
                    return Err(StdinError::Deadline {
                        waited: deadline,
                        got: buf.len(),
                    })
                }
            }
        };
        match wait_readable(fd, timeout)? {
            Ready::Yes => {}
            Ready::Closed => return Ok(buf),
            Ready::No => {
                if std::mem::take(&mut first_wait) && is_terminal(fd) {
                    return Err(StdinError::Terminal);
                }
                continue;
            }
        }
        first_wait = false;
        // Never hold more than cap + 1 bytes: one past the cap tells "at
        // the cap" from "over it".
        let want = (cap + 1 - buf.len()).min(FIRST_READ.max(buf.len()));
        let len = buf.len();
        buf.resize(len + want, 0);
        let n = match read_some(fd, &mut buf[len..]) {
            Ok(n) => n,
            // Nothing there after all (a descriptor left non-blocking by
            // whoever opened it): wait again.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                buf.truncate(len);
                continue;
            }
            Err(e) => return Err(StdinError::Io(e)),
        };
        buf.truncate(len + n);
        if n == 0 {
            return Ok(buf);
        }
        match scan.feed(&buf[len..]) {
            Scan::Complete(end) if end > cap => return Err(StdinError::OverCap { cap }),
            Scan::Complete(end) => {
                buf.truncate(end);
                return Ok(buf);
            }
            Scan::NotAnObject(_) => return Ok(buf),
            Scan::Pending if buf.len() > cap => return Err(StdinError::OverCap { cap }),
            Scan::Pending => {}
        }
    }
}

enum Ready {
    Yes,
    /// Not yet: the wait timed out or a signal interrupted it.
    No,
    /// Not an open descriptor: read as an empty stdin.
    Closed,
}

/// One `poll(2)` on `fd` for at most `timeout` (rounded up to whole
/// milliseconds so a sub-millisecond remainder is not a busy loop). A
/// signal (EINTR) answers "not yet", so the caller recomputes the time left
/// and a stream of signals cannot stretch the deadline. POLLHUP and POLLERR
/// count as ready: the read that follows returns the last bytes, EOF or the
/// error.
fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> Result<Ready, StdinError> {
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd, and the count says one.
    let rc = unsafe { libc::poll(&mut p, 1, ms) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(Ready::No);
        }
        return Err(StdinError::Io(e));
    }
    Ok(if rc == 0 {
        Ready::No
    } else if p.revents & libc::POLLNVAL != 0 {
        Ready::Closed
    } else {
        Ready::Yes
    })
}

/// One `read(2)`, retried on EINTR.
fn read_some(fd: BorrowedFd<'_>, into: &mut [u8]) -> std::io::Result<usize> {
    loop {
        // SAFETY: `into` is valid for writes of its length; `fd` is open
        // for the borrow's lifetime.
        let n = unsafe { libc::read(fd.as_raw_fd(), into.as_mut_ptr().cast(), into.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn is_terminal(fd: BorrowedFd<'_>) -> bool {
    std::io::IsTerminal::is_terminal(&fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::{FromRawFd, OwnedFd};

    /// Every way of cutting `bytes` into two pieces, plus byte by byte,
    /// answers as feeding it whole does.
    fn scan_all_ways(bytes: &[u8]) -> Scan {
        let whole = ObjectScanner::default().feed(bytes);
        for cut in 0..=bytes.len() {
            let mut s = ObjectScanner::default();
            s.feed(&bytes[..cut]);
            assert_eq!(s.feed(&bytes[cut..]), whole, "cut at {cut}");
        }
        let mut s = ObjectScanner::default();
        for b in bytes {
            s.feed(std::slice::from_ref(b));
        }
        assert_eq!(s.answer(), whole, "byte by byte");
        whole
    }

    #[test]
    fn finds_the_end_of_the_first_object_however_it_is_cut() {
        let obj = br#"{"session_id":"s1","cwd":"/w","nested":{"a":[1,{"b":[]}],"c":{}}}"#;
        assert_eq!(scan_all_ways(obj), Scan::Complete(obj.len()));
        for cut in 0..obj.len() {
            assert_eq!(
                ObjectScanner::default().feed(&obj[..cut]),
                Scan::Pending,
                "a prefix of {cut} bytes is not complete"
            );
        }
        assert_eq!(scan_all_ways(b"{}"), Scan::Complete(2));
    }

    #[test]
    fn strings_hide_braces_quotes_and_escapes() {
        let cases: &[&[u8]] = &[
            br#"{"a":"}"}"#,
            br#"{"a":"{{{[[["}"#,
            br#"{"a":"say \"}\" twice"}"#,
            br#"{"a":"ends in a backslash \\"}"#,
            br#"{"a":"\\\"}\\"}"#,
            br#"{"\"}":"\u007d\u0022}"}"#,
            "{\"a\":\"caf\u{e9} \u{1F600} }\"}".as_bytes(),
        ];
        for case in cases {
            assert!(
                serde_json::from_slice::<serde_json::Value>(case).is_ok(),
                "{case:?} is valid JSON"
            );
            assert_eq!(
                scan_all_ways(case),
                Scan::Complete(case.len()),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
        // The four bytes after \u are the escape's, even a quote.
        assert_eq!(scan_all_ways(br#"{"\u"}"#), Scan::Pending);
    }

    #[test]
    fn leading_whitespace_is_skipped_and_counted() {
        assert_eq!(scan_all_ways(b" \t\r\n{\"a\":1}"), Scan::Complete(11));
        assert_eq!(scan_all_ways(b" \n\t "), Scan::Pending);
        assert_eq!(scan_all_ways(b""), Scan::Pending);
        // Form feed is not JSON whitespace.
        assert_eq!(scan_all_ways(b" \x0c{}"), Scan::NotAnObject(1));
    }

    #[test]
    fn what_cannot_start_an_object_is_refused_at_once() {
        assert_eq!(scan_all_ways(b"hello {}"), Scan::NotAnObject(0));
        assert_eq!(scan_all_ways(b"  [1,2]"), Scan::NotAnObject(2));
        assert_eq!(scan_all_ways(b"\"str\""), Scan::NotAnObject(0));
        assert_eq!(scan_all_ways(b"}"), Scan::NotAnObject(0));
        assert_eq!(scan_all_ways(b"\xef\xbb\xbf{}"), Scan::NotAnObject(0));
    }

    #[test]
    fn bytes_after_the_object_do_not_matter() {
        for tail in [&b""[..], b"\n", b"{\"b\":2}", b"}}}]]] garbage \"", b"{"] {
            let mut v = b"{\"a\":{}}".to_vec();
            v.extend_from_slice(tail);
            assert_eq!(scan_all_ways(&v), Scan::Complete(8), "{tail:?}");
        }
        let mut s = ObjectScanner::default();
        assert_eq!(s.feed(b"{}"), Scan::Complete(2));
        assert_eq!(s.feed(b"{"), Scan::Complete(2), "the answer sticks");
    }

    #[test]
    fn garbage_inside_an_object_is_left_to_the_parser() {
        // Not JSON, but balanced: the scanner stops, serde_json refuses.
        let bad = b"{not json]";
        assert_eq!(scan_all_ways(bad), Scan::Complete(bad.len()));
        assert!(crate::hook::payload::HookPayload::parse(bad).is_err());
        // Unbalanced: it waits (for more bytes, EOF or the deadline).
        assert_eq!(scan_all_ways(b"{\"a\":[1,2}"), Scan::Pending);
    }

    proptest::proptest! {
        /// On any valid JSON object, with any whitespace before and any
        /// bytes after, the scanner ends where serde_json does.
        #[test]
        fn agrees_with_serde_json_on_valid_objects(
            v in json_object(),
            ws in "[ \t\r\n]{0,3}",
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
            cut in 0usize..10_000,
        ) {
            let mut bytes = ws.into_bytes();
            bytes.extend_from_slice(v.to_string().as_bytes());
            let end = bytes.len();
            bytes.extend_from_slice(&tail);
            let cut = cut % (bytes.len() + 1);
            let mut s = ObjectScanner::default();
            s.feed(&bytes[..cut]);
            proptest::prop_assert_eq!(s.feed(&bytes[cut..]), Scan::Complete(end));
            crate::fuzz::hook_inputs(&bytes);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Valid objects with one byte changed, inserted or removed: the
        /// fuzz entry point's properties (the scanner never cuts an object
        /// short, and ends where serde_json ends a valid one) hold on the
        /// near misses random bytes seldom reach.
        #[test]
        fn fuzz_properties_hold_on_damaged_objects(
            v in json_object(),
            at in 0usize..10_000,
            byte in proptest::sample::select(b"{}[]\"\\u:,0 a\x80".to_vec()),
            how in 0u8..3,
        ) {
            let mut bytes = v.to_string().into_bytes();
            let at = at % (bytes.len() + 1);
            match how {
                0 if at < bytes.len() => bytes[at] = byte,
                1 if at < bytes.len() => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, byte),
            }
            crate::fuzz::hook_inputs(&bytes);
        }

        #[test]
        fn fuzz_properties_hold_on_arbitrary_bytes(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        ) {
            crate::fuzz::hook_inputs(&bytes);
        }
    }

    fn json_object() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            // Quotes, backslashes, braces, control and non-ASCII characters.
            "[\"\\\\{}\\[\\]a\u{1}\n\u{e9}\u{1F600}]{0,6}".prop_map(serde_json::Value::from),
        ];
        let value = leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::btree_map("[\"\\\\}a]{0,3}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        });
        proptest::collection::btree_map("[\"\\\\}a]{0,3}", value, 0..4)
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect()))
    }

    fn pipe() -> (OwnedFd, std::fs::File) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors were just created and are owned here.
        unsafe {
            (
                OwnedFd::from_raw_fd(fds[0]),
                std::fs::File::from(OwnedFd::from_raw_fd(fds[1])),
            )
        }
    }

    /// The deadline used where a test must not reach it: far beyond any
    /// machine's scheduling delay, so no outcome depends on speed.
    const NEVER: Duration = Duration::from_secs(600);

    #[test]
    fn returns_the_object_while_the_writer_keeps_the_pipe_open() {
        let (r, mut w) = pipe();
        w.write_all(b"\n{\"a\":\"}\"} {\"b\":").unwrap();
        let got = read_payload_from(r.as_fd(), 1 << 20, NEVER).unwrap();
        assert_eq!(got, b"\n{\"a\":\"}\"}");
        drop(w);
    }

    #[test]
    fn an_object_arriving_in_pieces_is_assembled() {
        let (r, mut w) = pipe();
        let writer = std::thread::spawn(move || {
            for piece in [
                &b"  {\"a\""[..],
                b":[1,",
                b"{\"b\":\"x\\\"",
                b"\"}]}",
                b"\nmore",
            ] {
                w.write_all(piece).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            w
        });
        let got = read_payload_from(r.as_fd(), 1 << 20, NEVER).unwrap();
        assert_eq!(got, b"  {\"a\":[1,{\"b\":\"x\\\"\"}]}");
        drop(writer.join().unwrap());
    }

    #[test]
    fn eof_returns_what_arrived() {
        let (r, mut w) = pipe();
        w.write_all(b"{\"a\":").unwrap();
        drop(w);
        assert_eq!(
            read_payload_from(r.as_fd(), 1 << 20, NEVER).unwrap(),
            b"{\"a\":"
        );
        let (r, w) = pipe();
        drop(w);
        assert!(read_payload_from(r.as_fd(), 1 << 20, NEVER)
            .unwrap()
            .is_empty());
        let null = std::fs::File::open("/dev/null").unwrap();
        assert!(read_payload_from(null.as_fd(), 1 << 20, NEVER)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_regular_file_is_read_to_its_first_object() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("payload");
        std::fs::write(&f, b" {\"a\":1}\n{\"b\":2}\n").unwrap();
        let file = std::fs::File::open(&f).unwrap();
        assert_eq!(
            read_payload_from(file.as_fd(), 1 << 20, NEVER).unwrap(),
            b" {\"a\":1}"
        );
    }

    #[test]
    fn what_cannot_be_an_object_returns_without_waiting() {
        let (r, mut w) = pipe();
        w.write_all(b"[1,2").unwrap();
        assert_eq!(
            read_payload_from(r.as_fd(), 1 << 20, NEVER).unwrap(),
            b"[1,2"
        );
        drop(w);
    }

    #[test]
    fn an_unfinished_object_on_an_open_pipe_hits_the_deadline() {
        let (r, mut w) = pipe();
        w.write_all(b"{\"a\":").unwrap();
        let err = read_payload_from(r.as_fd(), 1 << 20, Duration::from_millis(50)).unwrap_err();
        assert!(
            matches!(err, StdinError::Deadline { got: 5, .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "no complete JSON payload on stdin within 50 ms (5 bytes arrived and stdin is still open); nothing captured"
        );
        // And with nothing at all on the pipe.
        let (r, _w2) = pipe();
        let err = read_payload_from(r.as_fd(), 1 << 20, Duration::from_millis(20)).unwrap_err();
        assert!(
            matches!(err, StdinError::Deadline { got: 0, .. }),
            "{err:?}"
        );
        drop(w);
    }

    #[test]
    fn a_non_blocking_descriptor_is_waited_on_not_spun_or_failed() {
        let (r, mut w) = pipe();
        // SAFETY: `r` is an open descriptor owned by this test.
        unsafe {
            let fl = libc::fcntl(r.as_raw_fd(), libc::F_GETFL);
            assert_eq!(
                libc::fcntl(r.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK),
                0
            );
        }
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            w.write_all(b"{}").unwrap();
            w
        });
        assert_eq!(read_payload_from(r.as_fd(), 1 << 20, NEVER).unwrap(), b"{}");
        drop(writer.join().unwrap());
    }

    #[test]
    fn over_cap_is_refused_whole_and_at_the_cap_is_read() {
        let at_cap = b"{\"a\":\"xxxx\"}";
        let cap = at_cap.len();
        let (r, mut w) = pipe();
        w.write_all(at_cap).unwrap();
        assert_eq!(read_payload_from(r.as_fd(), cap, NEVER).unwrap(), at_cap);
        // One byte more, complete or not, and with the pipe still open.
        for over in [&b"{\"a\":\"xxxxx\"}"[..], b"{\"a\":\"xxxxxxxxxxxxxxxx"] {
            let (r, mut w) = pipe();
            w.write_all(over).unwrap();
            let err = read_payload_from(r.as_fd(), cap, NEVER).unwrap_err();
            assert!(
                matches!(err, StdinError::OverCap { cap: c } if c == cap),
                "{err:?}"
            );
            assert_eq!(
                err.to_string(),
                format!("the payload is over the {cap}-byte cap; it was discarded unparsed")
            );
            drop(w);
        }
        // Leading whitespace counts toward the cap.
        let (r, mut w2) = pipe();
        w2.write_all(b" ").unwrap();
        w2.write_all(at_cap).unwrap();
        assert!(matches!(
            read_payload_from(r.as_fd(), cap, NEVER),
            Err(StdinError::OverCap { .. })
        ));
        drop(w);
    }

    #[test]
    fn a_descriptor_that_is_not_open_reads_as_empty() {
        // Far above any descriptor a process can have open (the kernel's
        // nr_open ceiling is 2^30), so poll answers POLLNVAL and no other
        // test's descriptor can be hit.
        // SAFETY: the number is only handed to poll(2), which reports it
        // as not open; nothing is read from or closed through it.
        let fd = unsafe { BorrowedFd::borrow_raw(i32::MAX - 1) };
        assert!(read_payload_from(fd, 1 << 20, NEVER).unwrap().is_empty());
    }
}
