//! The TPC-C workload of the simulator: the benchmark's own TPC-C
//! (`waypoint_bench::tpcc`: tables, load, the five transactions in the
//! standard mix, the consistency conditions) on one warehouse at a tiny
//! scale ([`CONFIG`]), so a seed loads in milliseconds and its data still
//! outgrows the simulator's small buffer pools.
//!
//! It owns the sessions' loop, the record of what each session committed
//! (every transaction's [`Effect`], taken from the terminal) and the checks
//! after recovery: the consistency conditions; every acknowledged
//! New-Order's order with all its lines, every acknowledged Payment's
//! history row, every acknowledged Delivery's orders delivered; the stock
//! rows agreeing with the order lines entered since the load (with the
//! conditions, a New-Order is wholly present or wholly absent, stock
//! included); the secondary indexes as large as their tables.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use waypoint::Database;
use waypoint_bench::tpcc::schema::{
    order_key, order_line_key, parse_order_key, History, Order, OrderLine, Stock,
};
use waypoint_bench::tpcc::{self, Effect, Tpcc, TpccConfig};
use waypoint_bench::workload::{is_abort, Worker, Workload};
use waypoint_bench::BenchError;

/// One warehouse, 333 items and stock rows, 10 customers and 10 loaded
/// orders per district (3 of them undelivered): about 2,000 rows, some
/// 100 pages of 4 KiB.
pub const CONFIG: TpccConfig = TpccConfig {
    warehouses: 1,
    scale_down: 300,
};

/// What one session did: the effects of its acknowledged transactions in
/// commit order, and the effect of the transaction whose commit failed
/// (neither acknowledged nor known to be lost), if any.
#[derive(Debug, Default, Clone)]
pub struct SessionModel {
    pub acked: Vec<Effect>,
    pub in_flight: Option<Effect>,
}

#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub sessions: Vec<SessionModel>,
}

impl Outcome {
    /// Acknowledged transactions, read-only ones included.
    pub fn acked_txns(&self) -> u64 {
        self.sessions.iter().map(|s| s.acked.len() as u64).sum()
    }
}

/// Create and load the TPC-C tables (one loader thread: the same pages
/// every time).
pub fn load(db: &Database) -> Result<(), BenchError> {
    Tpcc::new(CONFIG, 0).setup(db, 1).map(|_| ())
}

/// The loaded workload bound to `db`'s tables, with NURand run constants
/// drawn from `seed`. It reads the database: call it before injecting
/// faults, so that a failed read here is not taken for a failed run.
pub fn prepare(db: &Database, seed: u64) -> Result<Tpcc, BenchError> {
    let mut workload = Tpcc::new(CONFIG, seed);
    workload.setup(db, 1)?;
    Ok(workload)
}

/// Run up to `per_session` transactions of the mix on each of `sessions`
/// terminals of `workload` (session `w` seeded with `seed * 31 + w`), until
/// they are done or the engine fails with anything but an abort (a
/// conflict, an intended rollback): then every session stops.
pub fn run(
    db: &Database,
    workload: &Tpcc,
    sessions: u32,
    per_session: u32,
    seed: u64,
) -> Result<Outcome, BenchError> {
    let stop = AtomicBool::new(false);
    let models = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions)
            .map(|w| {
                let stop = &stop;
                scope.spawn(move || -> Result<SessionModel, BenchError> {
                    let seed = seed.wrapping_mul(31).wrapping_add(w as u64);
                    let mut terminal = workload.terminal(w as usize, seed)?;
                    let mut model = SessionModel::default();
                    let mut s = db.session();
                    for _ in 0..per_session {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let done = if s.writes_only_in_procedures() {
                            // `command`: the transaction as its stored
                            // procedure; its effect is known once it
                            // committed, before the durable wait.
                            match terminal.call(&mut s, true, None) {
                                Some((_, called)) => called.and_then(|p| p.wait().map(|_| ())),
                                None => unreachable!("TPC-C calls under command"),
                            }
                        } else {
                            let Ok(mut tx) = s.begin() else {
                                stop.store(true, Ordering::Relaxed);
                                break;
                            };
                            let (_, body) = terminal.next(&mut tx);
                            body.and_then(|()| tx.commit().map(|_| ()))
                        };
                        match done {
                            Ok(()) => model.acked.push(terminal.last_effect().clone()),
                            Err(e) if is_abort(&e) => {}
                            Err(_) => {
                                // The disk froze or failed. If the body
                                // failed, the commit never started and
                                // nothing may survive (the effect is
                                // `None`; the conditions catch leftovers).
                                model.in_flight = match terminal.last_effect() {
                                    Effect::None => None,
                                    e => Some(e.clone()),
                                };
                                stop.store(true, Ordering::Relaxed);
                                break;
                            }
                        }
                    }
                    Ok(model)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect::<Result<Vec<_>, _>>()
    })?;
    Ok(Outcome { sessions: models })
}

/// Keys and values of a scan.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// Reads of the check, each in a transaction of its own.
struct Reader<'a> {
    db: &'a Database,
    session: waypoint::Session,
}

