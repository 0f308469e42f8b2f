//! `Session::call`: look the procedure up, decode its parameters, enter
//! the scheme's serial order (if it has one), run the body in a
//! transaction that carries the call to the commit hook, and commit.
//!
//! Invariant: a call whose body fails is rolled back and reaches no log;
//! the serial order is held from before the transaction begins until its
//! commit record is appended, and released before waiting for
//! durability (so the partition's next call can run while this one's
//! record is synced: group commit).

use super::{Output, Partition};
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
        let scheme = Arc::clone(&self.db.scheme);
        let partition = call.partition();
        let order = scheme.command_order();
        let _serial = order.map(|o| o.enter(partition));
        let mut tx = self.begin()?;
        tx.call = Some((Arc::clone(&procedure.name), params.to_vec()));
        // An error drops the transaction: rolled back, nothing logged.
        let out = call.run(&mut tx)?;
        if let (Some(order), Partition::Key(routed)) = (order, partition) {
            super::partition::check(order, name, routed, &tx)?;
        }
        let pending = tx.commit_then(wait_now)?;
        Ok((out, pending))
    }
}
