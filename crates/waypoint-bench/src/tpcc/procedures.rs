//! TPC-C's five transactions as stored procedures (seed 001 §V-A: TPC-C
//! as VoltDB runs it), so that the `command` scheme can log the calls
//! and recovery can run them again.
//!
//! A transaction's parameters are what the terminal drew ([`Drawn`]):
//! the spec's inputs (`NewOrderInput`, `PaymentInput`, …, with
//! New-Order's rollback flag as its unused item number), and everything
//! else a body would otherwise take from the clock or the terminal (the
//! entry and delivery dates, the history row's key, the carrier, the
//! Stock-Level district and threshold). The body is the transaction
//! function of [`super::txns`] that the direct path runs too
//! ([`Drawn::run`]): one piece of code per transaction.
//!
//! Routing: a call runs in the partition of its home warehouse (the
//! tables keyed by warehouse register it as their partitioning key, so
//! `command` checks that a call keeps to it); a
//! New-Order with a line supplied by another warehouse, or a Payment of
//! another warehouse's customer, touches two warehouses and is a
//! multi-partition call ([`waypoint::Partition::All`]). The item table
//! is only read. History keys are unique per terminal, so calls of two
//! partitions never write one row.
//!
//! Invariant: a body reads nothing but its parameters and the database,
//! so a replayed call writes what the original wrote. The test hook
//! [`set_draw_inside_for_tests`] breaks exactly that (Payment draws its
//! date inside the body), and the determinism test must catch it.

use super::txns::{
    delivery, new_order, order_status, payment, stock_level, NewOrderInput, OrderStatusInput,
    PaymentInput,
};
use super::{
    Effect, Tables, CUSTOMER, CUSTOMER_BY_NAME, DELIVERY, DISTRICT, HISTORY, ITEM, NEW_ORDER,
    NEW_ORDER_TABLE, ORDER, ORDER_BY_CUSTOMER, ORDER_LINE, ORDER_STATUS, PAYMENT, STOCK,
    STOCK_LEVEL, WAREHOUSE,
};
use crate::workload::Ack;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use waypoint::{Error, Partition, PendingCall, PendingCommit, Procedures, Session, Transaction};

/// The procedures' names, in the order of [`super::TXN_TYPES`].
pub const PROCEDURES: [&str; 5] = [
    "tpcc_new_order",
    "tpcc_payment",
    "tpcc_order_status",
    "tpcc_delivery",
    "tpcc_stock_level",
];