impl Reader<'_> {
    fn get(&mut self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let t = self
            .db
            .table(table)
            .map_err(|e| format!("table {table}: {e}"))?;
        let mut tx = self.session.begin().map_err(|e| format!("begin: {e}"))?;
        tx.get(&t, key)
            .map_err(|e| format!("read of {table} {key:02x?}: {e}"))
    }

    fn all(&mut self, table: &str) -> Result<Rows, String> {
        let t = self
            .db
            .table(table)
            .map_err(|e| format!("table {table}: {e}"))?;
        let mut tx = self.session.begin().map_err(|e| format!("begin: {e}"))?;
        tx.scan(&t, .., usize::MAX)
            .map_err(|e| format!("scan of {table}: {e}"))
    }

    fn order(&mut self, w: u16, d: u8, o: u32) -> Result<Option<Order>, String> {
        self.get("tpcc_order", &order_key(w, d, o))?
            .map(|v| Order::decode(&v).ok_or_else(|| format!("order {o} of district {d}: bad row")))
            .transpose()
    }
}

/// Where effect `i` of session `w` came from, for messages.
fn whose(w: usize, i: usize, acked: bool) -> String {
    if acked {
        format!("session {w}'s acknowledged transaction {i}")
    } else {
        format!("session {w}'s unacknowledged in-flight transaction")
    }
}

/// Check an acknowledged effect: everything it wrote is there.
fn check_acked(r: &mut Reader, effect: &Effect, who: &str) -> Result<(), String> {
    match *effect {
        Effect::None => {}
        Effect::NewOrder {
            w,
            d,
            o_id,
            c,
            lines,
        } => {
            let at = format!("{who}, new-order {o_id} of district {d}");
            let order = r
                .order(w, d, o_id)?
                .ok_or_else(|| format!("{at}: the order is lost"))?;
            if (order.c_id, order.ol_cnt) != (c, lines) {
                return Err(format!(
                    "{at}: the order is another one (customer {}, {} lines; committed: \
                     customer {c}, {lines} lines)",
                    order.c_id, order.ol_cnt
                ));
            }
            for ol in 1..=lines {
                if r.get("tpcc_order_line", &order_line_key(w, d, o_id, ol))?
                    .is_none()
                {
                    return Err(format!("{at}: order line {ol} of {lines} is lost"));
                }
            }
        }
        Effect::Payment {
            w,
            d,
            amount,
            history_key,
        } => {
            let at = format!("{who}, payment of {amount} cents to district {d}");
            let row = r
                .get("tpcc_history", &history_key)?
                .ok_or_else(|| format!("{at}: its history row is lost"))?;
            let h = History::decode(&row).ok_or_else(|| format!("{at}: bad history row"))?;
            if (h.w_id, h.d_id, h.amount) != (w, d, amount) {
                return Err(format!("{at}: its history row says {h:?}"));
            }
        }
        Effect::Delivery { w, carrier, orders } => {
            for (d, &o_id) in (1..).zip(orders.iter()) {
                if o_id == 0 {
                    continue;
                }
                let at = format!("{who}, delivery of order {o_id} of district {d}");
                let order = r
                    .order(w, d, o_id)?
                    .ok_or_else(|| format!("{at}: the order is gone"))?;
                if order.carrier_id != carrier {
                    return Err(format!(
                        "{at}: O_CARRIER_ID is {}, the delivery set {carrier} (delivery lost)",
                        order.carrier_id
                    ));
                }
                if r.get("tpcc_new_order", &order_key(w, d, o_id))?.is_some() {
                    return Err(format!("{at}: its new-order row is back (delivery lost)"));
                }
            }
        }
    }
    Ok(())
}

