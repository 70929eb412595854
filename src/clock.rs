//! Wall-clock time as Unix nanoseconds, and its two text forms.
//!
//! Owns: reading the clock (with the `ABCD_TEST_NOW` override integration
//! tests use to fake an old stage), the 26-character record/staging stamp
//! `YYYYMMDDTHHMMSS.nnnnnnnnnZ`, and RFC 3339 with a fixed nine-digit
//! fraction so that stored time strings sort lexically in time order.
//!
//! Must never: depend on a date crate or the local time zone (every string
//! here is UTC), or read the clock anywhere except [`now_unix_ns`] — every
//! other function is pure so callers can pass times explicitly.

use std::time::{SystemTime, UNIX_EPOCH};

/// Environment variable holding an RFC 3339 instant that replaces the real
/// clock. It exists so integration tests driving the real binary can stage
/// "eight days ago" without sleeping; it is ignored when it does not parse.
pub const TEST_NOW_ENV: &str = "ABCD_TEST_NOW";

const NANOS_PER_SEC: u64 = 1_000_000_000;
const SECS_PER_DAY: u64 = 86_400;

/// Latest instant `u64` nanoseconds can hold is in 2554; refusing years past
/// 9999 keeps every rendered year at four digits, so strings stay sortable.
const MAX_YEAR: i64 = 9999;

/// Current time in nanoseconds since the Unix epoch, honouring
/// [`TEST_NOW_ENV`]. A clock before 1970 reads as 0 rather than panicking.
/// CPU time this thread has used, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`):
/// what a piece of work cost when other threads share the cores.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn now_unix_ns() -> u64 {
    now_with_override(std::env::var(TEST_NOW_ENV).ok().as_deref())
}

/// The rule behind [`now_unix_ns`]: a parseable override wins, anything
/// else reads the system clock.
fn now_with_override(value: Option<&str>) -> u64 {
    if let Some(ns) = value.and_then(parse_rfc3339) {
        return ns;
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Broken-down UTC time of an instant.
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    nanos: u32,
}

fn to_civil(ns: u64) -> Civil {
    let secs = ns / NANOS_PER_SEC;
    let nanos = (ns % NANOS_PER_SEC) as u32;
    let days = (secs / SECS_PER_DAY) as i64;
    let rem = secs % SECS_PER_DAY;
    let (year, month, day) = civil_from_days(days);
    Civil {
        year,
        month,
        day,
        hour: (rem / 3600) as u32,
        minute: ((rem % 3600) / 60) as u32,
        second: (rem % 60) as u32,
        nanos,
    }
}

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31), proleptic
/// Gregorian. The era arithmetic (400-year cycles of 146 097 days) avoids
/// any table and is exact for every day `u64` nanoseconds can reach.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // 0..=365, March-based
    let mp = (5 * doy + 2) / 153; // 0..=11, March = 0
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Inverse of [`civil_from_days`]. Inputs are assumed range-checked.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// The record/staging stamp: UTC `YYYYMMDDTHHMMSS.nnnnnnnnnZ`, always 26
/// characters, so file names sort in capture order.
pub fn stamp(ns: u64) -> String {
    let c = to_civil(ns);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}.{:09}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second, c.nanos
    )
}

/// RFC 3339 UTC with exactly nine fraction digits
/// (`2026-09-09T06:24:22.051000000Z`); fixed width so strings sort.
pub fn rfc3339_nanos(ns: u64) -> String {
    let c = to_civil(ns);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second, c.nanos
    )
}

