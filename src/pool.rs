//! Work handed to helper threads, its results taken back in the order it
//! was handed out.
//!
//! `history ingest` reads, hashes and journals on its own thread and
//! redacts on these: the captures must still reach the journal in the
//! order of the files, so results are held back until every earlier one
//! has been taken. The queue of work not yet started is bounded (the
//! caller blocks when it is full), so memory stays bounded by the jobs in
//! flight. A job that panics yields [`Panicked`] in its place instead of
//! leaving the caller waiting for it.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

/// A job whose work panicked; the message, where it was a string.
#[derive(Debug)]
pub struct Panicked(pub String);

/// Handle to the running workers (see [`run`]).
pub struct Pool<J, R> {
    tx: Option<SyncSender<(u64, J)>>,
    rx: Receiver<(u64, Result<R, Panicked>)>,
    submitted: u64,
    taken: u64,
    early: BTreeMap<u64, Result<R, Panicked>>,
}

impl<J, R> Pool<J, R> {
    /// Hands `job` to a worker; blocks while the queue is full.
    pub fn submit(&mut self, job: J) {
        let seq = self.submitted;
        self.submitted += 1;
        if let Some(tx) = &self.tx {
            // The workers outlive the pool's sender (see `run`), so a send
            // fails only when every worker is gone; `wait` then reports
            // the job as panicked.
            if tx.send((seq, job)).is_err() {
                self.early
                    .insert(seq, Err(Panicked("no worker is left".into())));
            }
        }
    }

    /// Jobs handed out whose results have not been taken.
    pub fn in_flight(&self) -> u64 {
        self.submitted - self.taken
    }

    /// The next result in order if it is ready, without waiting.
    pub fn ready(&mut self) -> Option<Result<R, Panicked>> {
        while let Ok((seq, r)) = self.rx.try_recv() {
            self.early.insert(seq, r);
        }
        self.take()
    }

    /// The next result in order, waiting for it; `None` when every job
    /// handed out has been taken.
    pub fn wait(&mut self) -> Option<Result<R, Panicked>> {
        if self.taken == self.submitted {
            return None;
        }
        while !self.early.contains_key(&self.taken) {
            match self.rx.recv() {
                Ok((seq, r)) => {
                    self.early.insert(seq, r);
                }
                Err(_) => {
                    let seq = self.taken;
                    self.early
                        .insert(seq, Err(Panicked("no worker is left".into())));
                }
            }
        }
        self.take()
    }

    fn take(&mut self) -> Option<Result<R, Panicked>> {
        let r = self.early.remove(&self.taken)?;
        self.taken += 1;
        Some(r)
    }
}

/// Runs `body` with a pool of `workers` threads (at least one) applying
/// `work` to each submitted job; at most `queue` jobs (at least one) wait
/// unstarted, and `submit` blocks beyond. Results not taken when `body`
/// returns are dropped.
pub fn run<J, R, T>(
    workers: usize,
    queue: usize,
    work: impl Fn(J) -> R + Sync,
    body: impl FnOnce(&mut Pool<J, R>) -> T,
) -> T
where
    J: Send,
    R: Send,
{
    let workers = workers.max(1);
    let (tx, jobs) = sync_channel::<(u64, J)>(queue.max(1));
    let jobs = Mutex::new(jobs);
    let (done_tx, rx) = channel();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let jobs = &jobs;
            let done_tx = done_tx.clone();
            let work = &work;
            s.spawn(move || loop {
                // The lock is held only to take a job, never while working.
                let next = match jobs.lock() {
                    Ok(q) => q.recv(),
                    Err(_) => return,
                };
                let Ok((seq, job)) = next else { return };
                let r = catch_unwind(AssertUnwindSafe(|| work(job))).map_err(|p| {
                    Panicked(
                        p.downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "a worker panicked".into()),
                    )
                });
                if done_tx.send((seq, r)).is_err() {
                    return;
                }
            });
        }
        drop(done_tx);
        let mut pool = Pool {
            tx: Some(tx),
            rx,
            submitted: 0,
            taken: 0,
            early: BTreeMap::new(),
        };
        let out = body(&mut pool);
        // Closing the queue lets the workers finish their loops; the scope
        // joins them.
        pool.tx = None;
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_submission_order() {
        // Later jobs finish first (less work), yet come back in order.
        let got = run(
            3,
            3,
            |n: u64| {
                let mut x = 0u64;
                for i in 0..(200 - n) * 2_000 {
                    x = x.wrapping_add(i ^ n);
                }
                (n, x)
            },
            |pool| {
                let mut got = Vec::new();
                for n in 0..200 {
                    pool.submit(n);
                    while let Some(r) = pool.ready() {
                        got.push(r.expect("no panic").0);
                    }
                }
                while let Some(r) = pool.wait() {
                    got.push(r.expect("no panic").0);
                }
                assert_eq!(pool.in_flight(), 0);
                got
            },
        );
        assert_eq!(got, (0..200).collect::<Vec<_>>());
    }

    #[test]
    fn a_panicking_job_is_reported_in_its_place() {
        let got = run(
            2,
            2,
            |n: u32| {
                if n == 3 {
                    panic!("job three");
                }
                n * 10
            },
            |pool| {
                for n in 0..6 {
                    pool.submit(n);
                }
                let mut got = Vec::new();
                while let Some(r) = pool.wait() {
                    got.push(r.map_err(|p| p.0));
                }
                got
            },
        );
        assert_eq!(
            got,
            vec![
                Ok(0),
                Ok(10),
                Ok(20),
                Err("job three".to_owned()),
                Ok(40),
                Ok(50)
            ]
        );
    }

    #[test]
    fn nothing_in_flight_means_next_is_none() {
        let none = run(1, 1, |n: u8| n, |pool| pool.wait().is_none());
        assert!(none);
    }
}
