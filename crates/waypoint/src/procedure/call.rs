//! `Session::call`: look the procedure up, decode its parameters, enter
//! the scheme's serial order (if it has one), run the body in a
//! transaction that carries the call to the commit hook (with whether
//! it must replay alone: `partition::is_barrier`), and commit. Under
//! executors a call is handed to its partition's executor (a
//! multi-partition call to all of them), which runs it through the same
//! path (`executor`); `Session::submit` hands it over without waiting.
//! Replay re-executes logged calls through the same path without the
//! order (`Session::replay_call`).
//!
//! Invariant: a call whose body fails (or panics) is rolled back and
//! reaches no log;
//! the serial order is held from before the transaction begins until its
//! commit record is appended, and released before waiting for
//! durability (so the partition's next call can run while this one's
//! record is synced: group commit).

use super::executor::{PendingCall, ReplyHandle};
use super::{Decoded, Output, Partition, Procedure};
use crate::error::{Error, Result};
use crate::txn::{PendingCommit, Session};
use serde::Serialize;
use std::sync::Arc;

fn typed<R: 'static>(name: &str, out: Output) -> Result<R> {
    out.downcast::<R>()
        .map(|r| *r)
        .map_err(|_| Error::ProcedureOutput {
            name: name.into(),
            expected: std::any::type_name::<R>(),
        })
}

impl Session {
    /// Does this database take writes only inside stored procedures (a
    /// scheme that logs calls: `command`)?
    pub fn writes_only_in_procedures(&self) -> bool {
        self.db.scheme.command_order().is_some()
    }