/// Parses RFC 3339 (`T` or `t` or space separator, optional fraction of any
/// length — digits past nanoseconds are dropped — and `Z` or `±HH:MM`).
/// Returns `None` for anything malformed, out of range, or before 1970.
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |from: usize, len: usize| -> Option<u32> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let year = i64::from(num(0, 4)?);
    let month = num(5, 2)?;
    let day = num(8, 2)?;
    let hour = num(11, 2)?;
    let minute = num(14, 2)?;
    let second = num(17, 2)?;
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    // 60 is accepted as a leap second and folds into the next minute.
    if hour > 23 || minute > 59 || second > 60 || year > MAX_YEAR {
        return None;
    }
    let mut i = 19;
    let mut nanos: u64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        let mut scale = NANOS_PER_SEC / 10;
        while let Some(d) = b.get(i).filter(|c| c.is_ascii_digit()) {
            nanos += u64::from(d - b'0') * scale;
            scale /= 10;
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset_secs: i64 = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = i64::from(num(i + 1, 2)?);
            let om = i64::from(num(i + 4, 2)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 3600 + om * 60;
            if *sign == b'+' {
                off
            } else {
                -off
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let local = days * SECS_PER_DAY as i64
        + i64::from(hour) * 3600
        + i64::from(minute) * 60
        + i64::from(second);
    let utc = u64::try_from(local - offset_secs).ok()?;
    utc.checked_mul(NANOS_PER_SEC)?.checked_add(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: u64 = NANOS_PER_SEC;

    #[test]
    fn known_dates_render_exactly() {
        assert_eq!(stamp(0), "19700101T000000.000000000Z");
        assert_eq!(rfc3339_nanos(0), "1970-01-01T00:00:00.000000000Z");
        // 2026-09-09T06:24:22.051Z, the reference example for record names.
        let t = 1_788_935_062 * NS + 51_000_000;
        assert_eq!(stamp(t), "20260909T062422.051000000Z");
        assert_eq!(stamp(t).len(), 26);
        assert_eq!(rfc3339_nanos(t), "2026-09-09T06:24:22.051000000Z");
        // Leap days: 2000 (divisible by 400) and 2024; end of 1999.
        assert_eq!(
            rfc3339_nanos(951_782_400 * NS),
            "2000-02-29T00:00:00.000000000Z"
        );
        assert_eq!(
            rfc3339_nanos(1_709_164_800 * NS),
            "2024-02-29T00:00:00.000000000Z"
        );
        assert_eq!(
            rfc3339_nanos(946_684_799 * NS + 999_999_999),
            "1999-12-31T23:59:59.999999999Z"
        );
    }

    #[test]
    fn civil_days_round_trip_across_leap_rules() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(
            days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 28),
            2
        );
        assert_eq!(
            days_from_civil(2100, 3, 1) - days_from_civil(2100, 2, 28),
            1
        );
        assert_eq!(
            days_from_civil(1900, 3, 1) - days_from_civil(1900, 2, 28),
            1
        );
        for d in (-800_000..800_000).step_by(97) {
            let (y, m, day) = civil_from_days(d);
            assert!(day >= 1 && day <= days_in_month(y, m), "{y}-{m}-{day}");
            assert_eq!(days_from_civil(y, m, day), d);
        }
    }

    #[test]
    fn parse_accepts_offsets_and_any_fraction() {
        let t = 1_788_935_062 * NS + 51_000_000;
        assert_eq!(parse_rfc3339("2026-09-09T06:24:22.051Z"), Some(t));
        assert_eq!(parse_rfc3339("2026-09-09T06:24:22.051000000Z"), Some(t));
        assert_eq!(parse_rfc3339("2026-09-09T08:24:22.051+02:00"), Some(t));
        assert_eq!(parse_rfc3339("2026-09-09T01:24:22.051-05:00"), Some(t));
        assert_eq!(parse_rfc3339("2026-09-09T06:24:22Z"), Some(t - 51_000_000));
        // Digits beyond nanoseconds are dropped, never rounded up.
        assert_eq!(parse_rfc3339("2026-09-09T06:24:22.0510000009Z"), Some(t));
        assert_eq!(parse_rfc3339(&rfc3339_nanos(t)), Some(t));
    }

    #[test]
    fn parse_refuses_malformed() {
        for bad in [
            "",
            "2026-09-09",
            "2026-09-09T06:24:22",
            "2026-09-09T06:24:22.Z",
            "2026-02-30T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-09-09T24:00:00Z",
            "2026-09-09T06:24:22+0200",
            "2026-09-09T06:24:22Zjunk",
            "1969-12-31T23:59:59Z",
            "２026-09-09T06:24:22Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn rendering_round_trips_through_parse(ns in proptest::prelude::any::<u64>()) {
            proptest::prop_assert_eq!(parse_rfc3339(&rfc3339_nanos(ns)), Some(ns));
            proptest::prop_assert_eq!(stamp(ns).len(), 26);
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,40}") {
            let _ = parse_rfc3339(&s);
        }
    }

    #[test]
    fn test_clock_override() {
        assert_eq!(
            now_with_override(Some("2026-09-01T00:00:00Z")),
            1_788_220_800 * NS
        );
        // 2024-01-01 is a lower bound every real clock running this passes.
        assert!(now_with_override(Some("yesterday")) > 1_704_067_200 * NS);
        assert!(now_with_override(None) > 1_704_067_200 * NS);
    }

    #[test]
    fn rendered_strings_sort_in_time_order() {
        let a = rfc3339_nanos(1_000 * NS + 9);
        let b = rfc3339_nanos(1_000 * NS + 10);
        let c = rfc3339_nanos(1_001 * NS);
        assert!(a < b && b < c);
        assert!(stamp(1_000 * NS + 9) < stamp(1_001 * NS));
    }
}