/// The parameters of a call: the terminal's home warehouse, what it drew,
/// and the crash test's acknowledgement row (inserted with the call's
/// writes, whatever the transaction).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TpccCall<A> {
    pub w: u16,
    pub args: A,
    pub ack: Option<Ack>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewOrderArgs {
    pub input: NewOrderInput,
    /// O_ENTRY_D.
    pub now: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentArgs {
    pub input: PaymentInput,
    /// H_DATE.
    pub now: u64,
    pub history_key: [u8; 16],
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryArgs {
    pub carrier: u8,
    /// OL_DELIVERY_D.
    pub now: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockLevelArgs {
    pub d: u8,
    pub threshold: i32,
}

/// One drawn transaction: its type and everything its body takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Drawn {
    NewOrder(NewOrderArgs),
    Payment(PaymentArgs),
    OrderStatus(OrderStatusInput),
    Delivery(DeliveryArgs),
    StockLevel(StockLevelArgs),
}

impl Drawn {
    /// The index of its type in [`super::TXN_TYPES`].
    pub fn ty(&self) -> usize {
        match self {
            Drawn::NewOrder(_) => NEW_ORDER,
            Drawn::Payment(_) => PAYMENT,
            Drawn::OrderStatus(_) => ORDER_STATUS,
            Drawn::Delivery(_) => DELIVERY,
            Drawn::StockLevel(_) => STOCK_LEVEL,
        }
    }

    /// Is this a multi-partition transaction for home warehouse `w`?
    pub fn is_remote(&self, w: u16) -> bool {
        match self {
            Drawn::NewOrder(a) => a.remote(w),
            Drawn::Payment(a) => a.remote(w),
            _ => false,
        }
    }

    /// Run the transaction's body for home warehouse `w` (the direct path
    /// and the procedures both).
    pub(crate) fn run(
        &self,
        tx: &mut Transaction<'_>,
        t: &Tables,
        w: u16,
    ) -> Result<Effect, Error> {
        match self {
            Drawn::NewOrder(a) => a.run(tx, t, w),
            Drawn::Payment(a) => a.run(tx, t, w),
            Drawn::OrderStatus(a) => a.run(tx, t, w),
            Drawn::Delivery(a) => a.run(tx, t, w),
            Drawn::StockLevel(a) => a.run(tx, t, w),
        }
    }

    /// Make this transaction's call on `session` (see
    /// [`waypoint::Session::call_then`]), returning what it wrote.
    pub fn call(
        self,
        session: &mut Session,
        w: u16,
        ack: Option<Ack>,
        wait_now: bool,
    ) -> Result<(Effect, PendingCommit), Error> {
        fn one<A: Serialize>(
            session: &mut Session,
            name: &str,
            call: TpccCall<A>,
            wait_now: bool,
        ) -> Result<(Effect, PendingCommit), Error> {
            session.call_then::<_, Effect>(name, &call, wait_now)
        }
        let name = PROCEDURES[self.ty()];
        match self {
            Drawn::NewOrder(args) => one(session, name, TpccCall { w, args, ack }, wait_now),
            Drawn::Payment(args) => one(session, name, TpccCall { w, args, ack }, wait_now),
            Drawn::OrderStatus(args) => one(session, name, TpccCall { w, args, ack }, wait_now),
            Drawn::Delivery(args) => one(session, name, TpccCall { w, args, ack }, wait_now),
            Drawn::StockLevel(args) => one(session, name, TpccCall { w, args, ack }, wait_now),
        }
    }

    /// Hand this transaction's call over without waiting for it to run
    /// ([`waypoint::Session::submit`]).
    pub fn submit(self, session: &mut Session, w: u16) -> Result<PendingCall<Effect>, Error> {
        let name = PROCEDURES[self.ty()];
        let ack = None;
        match self {
            Drawn::NewOrder(args) => session.submit(name, &TpccCall { w, args, ack }),
            Drawn::Payment(args) => session.submit(name, &TpccCall { w, args, ack }),
            Drawn::OrderStatus(args) => session.submit(name, &TpccCall { w, args, ack }),
            Drawn::Delivery(args) => session.submit(name, &TpccCall { w, args, ack }),
            Drawn::StockLevel(args) => session.submit(name, &TpccCall { w, args, ack }),
        }
    }
}

/// The arguments of one procedure: where it runs and its body.
trait Args: DeserializeOwned + Send + 'static {
    /// Does it touch a warehouse other than `w`?
    fn remote(&self, _w: u16) -> bool {
        false
    }
    fn run(&self, tx: &mut Transaction<'_>, t: &Tables, w: u16) -> Result<Effect, Error>;
}

impl Args for NewOrderArgs {
    fn remote(&self, w: u16) -> bool {
        self.input.lines.iter().any(|l| l.supply_w != w)
    }

    fn run(&self, tx: &mut Transaction<'_>, t: &Tables, w: u16) -> Result<Effect, Error> {
        let o_id = new_order(tx, t, w, &self.input, self.now)?;
        Ok(Effect::NewOrder {
            w,
            d: self.input.d,
            o_id,
            c: self.input.c,
            lines: self.input.lines.len() as u8,
        })
    }
}

impl Args for PaymentArgs {
    fn remote(&self, w: u16) -> bool {
        self.input.c_w != w
    }

    fn run(&self, tx: &mut Transaction<'_>, t: &Tables, w: u16) -> Result<Effect, Error> {
        let now = if DRAW_INSIDE.load(Ordering::Relaxed) {
            // The broken variant: a value the parameters do not carry.
            u64::from(rand::random::<u32>())
        } else {
            self.now
        };
        payment(tx, t, w, &self.input, now, &self.history_key)?;
        Ok(Effect::Payment {
            w,
            d: self.input.d,
            amount: self.input.amount,
            history_key: self.history_key,
        })
    }
}

impl Args for OrderStatusInput {
    fn run(&self, tx: &mut Transaction<'_>, t: &Tables, w: u16) -> Result<Effect, Error> {
        order_status(tx, t, w, self).map(|()| Effect::None)
    }
}

impl Args for DeliveryArgs {
    fn run(&self, tx: &mut Transaction<'_>, t: &Tables, w: u16) -> Result<Effect, Error> {
        let orders = delivery(tx, t, w, self.carrier, self.now)?;
        Ok(Effect::Delivery {
            w,
            carrier: self.carrier,
            orders,
        })
    }
}

impl Args for StockLevelArgs {
    fn run(&self, tx: &mut Transaction<'_>, t: &Tables, w: u16) -> Result<Effect, Error> {
        stock_level(tx, t, w, self.d, self.threshold).map(|()| Effect::None)
    }
}

/// The broken variant of the determinism test: Payment draws H_DATE
/// inside its body instead of taking it from its parameters.
static DRAW_INSIDE: AtomicBool = AtomicBool::new(false);

/// Switch the broken variant on or off (a test hook: replay must then
/// give different rows from the original run).
#[doc(hidden)]
pub fn set_draw_inside_for_tests(on: bool) {
    DRAW_INSIDE.store(on, Ordering::Relaxed);
}

impl Tables {
    /// The tables and indexes as a stored procedure finds them.
    fn of(tx: &Transaction<'_>) -> waypoint::Result<Self> {
        Ok(Tables {
            warehouse: tx.table(WAREHOUSE)?,
            district: tx.table(DISTRICT)?,
            customer: tx.table(CUSTOMER)?,
            history: tx.table(HISTORY)?,
            new_order: tx.table(NEW_ORDER_TABLE)?,
            order: tx.table(ORDER)?,
            order_line: tx.table(ORDER_LINE)?,
            item: tx.table(ITEM)?,
            stock: tx.table(STOCK)?,
            customer_by_name: tx.index(CUSTOMER_BY_NAME)?,
            order_by_customer: tx.index(ORDER_BY_CUSTOMER)?,
        })
    }
}

/// The warehouse a row's key starts with (`schema`: big-endian `u16`).
fn warehouse_of_key(key: &[u8]) -> u64 {
    key.get(..2)
        .map_or(0, |w| u64::from(u16::from_be_bytes([w[0], w[1]])))
}

fn add<A: Args>(procedures: Procedures, name: &str) -> waypoint::Result<Procedures> {
    procedures.add(
        name,
        |c: &TpccCall<A>| {
            if c.args.remote(c.w) {
                Partition::All
            } else {
                Partition::Key(u64::from(c.w))
            }
        },
        |tx: &mut Transaction<'_>, c: &TpccCall<A>| {
            let t = Tables::of(tx)?;
            let effect = c.args.run(tx, &t, c.w)?;
            if let Some((table, key)) = &c.ack {
                let acks = tx.table(table)?;
                tx.insert(&acks, key, &[])?;
            }
            Ok(effect)
        },
    )
}

/// Register the five procedures and the key extractors of TPC-C's two
/// secondary indexes (a scheme that re-executes calls needs them at
/// open).
pub fn register(procedures: Procedures) -> waypoint::Result<Procedures> {
    let mut procedures = procedures
        .index(CUSTOMER_BY_NAME, super::name_extractor())?
        .index(ORDER_BY_CUSTOMER, super::order_extractor())?;
    // Every table whose key starts with the warehouse is partitioned by
    // it, so a home-warehouse call that strays is refused under
    // `command`, and a home Payment (whose history row is keyed by its
    // warehouse) is no barrier at replay; item (only read) is not.
    for table in [
        WAREHOUSE,
        DISTRICT,
        CUSTOMER,
        HISTORY,
        NEW_ORDER_TABLE,
        ORDER,
        ORDER_LINE,
        STOCK,
    ] {
        procedures = procedures.partition_key(table, warehouse_of_key)?;
    }
    let procedures = add::<NewOrderArgs>(procedures, PROCEDURES[NEW_ORDER])?;
    let procedures = add::<PaymentArgs>(procedures, PROCEDURES[PAYMENT])?;
    let procedures = add::<OrderStatusInput>(procedures, PROCEDURES[ORDER_STATUS])?;
    let procedures = add::<DeliveryArgs>(procedures, PROCEDURES[DELIVERY])?;
    add::<StockLevelArgs>(procedures, PROCEDURES[STOCK_LEVEL])
}