    /// Run stored procedure `name` with `params` in a transaction, commit
    /// it, and return its result once the commit is durable. One attempt:
    /// on `Conflict` (possible under the schemes without a serial order)
    /// nothing was changed and the call may be repeated.
    pub fn call<P: Serialize + ?Sized, R: 'static>(&mut self, name: &str, params: &P) -> Result<R> {
        let params = super::encode_params(name, params)?;
        let (out, pending) = self.call_encoded_then(name, &params, true)?;
        pending.wait()?;
        typed(name, out)
    }

    /// Like [`Session::call`], but return at commit, before the commit is
    /// durable: the result, and the handle whose `wait` acknowledges it.
    pub fn call_pipelined<P: Serialize + ?Sized, R: 'static>(
        &mut self,
        name: &str,
        params: &P,
    ) -> Result<(R, PendingCommit)> {
        self.call_then(name, params, false)
    }

    /// Return at commit with the handle, as [`Session::call_pipelined`];
    /// `wait_now`: the caller waits on it at once (as
    /// `Transaction::commit` does), so the wait syncs the log itself
    /// rather than leaving it to the log writer.
    pub fn call_then<P: Serialize + ?Sized, R: 'static>(
        &mut self,
        name: &str,
        params: &P,
        wait_now: bool,
    ) -> Result<(R, PendingCommit)> {
        let params = super::encode_params(name, params)?;
        let (out, pending) = self.call_encoded_then(name, &params, wait_now)?;
        Ok((typed(name, out)?, pending))
    }

    /// Do calls run on executor threads (`CommandOptions::executors`)?
    pub fn runs_calls_on_executors(&self) -> bool {
        self.db
            .scheme
            .command_order()
            .is_some_and(|o| o.executors().is_some())
    }

    /// Hand a call over without waiting for it to run: under executors it
    /// is queued (on its partition's executor, or on every executor for a
    /// multi-partition call) and this returns once it is queued (see the
    /// limit below); without them the call runs here first. One partition runs its calls in the order
    /// they were handed over; calls of different partitions, from one
    /// session too, run in no set order between them (a multi-partition
    /// call after each partition's earlier ones).
    /// The handle gives its result once it has run and acknowledges it
    /// once durable; a failure of the body comes through the handle.
    /// An unknown procedure or parameters that do not decode are refused
    /// here. While an executor the call goes to has
    /// [`EXECUTOR_QUEUE_LIMIT`](crate::EXECUTOR_QUEUE_LIMIT) calls queued,
    /// this waits for room (a multi-partition call for every executor's,
    /// holding back other multi-partition calls meanwhile), and returns
    /// `Closed` if the database closes first: calls handed over faster than
    /// they run are held back, not queued without bound. So a procedure
    /// body must not wait for the thread that hands calls over (a lock or
    /// a gate it holds, a thread it joins): past the limit, neither would
    /// go on.
    pub fn submit<P: Serialize + ?Sized, R: 'static>(
        &mut self,
        name: &str,
        params: &P,
    ) -> Result<PendingCall<R>> {
        let params = super::encode_params(name, params)?;
        let procedure = Arc::clone(self.db.procedures.get(name)?);
        let call = procedure.decode(&params)?;
        let name = Arc::clone(&procedure.name);
        Ok(match self.hand_over(procedure, call, params, false)? {
            Ok(reply) => PendingCall::queued(name, reply),
            Err(outcome) => PendingCall::ran(name, outcome),
        })
    }

    /// Run a call whose parameters are already encoded (a logged call);
    /// blocking, the result untyped.
    pub fn call_encoded(&mut self, name: &str, params: &[u8]) -> Result<Output> {
        let (out, pending) = self.call_encoded_then(name, params, true)?;
        pending.wait()?;
        Ok(out)
    }

    fn call_encoded_then(
        &mut self,
        name: &str,
        params: &[u8],
        wait_now: bool,
    ) -> Result<(Output, PendingCommit)> {
        let procedure = Arc::clone(self.db.procedures.get(name)?);
        let call = procedure.decode(params)?;
        match self.hand_over(procedure, call, params.to_vec(), wait_now)? {
            Ok(reply) => reply.take(),
            Err(outcome) => outcome,
        }
    }

    /// Queue a decoded call on its executor (`Ok`: its reply), or run it
    /// here, under the serial order if there is one (`Err`: its outcome).
    #[allow(clippy::type_complexity)]
    fn hand_over(
        &mut self,
        procedure: Arc<Procedure>,
        call: Box<dyn Decoded>,
        params: Vec<u8>,
        wait_now: bool,
    ) -> Result<std::result::Result<ReplyHandle, Result<(Output, PendingCommit)>>> {
        let scheme = Arc::clone(&self.db.scheme);
        let order = scheme.command_order();
        if let Some((order, executors)) = order.and_then(|o| o.executors().map(|e| (o, e))) {
            self.db.check_open()?;
            if super::executor::on_executor() {
                return Err(Error::Unsupported {
                    what: format!(
                        "calling procedure {} from inside a procedure on an executor thread (it would wait for its own executor)",
                        procedure.name
                    ),
                });
            }
            let reply = match call.partition() {
                Partition::Key(key) => {
                    executors.submit(order.partition_of(key), procedure, call, params, wait_now)
                }
                Partition::All => executors.submit_all(procedure, call, params, wait_now),
            };
            return reply.map(Ok);
        }
        Ok(Err(self.run_decoded(
            &procedure,
            call.as_ref(),
            &params,
            wait_now,
            order,
            order.map(|o| o.partitions()),
        )))
    }

    /// How an executor runs a call it took from its queue: as the caller
    /// would, under the serial order.
    pub(crate) fn run_on_executor(
        &mut self,
        procedure: &Procedure,
        call: &dyn Decoded,
        params: &[u8],
        wait_now: bool,
    ) -> Result<(Output, PendingCommit)> {
        let scheme = Arc::clone(&self.db.scheme);
        let order = scheme.command_order();
        debug_assert!(order.is_some(), "executors run only under a serial order");
        self.run_decoded(procedure, call, params, wait_now, order, order.map(|o| o.partitions()))
    }

    /// Re-execute a logged call at recovery, blocking, the result
    /// dropped: the replay orders the calls itself (`command::replay`),
    /// so the serial order is not entered, and a single-partition call's
    /// rows are checked against the partition count it ran under
    /// (`partitions`; `None`: not known, not checked) rather than the one
    /// in force now, under which they may fall in other partitions.
    pub(crate) fn replay_call(
        &mut self,
        name: &str,
        params: &[u8],
        partitions: Option<usize>,
    ) -> Result<()> {
        let procedure = Arc::clone(self.db.procedures.get(name)?);
        let call = procedure.decode(params)?;
        let (_, pending) = self.run_decoded(&procedure, call.as_ref(), params, true, None, partitions)?;
        pending.wait().map(|_| ())
    }

    /// Run a call under `order` (if any), its rows checked against
    /// `partitions` (if known), and commit it.
    fn run_decoded(
        &mut self,
        procedure: &Procedure,
        call: &dyn Decoded,
        params: &[u8],
        wait_now: bool,
        order: Option<&super::SerialOrder>,
        partitions: Option<usize>,
    ) -> Result<(Output, PendingCommit)> {
        let name: &str = &procedure.name;
        let partition = call.partition();
        let _serial = order.map(|o| o.enter(partition));
        let mut tx = self.begin()?;
        tx.call = Some((Arc::clone(&procedure.name), params.to_vec()));
        // An error drops the transaction: rolled back, nothing logged. So
        // does a panic of the body (its writes are only buffered): the
        // call's error, not the thread's end.
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call.run(&mut tx)))
            .unwrap_or_else(|panic| {
                Err(Error::Internal {
                    what: format!(
                        "procedure {name} panicked: {}",
                        super::panic_text(panic.as_ref())
                    ),
                })
            })?;
        tx.call_barrier = match partition {
            Partition::Key(routed) => {
                if let Some(partitions) = partitions {
                    super::partition::check(partitions, name, routed, &tx)?;
                }
                // Only a logged call needs to know (replay logs nothing).
                order.is_some() && super::partition::is_barrier(&tx)
            }
            Partition::All => true,
        };
        let pending = tx.commit_then(wait_now)?;
        Ok((out, pending))
    }
}