/// Check an unacknowledged New-Order: if its order is there, so is every
/// line (whether it is there is not known: its commit failed).
fn check_in_flight(r: &mut Reader, effect: &Effect, who: &str) -> Result<(), String> {
    let Effect::NewOrder {
        w,
        d,
        o_id,
        c,
        lines,
    } = *effect
    else {
        // Payment and Delivery in part break conditions 5 and 7 to 10.
        return Ok(());
    };
    // Another session may have taken the number if this commit failed
    // before it was installed: only an order with this one's customer and
    // size can be this one.
    let mine = r
        .order(w, d, o_id)?
        .is_some_and(|o| (o.c_id, o.ol_cnt) == (c, lines));
    if mine {
        for ol in 1..=lines {
            if r.get("tpcc_order_line", &order_line_key(w, d, o_id, ol))?
                .is_none()
            {
                return Err(format!(
                    "{who}, new-order {o_id} of district {d}: the order is there, order line \
                     {ol} of {lines} is not (partial)"
                ));
            }
        }
    }
    Ok(())
}

/// Per stock row, S_ORDER_CNT, S_YTD and S_REMOTE_CNT start at 0 and only
/// New-Order changes them, once per order line it enters: they must equal
/// the count, the quantities and the remote count of the lines of orders
/// entered since the load (a New-Order whose stock updates survived
/// without its lines, or the reverse, breaks this).
fn check_stock(r: &mut Reader) -> Result<(), String> {
    let loaded = CONFIG.orders_per_district();
    let mut want: BTreeMap<(u16, u32), (u32, u32, u32)> = BTreeMap::new();
    for (k, v) in r.all("tpcc_order_line")? {
        let (w, d, o) =
            parse_order_key(&k).ok_or_else(|| format!("order line key {k:02x?}: malformed"))?;
        if o <= loaded {
            continue;
        }
        let line = OrderLine::decode(&v)
            .ok_or_else(|| format!("order line of order {o} of district {d}: bad row"))?;
        let e = want.entry((line.supply_w_id, line.i_id)).or_default();
        e.0 += 1;
        e.1 += line.quantity as u32;
        e.2 += (line.supply_w_id != w) as u32;
    }
    for (k, v) in r.all("tpcc_stock")? {
        let (w, i) = match k.as_slice() {
            [a, b, rest @ ..] if rest.len() == 4 => (
                u16::from_be_bytes([*a, *b]),
                u32::from_be_bytes(rest.try_into().unwrap_or_default()),
            ),
            _ => return Err(format!("stock key {k:02x?}: malformed")),
        };
        let s = Stock::decode(&v).ok_or_else(|| format!("stock of item {i}: bad row"))?;
        let (cnt, ytd, remote) = want.remove(&(w, i)).unwrap_or_default();
        if (s.order_cnt as u32, s.ytd, s.remote_cnt as u32) != (cnt, ytd, remote) {
            return Err(format!(
                "stock of item {i} of warehouse {w}: S_ORDER_CNT {}, S_YTD {}, S_REMOTE_CNT {}; \
                 the order lines entered since the load say {cnt}, {ytd}, {remote} \
                 (a New-Order applied in part)",
                s.order_cnt, s.ytd, s.remote_cnt
            ));
        }
    }
    if let Some(((w, i), _)) = want.first_key_value() {
        return Err(format!(
            "order lines name item {i} of warehouse {w}, which has no stock row"
        ));
    }
    Ok(())
}

/// After recovery: the consistency conditions; every acknowledged
/// transaction's writes present; an in-flight New-Order whole or absent;
/// stock agreeing with the order lines; indexes as large as their tables;
/// every tree checks out. The error says which check failed.
pub fn verify(db: &Database, outcome: &Outcome) -> Result<(), String> {
    tpcc::verify(db).map_err(|e| e.to_string())?;
    let mut r = Reader {
        db,
        session: db.session(),
    };
    for (w, m) in outcome.sessions.iter().enumerate() {
        for (i, effect) in m.acked.iter().enumerate() {
            check_acked(&mut r, effect, &whose(w, i, true))?;
        }
        if let Some(effect) = &m.in_flight {
            check_in_flight(&mut r, effect, &whose(w, 0, false))?;
        }
    }
    check_stock(&mut r)?;
    drop(r);
    let counts: BTreeMap<String, usize> = db
        .check_integrity()
        .map_err(|err| format!("integrity check failed: {err}"))?
        .into_iter()
        .collect();
    for (index, table) in [
        ("tpcc_customer_by_name", "tpcc_customer"),
        ("tpcc_order_by_customer", "tpcc_order"),
    ] {
        let (i, t) = (counts.get(index), counts.get(table));
        if i != t {
            return Err(format!(
                "index {index} has {i:?} entries, table {table} {t:?} rows"
            ));
        }
    }
    Ok(())
}
